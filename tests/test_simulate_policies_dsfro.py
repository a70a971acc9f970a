"""DSFRO's fairness variants in the simulator: the request they send carries the mode, the
scope and the round interval as the horizon, and the plan follows the attained service."""

from __future__ import annotations

import socket
import threading
from contextlib import ExitStack
from dataclasses import replace

import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.domain import FairnessMode, FairnessScope, GpuSlice
from solver.simulate.core import SimulationError
from solver.simulate.policies import make_policy
from solver.simulate.policies.dsfro import DsfroPolicy
from tests.factories import running_server
from tests.simulate_policy_helpers import (
    FAST,
    SLOW,
    cluster,
    past,
    placed,
    profiled,
    round_of,
    running,
)


def _two_jobs_one_gpu() -> pb.SolveRequest:
    req = cluster(("n0", FAST, 1))
    for name in ("x", "y"):
        profiled(req, name, {(FAST, 1): 100.0}, max_gpus=1)
    req.jobs[0].attained.normalized_seconds = 7200.0  # x has had two hours, y nothing
    return req


def test_a_fairness_variant_sends_its_mode_and_the_round_as_horizon() -> None:
    req = _two_jobs_one_gpu()
    ri = round_of(req, {"x": past(0, 1), "y": past(0, 1)})
    policy = make_policy("dsfro-ftf")
    assert isinstance(policy, DsfroPolicy)
    sent = policy.adapt(ri)
    assert sent.fairness.mode == pb.FAIRNESS_MODE_FINISH_TIME
    assert sent.fairness.scope == pb.FAIRNESS_SCOPE_JOB
    assert sent.fairness.horizon.seconds == int(ri.round_length_s)
    p = policy.restricted(ri)
    assert (p.fairness.mode, p.fairness.scope) == (FairnessMode.FINISH_TIME, FairnessScope.JOB)
    assert p.fairness.horizon_seconds == ri.round_length_s
    assert p.fairness.mean_weight == 0.0 and sent.fairness.mean_weight == 0.0
    policy.close()


def test_the_mean_weight_reaches_the_least_row_variants_only() -> None:
    ri = round_of(_two_jobs_one_gpu(), {"x": past(0, 1), "y": past(0, 1)})
    for name, expected in (
        ("dsfro-ftf", 2.5),
        ("dsfro-ftf-tenant", 2.5),
        ("dsfro-drf", 2.5),
        ("dsfro-prop", 0.0),
    ):
        policy = make_policy(name, fairness_mean_weight=2.5)
        assert isinstance(policy, DsfroPolicy)
        assert policy.adapt(ri).fairness.mean_weight == expected, name
        assert policy.restricted(ri).fairness.mean_weight == expected, name
        policy.close()
    tenant = make_policy("dsfro-ftf-tenant")
    assert isinstance(tenant, DsfroPolicy)
    assert tenant.adapt(ri).fairness.scope == pb.FAIRNESS_SCOPE_TENANT
    tenant.close()


def test_proportional_fairness_runs_the_job_with_less_attained_service() -> None:
    req = _two_jobs_one_gpu()
    ri = round_of(req, {"x": past(0, 1), "y": past(0, 1)})
    prop = make_policy("dsfro-prop")  # by job: y, with nothing attained, gains the most
    assert list(placed(prop.decide(ri))) == ["y"]
    prop.close()


