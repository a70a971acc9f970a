"""How a MIG snapshot's time divides (solver.core.mig_time): the whole-GPU paths' share and
the consolidated variant's split."""

from __future__ import annotations

import time

import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.limits import Limits
from solver.app.pipeline import to_problem
from solver.core import mig, mig_time
from solver.core.deadline import Deadline
from solver.core.mig_consolidate import short_of_gpus
from solver.core.settings import RESERVE_FLOOR_SECONDS, RESERVE_SECONDS_PER_JOB, SolverSettings
from solver.core.solver import Solver
from solver.domain import Termination
from solver.offline.generate import generate, spec_from_args
from tests.factories import solve
from tests.mig_cases import large, problem, small


def test_the_slices_never_take_the_whole_gpu_paths_first_plan() -> None:
    """What a MIG snapshot keeps for packing and its bound leaves the whole-GPU paths at least
    their first plan's estimate (here 0.6 s of about 0.85 s; half, as before, left 0.43 s),
    and no half for the variant then."""
    p = problem(small("a"), small("b"), large(), gpus=3)
    solver = Solver(SolverSettings(first_plan_seconds=0.6, mig_seconds_per_slice_job=1.0))
    deadline = Deadline.after(1.0, solver.settings, len(p.jobs))
    estimate = solver.first_plan_estimate(p)
    assert deadline.end - time.monotonic() < 2 * estimate  # half would be short of it
    when, split = mig_time.whole_gpu_time(
        p, deadline, deadline.end, cut=False, settings=solver.settings, estimate=estimate
    )
    assert when.end - time.monotonic() >= estimate - 0.05
    assert when.end < deadline.end and split is None


def test_no_split_where_the_variant_could_place_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The variant packs until the slice bound's estimate before the MIG time ends; where that
    leaves it less than a first plan's time after the split, the plain pipeline keeps all the
    whole-GPU time (at 1 s on 1,024 GPUs the variant placed nothing, and the plain pipeline's
    half had no aggregated LP: answers 1.4-1.6 % below, now 0.003-0.125 %)."""
    p = problem(small("a"), small("b"), large(), gpus=3)
    assert short_of_gpus(p)
    settings = SolverSettings(first_plan_seconds=0.5, mig_seconds_per_slice_job=1e-3)
    deadline = Deadline.after(2.0, settings, len(p.jobs))

    def split() -> float | None:
        return mig_time.whole_gpu_time(
            p, deadline, deadline.end, cut=False, settings=settings, estimate=0.5
        )[1]

    at = split()  # about 0.95 s for each half (the answer's margin 31 ms); the bound's 2 ms
    assert at is not None and at - time.monotonic() == pytest.approx(0.95, abs=0.1)
    monkeypatch.setattr(mig, "BOUND_SECONDS_PER_JOB", 0.2)  # 0.6 s: 0.25 s after the split
    assert split() is None


def test_the_answer_margin_grows_with_the_jobs_up_to_its_fixed_size() -> None:
    p = problem(small("a"), small("b"), large(), gpus=3)
    assert mig.answer_margin(p) == pytest.approx(
        RESERVE_FLOOR_SECONDS + 3 * RESERVE_SECONDS_PER_JOB
    )
    many = problem(*(small(f"s{k}") for k in range(1000)), gpus=8)
    assert mig.answer_margin(many) == mig.JOINT_MARGIN_SECONDS


def test_a_tiny_mig_snapshot_at_a_short_budget_gets_its_exact_solve() -> None:
    """With 0.2 s kept back whatever its size, a 2-job MIG snapshot at 0.3 s left its whole-GPU
    paths no time for the aggregated LP: FALLBACK, its bound 25 % above (bench_unseen --seed 59,
    case 32), where the whole solve takes 0.02 s."""
    args = "--nodes 4 --jobs 2 --seed 402 --mix hybrid --running-share 0.3"
    more = "--power-budget-fraction 0.3 --rack-power-budget-fraction 0.8 --slice-share 0.5"
    req = generate(spec_from_args([*args.split(), *more.split()]))
    req.options.backend = pb.BACKEND_CPSAT
    s = solve(to_problem(req, Limits()), seconds=0.3).stats
    assert s.termination is not Termination.FALLBACK, s.detail
    assert "aggregate LP OPTIMAL" in s.detail and "CP-SAT OPTIMAL" in s.detail
