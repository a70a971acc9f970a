"""MIG on the wire: conversion to the domain and back, and INVALID_ARGUMENT for bad input."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.convert import allocation_to_proto, assignment_to_proto, plan_to_proto
from solver.app.limits import Limits
from solver.app.pipeline import solve_request, to_problem
from solver.app.validation import validate_request
from solver.core.solver import Solver
from solver.domain import JobAssignment, JobState, ObjectiveBreakdown, Plan
from solver.mig import GpuLayout, LayoutChange, MigInstance, SliceRequest
from solver.perfmodel.mig_catalog import load_mig_catalog
from solver.scoring.checker import check_plan
from tests.factories import A100_80GB, make_request
from tests.mig_helpers import make_mig_request

LIMITS = Limits()


def problems(req: pb.SolveRequest) -> dict[str, str]:
    return {v.field: v.description for v in validate_request(req, LIMITS)}


def test_a_snapshot_with_layouts_and_slice_jobs_converts() -> None:
    p = to_problem(make_mig_request(), LIMITS)
    node = p.cluster.node("a100-1")
    assert node.mig_layouts == (
        GpuLayout(5, (MigInstance("3g.40gb", 0, "small"), MigInstance("1g.10gb", 4))),
    )
    # H100-SXM (80 GiB) is not a catalog name: it has the geometry of its family's 80 GB type
    assert set(p.cluster.mig) == {A100_80GB, "H100-SXM"}
    h100 = load_mig_catalog()["H100-80GB"]
    assert p.cluster.mig["H100-SXM"].profiles == h100.profiles
    assert p.cluster.mig["H100-SXM"].gpu_type == "H100-SXM"
    assert p.cluster.mig[A100_80GB].profiles["3g.40gb"].memory_slices == 4
    jobs = {j.name: j for j in p.jobs}
    assert jobs["tiny"].slices == SliceRequest("", "2g.20gb")
    assert jobs["llm"].slices is None
    small = jobs["small"].current
    assert small is not None and small.mig == MigInstance("3g.40gb", 0)
    assert allocation_to_proto(small).mig_instance == pb.MigInstance(profile="3g.40gb", start=0)


def test_a_snapshot_without_mig_converts_as_before() -> None:
    p = to_problem(make_request(), LIMITS)
    assert p.cluster.mig == {}
    assert all(n.mig_layouts == () for n in p.cluster.nodes)
    assert all(j.slices is None and (j.current is None or j.current.mig is None) for j in p.jobs)


def test_a_slice_assignment_carries_kubernetes_and_slurm_names() -> None:
    p = to_problem(make_mig_request(), LIMITS)
    a = JobAssignment("tiny", JobState.RUNNING, None, mig=MigInstance("1g.10gb", 4))
    out = assignment_to_proto(a)
    assert (out.mig_resource, out.slurm_gres) == ("nvidia.com/mig-1g.10gb", "gpu:1g.10gb")
    assert out.mig_instance == pb.MigInstance(profile="1g.10gb", start=4)
    plan = Plan(
        (a,),
        ObjectiveBreakdown(0, 0, 0, 0, 0, 0),
        (LayoutChange("a100-0", GpuLayout(6, (MigInstance("7g.80gb", 0),))),),
    )
    wire = plan_to_proto(plan, p)
    assert [
        (c.node, c.layout.gpu_index, c.layout.instances[0].profile) for c in wire.layout_changes
    ] == [("a100-0", 6, "7g.80gb")]
    assert assignment_to_proto(JobAssignment("x", JobState.QUEUED)).mig_resource == ""


def _layout(req: pb.SolveRequest) -> pb.MigLayout:
    return next(n for n in req.cluster.nodes if n.name == "a100-1").mig_layouts[0]


def _job(req: pb.SolveRequest, name: str) -> pb.Job:
    return next(j for j in req.jobs if j.name == name)


LAYOUT = "cluster.nodes[1].mig_layouts[0]"
def _layout_on_a_94gb_h100(r: pb.SolveRequest) -> None:
    """An H100 of 94 GB (the NVL's): no catalog geometry is its own (the 80 GB's profiles
    differ), and the snapshot gives none."""
    next(t for t in r.cluster.gpu_types if t.name == "H100-SXM").memory_gib = 94
    r.cluster.nodes[2].mig_layouts.add(
        gpu_index=0, instances=[pb.MigInstance(profile="1g.10gb", start=0)]
    )


CASES: list[tuple[str, Callable[[pb.SolveRequest], object], str, str]] = [
    ("unknown profile", lambda r: setattr(_layout(r).instances[1], "profile", "1g.5gb"),
     f"{LAYOUT}.instances[1].profile", 'unknown MIG profile "1g.5gb"'),
    ("bad start", lambda r: setattr(_layout(r).instances[1], "start", 7),
     f"{LAYOUT}.instances[1].start", "1g.10gb cannot start at 7"),
    ("overlap", lambda r: setattr(_layout(r).instances[1], "start", 2),
     f"{LAYOUT}.instances", "overlaps 3g.40gb@0 at slice 2"),
    ("too many", lambda r: _layout(r).instances.add(profile="3g.40gb", start=4),
     f"{LAYOUT}.instances", "overlaps"),
    ("GPU index", lambda r: setattr(_layout(r), "gpu_index", 8),
     f"{LAYOUT}.gpu_index", "must be in [0, 8)"),
    ("type without MIG", _layout_on_a_94gb_h100,
     "cluster.nodes[2].mig_layouts[0]", 'gpu type "H100-SXM" has no MIG geometry'),
    ("unknown busy job", lambda r: setattr(_layout(r).instances[1], "job", "ghost"),
     f"{LAYOUT}.instances[1].job", 'unknown job "ghost"'),
    ("slice under a whole-GPU job", lambda r: r.cluster.nodes[0].mig_layouts.add(
        gpu_index=0, instances=[pb.MigInstance(profile="1g.10gb", start=0)]),
     "cluster.nodes[0].mig_layouts[0]", "GPU 0 is in the whole-GPU allocation of jobs[2]"),
    ("memory fits no slice",
     lambda r: setattr(_job(r, "tiny").profile.points[0], "memory_per_gpu_gib", 30),
     "jobs[4].slices", "needs 30.0 GiB on one GPU; the largest MIG instance it allows has 20 GiB"),
    ("unknown bound", lambda r: setattr(_job(r, "tiny").slices, "smallest_profile", "9g.1gb"),
     "jobs[4].slices.smallest_profile", 'unknown MIG profile "9g.1gb"'),
    ("multi-GPU slice job", lambda r: setattr(_job(r, "tiny"), "min_gpus", 2),
     "jobs[4].slices.allow", "min_gpus is 2"),
    ("allocation not in the layout", lambda r: setattr(
        _job(r, "small").current_allocation.mig_instance, "start", 4),
     "jobs[3].current_allocation.mig_instance", "is not an instance of its layout"),
    ("model too large for any slice", lambda r: _job(r, "tiny").model.CopyFrom(pb.ModelSpec(
        parameters=13e9, layers=40, hidden_size=5120, attention_heads=40, sequence_length=2048,
        global_batch_size=512)),
     "jobs[4].slices", "it fits no slice"),
    # Found by the fuzzer (seed 93): a slice job's empty model was read for its memory before
    # its own check and divided by zero (INTERNAL); now only its fields are reported.
    ("slice job with an empty model", lambda r: _job(r, "tiny").model.CopyFrom(pb.ModelSpec()),
     "jobs[4].model.hidden_size", "must be >= 1, got 0"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "breaks", "field", "says"), CASES, ids=[c[0] for c in CASES])
def test_bad_mig_input_names_the_field(
    case: str, breaks: Callable[[pb.SolveRequest], object], field: str, says: str
) -> None:
    req = make_mig_request()
    assert problems(req) == {}
    breaks(req)
    found = problems(req)
    assert field in found, (case, found)
    assert says in found[field], (case, found[field])


def test_a_profile_point_may_name_a_mig_profile_of_its_type() -> None:
    req = make_mig_request()
    q = _job(req, "tiny").profile.points.add()
    q.CopyFrom(_job(req, "tiny").profile.points[0])
    q.mig_profile, q.samples_per_second = "1g.10gb", 20.0
    assert problems(req) == {}
    q.mig_profile, q.num_gpus = "1g.5gb", 2
    found = problems(req)
    assert (
        'unknown MIG profile "1g.5gb" for "A100-80GB"'
        in found["jobs[4].profile.points[1].mig_profile"]
    )
    assert "one instance" in found["jobs[4].profile.points[1].num_gpus"]


def test_a_mig_snapshot_gets_a_checked_plan_on_whole_gpus() -> None:
    """Whole GPUs to spare: the slice jobs run whole, the partitioned GPU is left alone."""
    req = make_mig_request()
    req.options.backend = pb.BACKEND_HEURISTIC
    req.options.time_budget.FromSeconds(2)
    problem = to_problem(req, LIMITS)
    result = solve_request(req, Solver(), limits=LIMITS).result
    assert check_plan(problem, result.plan.assignments, result.plan.layout_changes) == []
    placed = {
        (s.node, i) for a in result.plan.assignments for s in a.placement for i in s.gpu_indices
    }
    assert ("a100-1", 5) not in placed
    assert result.plan.assignment("tiny").state.name == "RUNNING"


def test_the_example_request_is_the_tests_request_and_valid() -> None:
    """examples/mig-slices.json is make_mig_request() as protobuf JSON (regenerate it from
    there when the request changes), and it validates."""
    from pathlib import Path

    from google.protobuf import json_format

    from tests.mig_helpers import make_mig_request

    path = Path(__file__).resolve().parent.parent / "examples" / "mig-slices.json"
    sent = json_format.Parse(path.read_text(), pb.SolveRequest())
    assert sent == make_mig_request()
    assert validate_request(sent, Limits()) == []
