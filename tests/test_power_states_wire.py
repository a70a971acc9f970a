"""Node power states on the wire: the policy and node states in, the plan's actions out
(real gRPC server on loopback); EvaluatePlan checks them; bad input names the field."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.limits import Limits
from solver.app.validation import validate_request
from solver.wire import load_request_json
from tests.factories import make_request
from tests.service_helpers import serving


def request() -> pb.SolveRequest:
    """make_request's cluster, its A100 node a100-1 suspended, power saving on: the H100 node
    idle for an hour may go, no spare kept."""
    req = make_request()
    req.cluster.ClearField("rack_power_budgets")
    req.cluster.ClearField("power_budget_watts")
    for n in req.cluster.nodes:
        n.base_watts = 600.0
        n.idle_for.FromSeconds(3600)
    req.cluster.nodes[1].power_state = pb.NODE_POWER_STATE_SUSPENDED
    s = req.cluster.power_saving
    s.enabled = True
    s.suspend_after.FromSeconds(600)
    s.resume_time.FromSeconds(300)
    s.suspended_node_watts = 20.0
    s.price_node_floor = True
    req.options.backend = pb.BACKEND_HEURISTIC
    req.options.time_budget.FromSeconds(2)
    return req


def test_the_plan_carries_its_power_actions_and_evaluates_valid() -> None:
    req = request()
    with serving() as (_, stub):
        response = stub.Solve(req, timeout=30)
        used = {s.node for a in response.plan.assignments for s in a.placement}
        acts = {(a.node, a.kind) for a in response.plan.power_actions}
        for node in ("a100-0", "a100-1", "h100-0"):
            if node not in used and node != "a100-1":
                assert (node, pb.POWER_ACTION_KIND_SUSPEND) in acts
        assert ("a100-1", pb.POWER_ACTION_KIND_RESUME) in acts or "a100-1" not in used
        assert all(a.reason for a in response.plan.power_actions)
        assert "power states:" in response.stats.detail
        out = stub.EvaluatePlan(pb.EvaluatePlanRequest(request=req, plan=response.plan), timeout=30)
        assert out.valid, out.violations
        assert out.objective.total == pytest.approx(response.plan.objective.total, abs=1e-9)
        bad = pb.Plan()
        bad.CopyFrom(response.plan)
        bad.power_actions.add(node="nowhere", kind=pb.POWER_ACTION_KIND_SUSPEND)
        with pytest.raises(grpc.RpcError) as e:
            stub.EvaluatePlan(pb.EvaluatePlanRequest(request=req, plan=bad), timeout=30)
        assert e.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert "plan.power_actions[" in (e.value.details() or "")


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda r: r.cluster.nodes[0].idle_for.FromSeconds(-5), "cluster.nodes[0].idle_for"),
        (lambda r: setattr(r.cluster.nodes[0], "base_watts", -1.0), "cluster.nodes[0].base_watts"),
        (lambda r: setattr(r.cluster.nodes[0], "power_state", 9), "cluster.nodes[0].power_state"),
        (lambda r: r.cluster.power_saving.exclude_nodes.append("ghost"),
         "cluster.power_saving.exclude_nodes[0]"),
        (lambda r: setattr(r.cluster.power_saving, "spare_nodes_per_type", -1),
         "cluster.power_saving.spare_nodes_per_type"),
        (lambda r: r.cluster.power_saving.resume_time.FromSeconds(-1),
         "cluster.power_saving.resume_time"),
        (lambda r: setattr(r.cluster.power_saving, "suspended_node_watts", float("inf")),
         "cluster.power_saving.suspended_node_watts"),
        (lambda r: setattr(r.cluster.nodes[0], "power_state", pb.NODE_POWER_STATE_SUSPENDED),
         "jobs[2].current_allocation.placement[0].node"),
    ],
)  # fmt: skip
def test_bad_power_fields_name_the_field(edit: object, field: str) -> None:
    req = request()
    edit(req)  # type: ignore[operator]
    assert field in {v.field for v in validate_request(req, Limits())}


EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "power-saving.json"


def test_the_example_is_request_and_valid() -> None:
    """examples/power-saving.json is request() as protobuf JSON (regenerate it from there, as
    json_format.MessageToJson with preserving_proto_field_name and indent 1)."""
    got = load_request_json(EXAMPLE)
    assert got == request()
    assert validate_request(got, Limits()) == []


def test_the_node_floor_is_in_the_served_objective_where_the_policy_asks() -> None:
    req = request()
    blind = pb.SolveRequest()
    blind.CopyFrom(req)
    blind.cluster.power_saving.price_node_floor = False
    with serving() as (_, stub):
        response = stub.Solve(req, timeout=30)
        plan = response.plan
        priced = stub.EvaluatePlan(pb.EvaluatePlanRequest(request=req, plan=plan), timeout=30)
        free = stub.EvaluatePlan(pb.EvaluatePlanRequest(request=blind, plan=plan), timeout=30)
        blind.cluster.power_saving.ClearField("price_node_floor")  # unset: not priced
        unset = stub.EvaluatePlan(pb.EvaluatePlanRequest(request=blind, plan=plan), timeout=30)
    assert priced.valid and free.valid
    assert unset.objective.energy == free.objective.energy
    # The floor of each busy node: 600 W base and its GPUs no job uses (idle 50 W / 70 W).
    idle = {"a100-0": 50.0, "a100-1": 50.0, "h100-0": 70.0}
    count = {"a100-0": 8, "a100-1": 8, "h100-0": 4}
    used: dict[str, set[int]] = {}
    for a in plan.assignments:
        for s in a.placement:
            used.setdefault(s.node, set()).update(s.gpu_indices)
    assert used, "the plan runs a job"
    floor = sum(600.0 + idle[n] * (count[n] - len(g)) for n, g in used.items())
    peak = 16 * 400.0 + 4 * 700.0
    gap = priced.objective.energy - free.objective.energy
    assert gap == pytest.approx(floor / peak, rel=1e-9)


def test_a_budget_below_the_floor_with_base_power_is_named() -> None:
    req = request()
    # Floor: a100-0 600 + 8 x 50, a100-1 asleep 20, h100-0 600 + 4 x 70 = 1,900 W.
    req.cluster.power_budget_watts = 1800.0
    [v] = [v for v in validate_request(req, Limits()) if v.field == "cluster.power_budget_watts"]
    assert "(1900 W)" in v.description
    req.cluster.power_budget_watts = 1950.0
    assert validate_request(req, Limits()) == []
