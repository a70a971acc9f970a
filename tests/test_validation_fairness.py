"""The fairness fields of a request: each bad value named by its field path, defaults as
documented, and the service solving in every mode over gRPC on loopback with F in the plan."""

from __future__ import annotations

import grpc
import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.convert import problem_from_proto
from solver.app.limits import Limits
from solver.app.validation import validate_request
from solver.domain import DEFAULT_FAIRNESS_HORIZON_SECONDS, FairnessMode, FairnessScope
from tests.factories import make_request
from tests.service_helpers import WAIT, serving
from tests.validation_helpers import INF, NAN, Mutation


def _horizon(seconds: int, nanos: int = 0) -> Mutation:
    def mutate(r: pb.SolveRequest) -> None:
        r.fairness.horizon.seconds = seconds
        r.fairness.horizon.nanos = nanos

    return mutate


def _age(seconds: int) -> Mutation:
    return lambda r: r.jobs[1].age.FromSeconds(seconds)


def _mean(value: float, mode: int = pb.FAIRNESS_MODE_MAX_MIN) -> Mutation:
    def mutate(r: pb.SolveRequest) -> None:
        r.fairness.mode = mode  # type: ignore[assignment]
        r.fairness.mean_weight = value

    return mutate


CASES = [
    pytest.param(lambda r: setattr(r.fairness, "mode", 99), "fairness.mode", "unknown", id="mode"),
    pytest.param(
        lambda r: setattr(r.fairness, "scope", 7), "fairness.scope", "unknown", id="scope"
    ),
    pytest.param(_horizon(0), "fairness.horizon", "must be > 0", id="zero-horizon"),
    pytest.param(_horizon(-5), "fairness.horizon", "must be > 0", id="negative-horizon"),
    pytest.param(_horizon(8 * 86400), "fairness.horizon", "a week", id="long-horizon"),
    pytest.param(_age(-1), "jobs[1].age", "must be in [0", id="negative-age"),
    pytest.param(_mean(-0.5), "fairness.mean_weight", "non-negative", id="mean<0"),
    pytest.param(_mean(NAN), "fairness.mean_weight", "non-negative", id="mean-nan"),
    pytest.param(_mean(1e4), "fairness.mean_weight", "<= 1000", id="mean-large"),
    pytest.param(
        _mean(1.0, pb.FAIRNESS_MODE_PROPORTIONAL), "fairness.mean_weight", "only", id="mean-prop"
    ),
    pytest.param(_mean(1.0, 0), "fairness.mean_weight", "only", id="mean-weighted-sum"),
    pytest.param(lambda r: setattr(r.weights, "fairness", -1.0), "weights.fairness", "", id="w<0"),
    pytest.param(lambda r: setattr(r.weights, "fairness", NAN), "weights.fairness", "", id="w-nan"),
    pytest.param(lambda r: setattr(r.weights, "fairness", INF), "weights.fairness", "", id="w-inf"),
]


@pytest.mark.parametrize(("mutate", "field", "says"), CASES)
def test_each_bad_fairness_field_is_named(mutate: Mutation, field: str, says: str) -> None:
    r = make_request()
    mutate(r)
    violations = validate_request(r, Limits())
    assert [v.field for v in violations] == [field], violations
    assert says in violations[0].description


def test_an_unset_policy_is_the_weighted_sum_and_a_set_one_converts() -> None:
    r = make_request()
    p = problem_from_proto(r, Limits())
    assert p.fairness.mode is FairnessMode.WEIGHTED_SUM and not p.fairness.active
    assert p.fairness.horizon_seconds == DEFAULT_FAIRNESS_HORIZON_SECONDS
    assert p.weights.fairness == 1.0
    r.fairness.mode = pb.FAIRNESS_MODE_DRF
    r.fairness.scope = pb.FAIRNESS_SCOPE_TENANT
    r.fairness.horizon.FromSeconds(600)
    r.weights.fairness = 3.0
    r.fairness.mean_weight = 0.5
    r.jobs[0].age.FromSeconds(1200)
    p = problem_from_proto(r, Limits())
    assert p.fairness.mean_weight == 0.5
    assert (p.fairness.mode, p.fairness.scope) == (FairnessMode.DRF, FairnessScope.TENANT)
    assert p.fairness.horizon_seconds == 600.0 and p.weights.fairness == 3.0
    assert p.jobs[0].age_seconds == 1200.0


MODES = [
    pb.FAIRNESS_MODE_MAX_MIN,
    pb.FAIRNESS_MODE_PROPORTIONAL,
    pb.FAIRNESS_MODE_DRF,
    pb.FAIRNESS_MODE_FINISH_TIME,
]


def test_the_service_solves_in_every_mode_and_refuses_a_bad_one() -> None:
    """Over gRPC on loopback: every mode answers a checked plan whose F is the one
    EvaluatePlan computes for it; a job that has received much service waits first."""
    with serving() as (_, stub):
        for mode in MODES:
            r = make_request()
            r.options.time_budget.FromSeconds(2)
            r.fairness.mode = mode
            r.fairness.scope = pb.FAIRNESS_SCOPE_JOB
            for k, j in enumerate(r.jobs):
                j.remaining_samples = j.remaining_samples or 1e6
                j.age.FromSeconds(600 * k)
            response = stub.Solve(r, timeout=WAIT)
            evaluated = stub.EvaluatePlan(
                pb.EvaluatePlanRequest(request=r, plan=response.plan), timeout=WAIT
            )
            assert evaluated.valid, evaluated.violations
            assert evaluated.objective.fairness == pytest.approx(response.plan.objective.fairness)
            assert response.plan.objective.fairness != 0.0, pb.FairnessMode.Name(mode)
            assert response.stats.best_bound >= response.stats.objective - 1e-9
        bad = make_request()
        bad.fairness.mode = 42  # type: ignore[assignment]
        with pytest.raises(grpc.RpcError) as e:
            stub.Solve(bad, timeout=WAIT)
    assert e.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "fairness.mode" in (e.value.details() or "")
