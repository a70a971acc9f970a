"""The simulated cluster's power saving (solver.simulate.power_saving): suspend after idle time
with spares and exclusions, resume latency, the draw, the request's annotations."""

from __future__ import annotations

import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.simulate.power_saving import RESUMING, SUSPENDED, UP, NodeStates, PowerSavingSettings


def cluster(nodes: int = 3) -> pb.ClusterSnapshot:
    c = pb.ClusterSnapshot()
    c.gpu_types.add(name="A100", idle_watts=50.0, tdp_watts=400.0)
    for k in range(nodes):
        c.nodes.add(name=f"n{k}", gpu_type="A100", gpu_count=8, rack="r0")
    return c


ON = PowerSavingSettings(
    enabled=True, suspend_after_s=600.0, resume_s=300.0, suspended_node_watts=20.0,
    node_base_watts=500.0,
)  # fmt: skip


def test_nodes_empty_for_suspend_after_are_suspended_keeping_spares() -> None:
    states = NodeStates(cluster(), ON)
    states.use(0.0, {"n0"})
    states.settle(599.0)
    assert set(states.state.values()) == {UP}
    assert states.next_event(599.0) == pytest.approx(600.0)
    states.settle(600.0)
    assert states.state == {"n0": UP, "n1": SUSPENDED, "n2": SUSPENDED}
    spare = NodeStates(cluster(), PowerSavingSettings(**{**ON.__dict__, "spare_nodes_per_type": 1}))
    spare.use(0.0, {"n0"})
    spare.settle(600.0)
    assert sorted(spare.state.values()) == [SUSPENDED, UP, UP]


def test_excluded_nodes_and_a_disabled_rule_stay_up() -> None:
    excluded = PowerSavingSettings(**{**ON.__dict__, "exclude_nodes": frozenset({"n1"})})
    states = NodeStates(cluster(), excluded)
    states.settle(10_000.0)
    assert states.state == {"n0": SUSPENDED, "n1": UP, "n2": SUSPENDED}
    off = NodeStates(cluster(), PowerSavingSettings(**{**ON.__dict__, "enabled": False}))
    off.settle(10_000.0)
    assert set(off.state.values()) == {UP} and off.next_event(0.0) == float("inf")


def test_a_job_on_a_suspended_node_waits_for_its_resume() -> None:
    states = NodeStates(cluster(), ON)
    states.settle(1000.0)
    assert states.wake(1000.0, ["n0"]) == pytest.approx(1300.0)
    assert states.state["n0"] == RESUMING and states.resumes == 1
    assert states.wake(1100.0, ["n0"]) == pytest.approx(1300.0)  # still booting
    states.use(1000.0, {"n0"})
    states.settle(1300.0)
    assert states.state["n0"] == UP
    assert states.wake(1400.0, ["n0"]) == pytest.approx(1400.0)


def test_the_draw_beside_idle_gpus() -> None:
    states = NodeStates(cluster(), ON)
    assert states.extra_watts() == pytest.approx(3 * 500.0)
    states.settle(1000.0)  # all three suspended
    assert states.extra_watts() == pytest.approx(3 * (20.0 - 8 * 50.0))
    assert states.extra_watts(down={"n0"}) == pytest.approx(2 * (20.0 - 8 * 50.0))
    assert states.tail_watts() == pytest.approx(3 * 20.0)
    off = NodeStates(cluster(), PowerSavingSettings(node_base_watts=500.0))
    assert off.tail_watts() == pytest.approx(3 * (8 * 50.0 + 500.0))


def test_the_request_carries_the_states_and_the_policy() -> None:
    states = NodeStates(cluster(), ON)
    states.use(0.0, {"n0"})
    states.settle(700.0)
    req = pb.SolveRequest()
    req.cluster.CopyFrom(cluster())
    states.annotate(req, 700.0)
    n0, n1, _ = req.cluster.nodes
    assert n0.power_state == pb.NODE_POWER_STATE_UP and n0.idle_for.ToSeconds() == 0
    assert n1.power_state == pb.NODE_POWER_STATE_SUSPENDED and n1.idle_for.ToSeconds() == 700
    assert n1.base_watts == 500.0
    p = req.cluster.power_saving
    assert p.enabled and p.suspend_after.ToSeconds() == 600 and p.resume_time.ToSeconds() == 300
