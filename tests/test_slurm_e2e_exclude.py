"""Node exclusions end to end, on a real Slurm and a real DSFRO: a job's ``--exclude`` is
honoured by the plan, and a job placed where Slurm cannot start it (its memory taken by other
work, which DSFRO does not plan) is placed elsewhere next and runs there."""

from __future__ import annotations

import time
from pathlib import Path

from solver.slurm.decide import Action
from solver.slurm.record import decode
from tests.slurm_cluster_helpers import (
    GPUS,
    NODES,
    Cluster,
    MakeAdapter,
    assert_runs_as_planned,
    by_job,
    demand,
    job_script,
)


def test_a_jobs_exclude_list_is_honoured_by_the_plan(
    slurm: Cluster, dsfro: str, make_adapter: MakeAdapter, tmp_path: Path
) -> None:
    """Every node but the last excluded: it runs on the last, as planned."""
    last = f"node{NODES}"
    others = ",".join(f"node{n}" for n in range(1, NODES))
    job = slurm.sbatch("picky", demand("gpt3-1.3b", GPUS, GPUS), f"--gres=gpu:h100:{GPUS}",
                       f"--exclude={others}", script=job_script(tmp_path))  # fmt: skip
    adapter = make_adapter(dsfro)
    d = by_job(adapter.round())[job]
    assert d.action is Action.PLACE and d.target is not None
    assert d.target.nodes == (last,)
    slurm.wait_running([job])
    assert_runs_as_planned(slurm, tmp_path, d)


def test_a_job_that_never_starts_where_placed_is_placed_elsewhere_and_runs(
    slurm: Cluster, dsfro: str, make_adapter: MakeAdapter, tmp_path: Path
) -> None:
    """The memory of nodes 1 and 2 is taken by CPU jobs and one GPU of the last node by
    another job: an 8-GPU job asking 20 GB can start only on node 3. Each placement Slurm
    does not start puts its nodes in the job's record, excluded from then on: the job runs
    on node 3 after at most two such placements (before, it went back to the same node until
    the adapter gave it back to Slurm)."""
    for n in (1, 2):
        slurm.sbatch(f"mem{n}", None, f"--nodelist=node{n}", "--mem=60000", hold=False)
    gpu = slurm.sbatch("gpu", None, f"--nodelist=node{NODES}", "--gres=gpu:h100:1", hold=False)
    job = slurm.sbatch("big", demand("gpt3-1.3b", GPUS, GPUS), f"--gres=gpu:h100:{GPUS}",
                       "--mem=20000", script=job_script(tmp_path))  # fmt: skip
    slurm.wait_running([gpu])
    adapter = make_adapter(dsfro, replan_after=0.5, max_stale_placements=3)
    placed: list[tuple[str, ...]] = []
    for _ in range(12):
        d = by_job(adapter.round()).get(job)
        if d is not None and d.action is Action.PLACE and d.target is not None:
            placed.append(d.target.nodes)
        if slurm.jobs()[job].state == "RUNNING":
            break
        time.sleep(0.6)
    running = slurm.wait_running([job])[job]
    assert [name for name, _ in running.allocation] == ["node3"]
    assert placed[-1] == ("node3",) and len(placed) == len(set(placed)) <= 3, placed
    record = decode(running.admin_comment)
    assert record.state == "placed" and record.stale == len(placed) - 1
    assert set(record.avoid) == {n for nodes in placed[:-1] for n in nodes}
