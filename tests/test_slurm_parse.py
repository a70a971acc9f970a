"""Reading Slurm's output (captured from a real 22.05 cluster), host lists, and the errors
that name the field of output the adapter can't read."""

from __future__ import annotations

import json

import pytest

from solver.slurm.hostlist import HostlistError, expand, indices
from solver.slurm.state import (
    Gres,
    SlurmOutputError,
    in_partition,
    parse_gres,
    parse_sinfo,
    parse_squeue,
)
from tests.slurm_helpers import captured


def test_host_lists_expand_as_slurm_writes_them() -> None:
    assert expand("node[1-3,7]") == ["node1", "node2", "node3", "node7"]
    assert expand("gpu-a[01-03],login") == ["gpu-a01", "gpu-a02", "gpu-a03", "login"]
    assert expand("r[1-2]-n[1-2]") == ["r1-n1", "r1-n2", "r2-n1", "r2-n2"]
    assert expand("") == expand("(null)") == []
    assert indices("0-2,5") == [0, 1, 2, 5]
    assert indices("N/A") == []
    for bad in ("node[1-3", "node1]", "node[3-1]", "node[a-b]"):
        with pytest.raises(HostlistError):
            expand(bad)


def test_gres_entries() -> None:
    assert parse_gres("gpu:h100:4(IDX:0-1,6-7)", "x") == Gres("gpu", "h100", 4, (0, 1, 6, 7))
    assert parse_gres("gpu:8(S:0-1)", "x") == Gres("gpu", "", 8, ())
    assert parse_gres("gpu:h100:0(IDX:N/A)", "x") == Gres("gpu", "h100", 0, ())
    with pytest.raises(SlurmOutputError, match=r"node\.gres: not a GRES entry"):
        parse_gres("gpu:h100:x:y", "node.gres")


def test_nodes_of_a_captured_sinfo() -> None:
    nodes = {n.name: n for n in parse_sinfo(captured("mixed", "sinfo"))}
    assert sorted(nodes) == ["node1", "node2", "node3", "node4"]
    n1, n4 = nodes["node1"], nodes["node4"]
    assert (n1.gpu_type, n1.gpu_count, n1.state) == ("h100", 8, "mixed")
    assert n1.used_indices == frozenset(range(7))  # job 1: 0-2, job 2: 3-6
    assert n1.usable and not n1.draining
    assert n4.flags == {"DRAIN"} and n4.draining and not n4.usable
    assert n4.reason == "maintenance" and n4.partitions == ("gpu",)


def test_jobs_of_a_captured_squeue() -> None:
    jobs = {j.job_id: j for j in parse_squeue(captured("mixed", "squeue"))}
    multi, held = jobs[2], jobs[3]
    assert multi.state == "RUNNING" and not multi.held
    assert multi.allocation == (
        ("node1", Gres("gpu", "h100", 4, (3, 4, 5, 6))),
        ("node2", Gres("gpu", "h100", 4, (0, 1, 2, 3))),
    )
    assert held.held and held.pending and held.requested_gpus_per_node() == 2
    assert held.comment.startswith("dsfro:{")
    assert jobs[4].requeue is False and jobs[4].requested_gpus_per_node() == 0
    assert not jobs[5].held  # pending for resources, not held
    placed = {j.job_id: j for j in parse_squeue(captured("placed", "squeue"))}
    assert placed[7].required_nodes == ("node1",) and placed[7].tres_freq == "gpu:1605"
    assert placed[9].admin_comment.startswith('dsfro:{"at"')
    assert in_partition(list(placed.values()), "other") == []


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["jobs"][1].pop("job_id"), r"jobs\[1\]\.job_id: missing"),
        (lambda d: d["jobs"][0].update(job_id="x"), r"jobs\[0\]\.job_id: expected int"),
        (
            lambda d: d["jobs"][1].update(gres_detail=["gpu:h100:4(IDX:0-3)"]),
            r"jobs\[1\]\.gres_detail: 1 entries for 2 nodes",
        ),
        (
            lambda d: d["jobs"][0].update(required_nodes="node[1-"),
            r"jobs\[0\]\.required_nodes: unbalanced",
        ),
        (lambda d: d.update(errors=["Invalid user"]), r"Slurm reported errors"),
    ],
)
def test_unreadable_squeue_names_the_field(change: object, message: str) -> None:
    data = json.loads(captured("mixed", "squeue"))
    change(data)  # type: ignore[operator]
    with pytest.raises(SlurmOutputError, match=message):
        parse_squeue(json.dumps(data))


def test_unreadable_sinfo_names_the_field() -> None:
    data = json.loads(captured("mixed", "sinfo"))
    data["nodes"][2]["state_flags"] = "DRAIN"
    with pytest.raises(SlurmOutputError, match=r"nodes\[2\]\.state_flags: expected list"):
        parse_sinfo(json.dumps(data))
    with pytest.raises(SlurmOutputError, match="sinfo --json: not JSON"):
        parse_sinfo("sinfo: error: slurm_load_node: Unable to contact slurm controller")