def test_without_dvfs_profile_points_at_other_clocks_are_dropped() -> None:
    # A slice job's points, and a profile from what a job showed (--feedback), cover every clock
    # of its types; the variant that offers only the top clock must not send the others.
    req = cluster(("n0", FAST, 2), ("n1", SLOW, 2))
    profiled(req, "x", {(FAST, 1): 100.0, (SLOW, 1): 50.0}, max_gpus=1)
    for clock, rate in ((1275, 95.0), (960, 80.0)):
        req.jobs[0].profile.points.add(
            gpu_type=FAST, num_gpus=1, tensor_parallel=1, pipeline_parallel=1,
            sm_clock_mhz=clock, samples_per_second=rate, watts=250.0, memory_per_gpu_gib=10,
        )  # fmt: skip
    req.jobs[0].profile.points.add(
        gpu_type=SLOW, num_gpus=2, tensor_parallel=1, pipeline_parallel=1, sm_clock_mhz=1245,
        samples_per_second=90.0, watts=500.0, memory_per_gpu_gib=10,
    )  # fmt: skip
    ri = round_of(req, {"x": past(0, 1)})
    policy = make_policy("dsfro-no-dvfs")
    assert isinstance(policy, DsfroPolicy)
    sent = policy.adapt(ri)
    assert [list(t.sm_clocks_mhz) for t in sent.cluster.gpu_types] == [[1410], [1380]]
    kept = [(q.gpu_type, q.num_gpus, q.sm_clock_mhz) for q in sent.jobs[0].profile.points]
    assert kept == [(FAST, 1, 1410), (SLOW, 1, 1380)]
    assert len(ri.request.jobs[0].profile.points) == 5  # the round's own request untouched
    assert placed(policy.decide(ri)) == {"x": (FAST, 1)}
    policy.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_over_grpc_a_round_waits_for_a_service_that_comes_back() -> None:
    # A scheduler's round meets a restarting service: the product's client retries until it
    # answers, and the wait shows in the round's wall time.
    port = _free_port()
    ri = round_of(_two_jobs_one_gpu(), {"x": past(0, 1), "y": past(0, 1)})
    policy = make_policy("dsfro-heuristic", server=f"127.0.0.1:{port}")
    assert isinstance(policy, DsfroPolicy)
    with ExitStack() as stack:
        started = threading.Timer(1.0, lambda: stack.enter_context(running_server(port=port)))
        started.start()
        try:
            decision = policy.decide(ri)
        finally:
            started.join()
            policy.close()
    assert len(decision.allocations) == 1  # one GPU, two jobs
    assert decision.solver_seconds >= 1.0


def test_over_grpc_a_round_without_a_service_stops_the_run_naming_it() -> None:
    port = _free_port()
    req = _two_jobs_one_gpu()
    req.options.time_budget.FromSeconds(1)  # the run stops 2 s in: budget and wait
    ri = round_of(req, {"x": past(0, 1), "y": past(0, 1)})
    policy = make_policy("dsfro-heuristic", server=f"127.0.0.1:{port}")
    assert isinstance(policy, DsfroPolicy)
    policy.options = replace(policy.options, server_wait_s=1.0)
    with pytest.raises(SimulationError, match=rf"127\.0\.0\.1:{port}.*UNAVAILABLE") as stopped:
        policy.decide(ri)
    policy.close()
    assert f"the round at t={ri.now_s:.0f} s got no plan" in stopped.value.problems[0]


def test_an_infeasible_round_keeps_what_runs_and_starts_nothing() -> None:
    """A budget below what the running non-preemptible job draws: DSFRO answers INFEASIBLE
    with no plan; the round keeps both running jobs as they are and starts none (before, the
    empty plan stopped them all, the non-preemptible one too, and the run ended)."""
    req = cluster(("n0", FAST, 4), budget=500.0)
    profiled(req, "pinned", {(FAST, 2): 100.0}, current=running(FAST, "n0", [0, 1]))
    req.jobs[0].preemptible = False
    profiled(req, "other", {(FAST, 1): 50.0}, current=running(FAST, "n0", [2]))
    profiled(req, "new", {(FAST, 1): 50.0})
    policy = DsfroPolicy()
    d = policy.decide(
        round_of(req, {"pinned": past(0, 2), "other": past(0, 1), "new": past(50, 1)})
    )
    policy.close()
    assert d.detail.startswith("INFEASIBLE")
    assert placed(d) == {"pinned": (FAST, 2), "other": (FAST, 1)}
    assert d.allocations["pinned"].placement == (GpuSlice("n0", (0, 1)),)
