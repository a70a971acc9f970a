"""The quick plan's objective under a fairness mode (solver.search.quick): its F reads every
job's best pace, so a plan cut short before some jobs were reached is scored as EvaluatePlan
scores it (through the service, 6 answers in 200 at 0.25-0.36 s on 800 jobs, DRF by tenant,
had said 567.363 where EvaluatePlan gave 567.231)."""

from __future__ import annotations

import time

import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app import pipeline
from solver.app.limits import Limits
from solver.offline.generate import generate, spec_from_args
from solver.perfmodel.configs import build_config_set
from solver.scoring.objective import score_plan
from solver.search.quick import quick_plan

MODES = ("DRF", "MAX_MIN", "FINISH_TIME", "PROPORTIONAL")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("scope", ("TENANT", "JOB"))
def test_a_quick_plan_cut_short_is_scored_with_every_jobs_best_pace(mode: str, scope: str) -> None:
    request = generate(
        spec_from_args(["--nodes", "16", "--jobs", "64", "--seed", "3", "--running-share", "0.5"])
    )
    request.fairness.mode = pb.FairnessMode.Value(f"FAIRNESS_MODE_{mode}")  # type: ignore[assignment]
    request.fairness.scope = pb.FairnessScope.Value(f"FAIRNESS_SCOPE_{scope}")  # type: ignore[assignment]
    request.weights.fairness = 20.0
    problem = pipeline.to_problem(request, Limits(max_time_budget_seconds=600))
    # Its deadline already past: the running jobs are looked at, no waiting one is reached.
    quick = quick_plan(problem, time.monotonic() - 1.0, chunk_jobs=1, check_every=1)
    assert quick.not_reached > 0
    best = build_config_set(problem).best_samples_per_second
    scored = score_plan(problem, quick.plan.assignments, best)
    assert quick.plan.objective.total == pytest.approx(scored.total, rel=1e-9, abs=1e-9)
    assert quick.plan.objective.fairness == pytest.approx(scored.fairness, rel=1e-9, abs=1e-9)
