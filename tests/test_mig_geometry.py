"""GPU types the MIG catalog does not name: a site's own name for a catalog GPU (its family and
memory) and a geometry the snapshot brings (``GpuType.mig``), through the real server."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import grpc
import pytest
from google.protobuf import json_format

from scripts.common.gpu_names import rename_gpu_types
from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.convert_mig import geometry_to_proto
from solver.app.limits import Limits
from solver.app.validation import validate_request
from solver.perfmodel.mig_catalog import load_mig_catalog
from tests.factories import A100_80GB
from tests.service_helpers import bad_request, serving
from tests.test_mig_solve import seven_small_request

ONE_G = "1g.10gb"


def renamed(req: pb.SolveRequest, name: str) -> pb.SolveRequest:
    """The request with its one GPU type (A100-80GB) called ``name`` everywhere."""
    out = pb.SolveRequest()
    out.CopyFrom(req)
    rename_gpu_types(out, {A100_80GB: name})
    return out


def solve_and_evaluate(req: pb.SolveRequest) -> tuple[pb.SolveResponse, pb.EvaluatePlanResponse]:
    with serving() as (_, stub):
        response: pb.SolveResponse = stub.Solve(req, timeout=30)
        evaluated: pb.EvaluatePlanResponse = stub.EvaluatePlan(
            pb.EvaluatePlanRequest(request=req, plan=response.plan), timeout=30
        )
    return response, evaluated


def assert_seven_on_slices(response: pb.SolveResponse, evaluated: pb.EvaluatePlanResponse) -> None:
    plan = response.plan
    assert [a.mig_instance.profile for a in plan.assignments] == [ONE_G] * 7
    assert {a.mig_resource for a in plan.assignments} == {"nvidia.com/mig-1g.10gb"}
    starts = sorted(a.mig_instance.start for a in plan.assignments)
    assert starts == list(range(7))
    assert evaluated.valid, evaluated.violations
    assert evaluated.objective.total == pytest.approx(plan.objective.total, abs=1e-9)


def test_a_kubernetes_name_of_a_catalog_gpu_gets_its_geometry() -> None:
    """GPU feature discovery's product name for an A100 of 80 GB: the catalog's A100-80GB."""
    response, evaluated = solve_and_evaluate(
        renamed(seven_small_request(), "NVIDIA-A100-SXM4-80GB")
    )
    assert_seven_on_slices(response, evaluated)


def own_geometry_request() -> pb.SolveRequest:
    """Seven slice jobs on one GPU of a type no catalog names, its geometry on the wire (the
    A100-80GB's); examples/mig-own-geometry.json."""
    req = renamed(seven_small_request(), "ACME-X1")
    req.cluster.gpu_types[0].mig.CopyFrom(geometry_to_proto(load_mig_catalog()[A100_80GB]))
    return req


def test_a_geometry_on_the_wire_makes_an_unknown_gpu_partitionable() -> None:
    req = own_geometry_request()
    req.cluster.gpu_types[0].ClearField("mig")
    with pytest.raises(grpc.RpcError) as refused, serving() as (_, stub):
        stub.Solve(req, timeout=30)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    fields = dict(bad_request(refused.value))
    assert "no GPU type the job may use has a MIG geometry" in fields["jobs[0].slices"]
    assert_seven_on_slices(*solve_and_evaluate(own_geometry_request()))


def test_the_example_request_is_the_tests_request() -> None:
    """examples/mig-own-geometry.json is own_geometry_request() as protobuf JSON (regenerate it
    from there when the request changes)."""
    path = Path(__file__).resolve().parent.parent / "examples" / "mig-own-geometry.json"
    assert json_format.Parse(path.read_text(), pb.SolveRequest()) == own_geometry_request()


def test_the_wire_geometry_is_the_one_used() -> None:
    """A catalog name with a geometry of its own: the snapshot's wins (here at most three
    1g.10gb instances a GPU, where the catalog's A100-80GB has seven)."""
    req = seven_small_request()
    g = geometry_to_proto(load_mig_catalog()[A100_80GB])
    next(p for p in g.profiles if p.name == ONE_G).max_count = 3
    req.cluster.gpu_types[0].mig.CopyFrom(g)
    response, evaluated = solve_and_evaluate(req)
    assert evaluated.valid, evaluated.violations
    ones = [a for a in response.plan.assignments if a.mig_instance.profile == ONE_G]
    assert len(ones) == 3


def test_validate_snapshot_says_how_each_gpu_type_is_read() -> None:
    """ValidateSnapshot, through the server: each type's efficiency family and where its MIG
    geometry comes from."""
    req = renamed(seven_small_request(), "NVIDIA-A100-SXM4-80GB")
    own = req.cluster.gpu_types.add()
    own.CopyFrom(req.cluster.gpu_types[0])
    own.name = "ACME-X1"
    own.mig.CopyFrom(geometry_to_proto(load_mig_catalog()[A100_80GB]))
    bare = req.cluster.gpu_types.add()
    bare.CopyFrom(req.cluster.gpu_types[0])
    bare.name, bare.memory_gib = "NVIDIA-H100-NVL", 94
    with serving() as (_, stub):
        out: pb.ValidateSnapshotResponse = stub.ValidateSnapshot(
            pb.ValidateSnapshotRequest(request=req), timeout=30
        )
    assert out.valid, out.violations
    read = [(t.gpu_type, t.efficiency_family, t.mig_geometry) for t in out.gpu_types]
    assert read == [
        ("NVIDIA-A100-SXM4-80GB", "A100", A100_80GB),
        ("ACME-X1", "", "snapshot"),
        ("NVIDIA-H100-NVL", "H100", ""),
    ]
    assert out.gpu_types[0].compute_efficiency == pytest.approx(0.61)
    assert out.gpu_types[1].compute_efficiency == pytest.approx(0.30)


def _profile(r: pb.SolveRequest, k: int) -> pb.MigProfile:
    return r.cluster.gpu_types[0].mig.profiles[k]


def _two_more_one_slice_profiles(r: pb.SolveRequest) -> None:
    """With two more 1-slice profiles an A100 would have 29,666 layouts; the joint model's
    choice among them took 12.7 s to build (566 s with three more)."""
    for k in range(2):
        r.cluster.gpu_types[0].mig.profiles.add(
            name=f"1g.x{k}", compute_slices=1, memory_slices=1, memory_gib=10, max_count=7,
            starts=range(7),
        )  # fmt: skip


GEOMETRY = "cluster.gpu_types[0].mig"
CASES: list[tuple[str, Callable[[pb.SolveRequest], object], str, str]] = [
    ("no SM slices", lambda r: setattr(r.cluster.gpu_types[0].mig, "compute_slices", 0),
     f"{GEOMETRY}.compute_slices", "must be in [1, 8], got 0"),
    ("too many memory slices", lambda r: setattr(r.cluster.gpu_types[0].mig, "memory_slices", 9),
     f"{GEOMETRY}.memory_slices", "must be in [1, 8], got 9"),
    ("no profiles", lambda r: r.cluster.gpu_types[0].mig.ClearField("profiles"),
     f"{GEOMETRY}.profiles", "must not be empty"),
    ("start past the memory", lambda r: _profile(r, 3).starts.append(7),
     f"{GEOMETRY}.profiles[3].starts[3]", "start 7 + 2 slices leave the GPU's 8"),
    ("more SM slices than the GPU", lambda r: setattr(_profile(r, 0), "compute_slices", 8),
     f"{GEOMETRY}.profiles[0].compute_slices", "must be in [1, 7] (the GPU's), got 8"),
    ("duplicate profile", lambda r: setattr(_profile(r, 1), "name", _profile(r, 0).name),
     f"{GEOMETRY}.profiles[1].name", "duplicate profile"),
    ("more memory than the GPU", lambda r: setattr(_profile(r, 0), "memory_gib", 81),
     f"{GEOMETRY}.profiles[0].memory_gib", "81 GiB exceeds the GPU's memory_gib 80"),
    ("no count", lambda r: setattr(_profile(r, 0), "max_count", 0),
     f"{GEOMETRY}.profiles[0].max_count", "must be positive, got 0"),
    ("duplicate start", lambda r: _profile(r, 0).starts.append(0),
     f"{GEOMETRY}.profiles[0].starts", "duplicate start"),
    ("not a number", lambda r: setattr(_profile(r, 0), "memory_gib", float("nan")),
     f"{GEOMETRY}.profiles[0].memory_gib", "must be a positive finite number"),
    ("too many layouts", _two_more_one_slice_profiles,
     f"{GEOMETRY}.profiles", "its profiles make more than 2500 layouts"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "breaks", "field", "says"), CASES, ids=[c[0] for c in CASES])
def test_a_bad_geometry_names_the_field(
    case: str, breaks: Callable[[pb.SolveRequest], object], field: str, says: str
) -> None:
    req = seven_small_request()
    req.cluster.gpu_types[0].mig.CopyFrom(geometry_to_proto(load_mig_catalog()[A100_80GB]))
    assert validate_request(req, Limits()) == []
    breaks(req)
    found = {v.field: v.description for v in validate_request(req, Limits())}
    assert field in found, (case, found)
    assert says in found[field], (case, found[field])
