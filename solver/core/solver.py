"""The Solver: one object that answers a problem within its deadline.

Built once from ``SolverSettings`` (and, for decomposed solves, where their parts run) and
shared by every door: the service's workers, the CLI, batches, sweeps and the simulator. Each
solve runs its steps (``solver.core.steps``) against one ``Incumbent`` and one ``Clock``:

1. too little time for the normal first plan: the quick plan answers (a fallback);
2. a snapshot large enough (or DECOMPOSED): its parts on the executor, merged and completed;
3. otherwise: configurations, the heuristic's first plan (an answer always exists), the
   aggregated bound and its guided plan, then by backend: nothing more (HEURISTIC), the full
   model alone (CPSAT, HIGHS, PYOMO), or AUTO's portfolio (LNS beside the aggregated MIP and
   the full model) until the gap closes or the time is up.

Every plan that leaves has passed the checker; the incumbent labels it (docs/objective.md,
"Termination").
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from typing import Any

from solver.core.carbon import defer_for_carbon, plans_with_deferred, with_deferred
from solver.core.deadline import Clock, Deadline, first_plan_estimate
from solver.core.incumbent import Incumbent, infeasible, with_kept_jobs
from solver.core.leases import finish_leases
from solver.core.mig import answer_margin, solve_with_slices, uses_mig
from solver.core.mig_time import whole_gpu_time
from solver.core.power_guard import Attempt, ProbeStop, solve_within_margin
from solver.core.power_states import awake_problem, uses_power_states, with_power_actions
from solver.core.settings import SolverSettings
from solver.core.steps import SolveRun
from solver.core.steps.bound import (
    aggregate_bound,
    aggregate_fits,
    aggregate_is_slow,
    dual_first,
    seconds_to_guide,
)
from solver.core.steps.decomposed import decompose_after_quick, finish_decomposed
from solver.core.steps.first import run_first, run_priced
from solver.core.steps.full import full_model_size, solve_full_model
from solver.core.steps.guided import place_dual_guide, place_guided
from solver.core.steps.portfolio import GUIDED_SEARCH_SECONDS, improve
from solver.core.steps.quick import solve_quick
from solver.domain import Backend, Plan, Problem, SolveResult
from solver.exact import isolated
from solver.perfmodel.configs import ConfigSet, build_config_set
from solver.perfmodel.quotas import quota_reasons
from solver.runtime.collector import paused_collection
from solver.runtime.cores import available_cores
from solver.runtime.executors import LazyExecutor
from solver.runtime.pools import Executor, Stopped, WorkerLost
from solver.scoring.completion import ranked_for_completion
from solver.scoring.fairness import fairness_headroom
from solver.search.heuristic import Heuristic

EXACT_BACKENDS = frozenset({Backend.CPSAT, Backend.HIGHS, Backend.PYOMO})
"""Backends that solve the full formulation (solver.exact.backends)."""


class Solver:
    """Answers problems within their deadline; thread-safe, and picklable (its settings and
    where parts run go to worker processes; an executor is made anew there)."""

    def __init__(
        self,
        settings: SolverSettings | None = None,
        *,
        ray_address: str | None = None,
        executor: Executor | None = None,
    ) -> None:
        """`executor` runs the parts of decomposed solves (kept open: the caller closes it);
        without one, the solver makes one on first use (Ray at `ray_address`, else local
        processes) and closes it in ``close``."""
        self.settings = settings if settings is not None else SolverSettings()
        self.ray_address = ray_address
        self._given = executor
        self._own: LazyExecutor | None = None
        self._lock = threading.Lock()
        self.first_plan_per_job: float | None = None
        """Seconds a job to the last solve's first plan (``note_pace``)."""
        self.resolve_per_job: float | None = None
        """Seconds a job a re-solve for the power margin last needed (``note_pace``)."""
        isolated.keep_workers(self.settings.kept_exact_workers)

    # ------------------------------------------------------------ pickling

    def __getstate__(self) -> dict[str, Any]:
        live = ("_given", "_own", "_lock")
        return {k: v for k, v in self.__dict__.items() if k not in live}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._given = None
        self._own = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------ the door

    @paused_collection
    def solve(
        self,
        problem: Problem,
        deadline: Deadline | None = None,
        stop: threading.Event | None = None,
        on_first_plan: Callable[[Plan], None] | None = None,
        on_better_plan: Callable[[Plan], None] | None = None,
    ) -> SolveResult:
        """Solve within `deadline` (default: the problem's time budget from now). Once `stop`
        is set, the search, the solvers (interrupted) and worker processes (stopped, or killed)
        stop and the best plan so far returns at once. `on_first_plan` is told the first
        checked plan as soon as it exists (the quick plan answers at once without it);
        `on_better_plan` each better plan, settled for the power margin, while more solving
        follows."""
        s = self.settings
        if deadline is None:
            deadline = Deadline.after(problem.options.time_budget_seconds, s, len(problem.jobs))
        problem = ranked_for_completion(problem)
        deferral = defer_for_carbon(problem, s)
        told = plans_with_deferred(deferral, on_first_plan)

        def once(p: Problem, d: Deadline, attempt: Attempt) -> SolveResult:
            # Decomposed and MIG solves are not probed: cut short, a decomposed solve's parts
            # are killed and its bound, computed last, is lost (4,096 nodes, 30 s: the answer
            # had none), and a MIG snapshot's slice packing and bound follow the whole-GPU
            # solve (1,024 GPUs at 5 s: the first solve ran 1.6 s past its cut, the answer lost
            # 6 % and its bound).
            plain = not (self.decomposes(p) or uses_mig(p))
            hook = attempt.hook(told if attempt.first else None, probe=plain)
            return self._solve_once(p, d, attempt.stop, hook)

        # Before its first answer the solver has no pace of its own: the settings' estimates.
        jobs = max(len(problem.jobs), 1)
        per_job = self.first_plan_per_job
        hint = self.first_plan_estimate(problem) if per_job is None else per_job * jobs
        resolve_per_job = self.resolve_per_job
        if resolve_per_job is None:
            resolve_per_job = s.power_margin_resolve_seconds_per_job
        resolve = resolve_per_job * jobs
        result = solve_within_margin(
            finish_leases(deferral.problem),
            deadline,
            once,
            s,
            stop,
            hint,
            resolve_hint=resolve,
            on_better_plan=plans_with_deferred(deferral, on_better_plan),
        )
        self.note_pace(result.stats.first_plan_seconds, result.stats.resolve_seconds, jobs)
        result = with_deferred(problem, deferral, result)
        if not problem.cluster.queues:
            return result
        waits = quota_reasons(problem.cluster, problem.jobs, result.plan.assignments)
        return dataclasses.replace(
            result, plan=dataclasses.replace(result.plan, assignments=tuple(waits))
        )

    def note_pace(self, first_plan: float | None, resolve: float | None, jobs: int) -> None:
        """Remember a solve's time to its first plan over `jobs` jobs, and what a re-solve for
        the power margin needed (when one was wanted): this machine's pace now, which the
        power margin's loop reads to size its first solve. The service, whose solves run on
        copies of this solver in worker processes, tells it each answer's."""
        if first_plan is not None:
            self.first_plan_per_job = first_plan / max(jobs, 1)
        if resolve is not None:
            self.resolve_per_job = resolve / max(jobs, 1)

    def _solve_once(
        self,
        problem: Problem,
        deadline: Deadline,
        stop: threading.Event | None,
        on_first_plan: Callable[[Plan], None] | None,
    ) -> SolveResult:
        """One solve of `problem` as it is (the power margin is ``solve_within_margin``'s)."""
        s = self.settings
        clock = Clock(deadline, stop)
        power_states = uses_power_states(problem)
        target = awake_problem(problem) if power_states else problem
        left = max(deadline.end - time.monotonic(), 0.0)
        power_keep = 0.0
        if power_states:  # waking, suspending and the bound over every node (core.power_states)
            need = answer_margin(problem) + s.power_states_seconds_per_job * len(problem.jobs)
            power_keep = min(need, left / 4)
        mig_end = deadline.end - power_keep
        mig_clock = Clock(dataclasses.replace(deadline, end=mig_end), stop)
        planned: list[tuple[Deadline, float | None]] = []

        def whole_time() -> tuple[Deadline, float | None]:
            """The whole-GPU paths' deadline and the consolidated variant's split, fixed at the
            first look: after a MIG snapshot's configurations are built (at 1,000 jobs 0.2 s
            of a cold 1 s call, which had left the whole-GPU paths the quick plan)."""
            if not planned:
                estimate = self.first_plan_estimate(target)
                planned.append(whole_gpu_time(
                    target, deadline, mig_end, cut=bool(power_keep), settings=s,
                    estimate=estimate,
                ))  # fmt: skip
            return planned[0]

        def whole(
            p: Problem, first: Callable[[Plan], None] | None, configs: ConfigSet | None,
            end: float | None,
        ) -> SolveResult:  # fmt: skip
            when = whole_time()[0]
            at = when if end is None else dataclasses.replace(when, end=end)
            return self._whole(p, at, stop, first, configs)

        result = solve_with_slices(
            target, whole, on_first_plan, mig_clock.left, lambda: whole_time()[1]
        )
        if power_states:
            seconds = clock.left()
            if isinstance(stop, ProbeStop) and stop.cut_short() and not stop.requested():
                # cut short by the probe (its clock reads 0): the reserve, and 0.1 s for the
                # bound's LP, whose build the reserve leaves out
                seconds = min(power_keep + 0.1, max(deadline.end - time.monotonic(), 0.0))
            result = with_power_actions(problem, result, seconds - answer_margin(problem))
        cap = problem.cluster.energy_cap_watts
        if cap is None:
            return result
        note = f"energy budget: this round's cap {cap:.0f} W"
        stats = dataclasses.replace(result.stats, detail=f"{note}; {result.stats.detail}")
        return dataclasses.replace(result, stats=stats)

    def quick(self, problem: Problem, clock: Clock, why: str) -> SolveResult:
        """The quick plan within the clock, as a fallback for `why` (also the service's answer
        when a solve's worker died); MIG slices packed after it (solver.core.mig)."""
        problem = ranked_for_completion(problem)
        deferral = defer_for_carbon(problem, self.settings)
        return with_deferred(problem, deferral, self._quick_round(deferral.problem, clock, why))

    def _quick_round(self, problem: Problem, clock: Clock, why: str) -> SolveResult:
        # The slices are packed within the clock too: the service's answer for a worker killed
        # at 0.3 s of an 800-job MIG round had packed on for 0.6 s (bench_unseen.py --seed 50).
        states = uses_power_states(problem)
        result = solve_with_slices(
            awake_problem(problem) if states else problem,
            lambda p, _, __, ___: self._quick(p, clock, why),
            None,
            clock.left,
            finish=False,
        )
        return with_power_actions(problem, result, 0.0) if states else result

    def _quick(self, problem: Problem, clock: Clock, why: str) -> SolveResult:
        return solve_quick(problem, self.settings, clock, why)

    def _whole(
        self,
        problem: Problem,
        deadline: Deadline,
        stop: threading.Event | None,
        on_first_plan: Callable[[Plan], None] | None,
        configs: ConfigSet | None = None,
    ) -> SolveResult:
        """The whole-GPU paths on `problem` (partitioned GPUs already left out; `configs`:
        its configurations, when already built)."""
        clock = Clock(deadline, stop)
        estimate = self.first_plan_estimate(problem)
        decomposed = self.decomposes(problem)
        if decomposed:  # the estimate is an idle machine's: at this call's pace
            estimate = clock.deadline.at_pace(estimate)
        if clock.left() < estimate:
            return self._quick(problem, clock, self._short(clock, estimate))
        if decomposed:
            return self._decomposed(problem, clock, on_first_plan)
        return self._here(problem, clock, estimate, on_first=on_first_plan, configs=configs)

    def decomposes(self, problem: Problem) -> bool:
        """Whether the solve of `problem` is decomposed."""
        s = self.settings
        backend = problem.options.backend
        return backend is Backend.DECOMPOSED or (
            backend is Backend.AUTO
            and (
                len(problem.jobs) >= s.decompose_min_jobs
                or len(problem.cluster.nodes) >= s.decompose_min_nodes
            )
        )

    def first_plan_estimate(self, problem: Problem) -> float:
        """Roughly how long the path this solver takes for `problem` (``decomposes``) needs to
        its first answer (``solver.core.deadline.first_plan_estimate``)."""
        decomposed = self.decomposes(problem)
        return first_plan_estimate(self.settings, len(problem.jobs), decomposed=decomposed)

    def close(self) -> None:
        """Close the executor this solver made (a given one stays open)."""
        with self._lock:
            own, self._own = self._own, None
        if own is not None:
            own.close()

    # ------------------------------------------------------------ paths

    def _executor(self) -> Executor:
        if self._given is not None:
            return self._given
        with self._lock:
            if self._own is None:
                self._own = LazyExecutor(self.ray_address)
            return self._own

    @staticmethod
    def _short(clock: Clock, estimate: float, when: str = "") -> str:
        why = f"{max(clock.left(), 0.0):.3f} s left, the first plan needs ~{estimate:.3f} s"
        return f"{why} {when}" if when else why

    def _here(
        self,
        problem: Problem,
        clock: Clock,
        estimate: float,
        *,
        fallback_for: str = "",
        on_first: Callable[[Plan], None] | None = None,
        configs: ConfigSet | None = None,
    ) -> SolveResult:
        """The heuristic's plan, improved by the backend's steps, in this process; the quick
        plan if enumeration leaves too little time. With `fallback_for` (why the path that
        should have answered failed), the heuristic's plan alone, as a fallback."""
        s = self.settings
        configs = build_config_set(problem) if configs is None else configs
        after = s.after_enumeration_share * estimate
        if clock.left() < after:  # a machine slower than estimated
            why = self._short(clock, after, "after enumeration")
            return self._quick(problem, clock, f"{fallback_for}; {why}" if fallback_for else why)
        blocked = unkeepable_jobs(problem, configs)
        if blocked:
            return infeasible(
                problem,
                "non-preemptible jobs whose running shape has no estimate: " + ", ".join(blocked),
                wall_seconds=clock.elapsed(),
                configs=configs,
            )
        backend = problem.options.backend
        only_heuristic = bool(fallback_for) or backend is Backend.HEURISTIC
        run = SolveRun(
            problem=problem,
            settings=s,
            clock=clock,
            incumbent=Incumbent(problem, improve=not only_heuristic, on_first=on_first),
            configs=configs,
            heuristic=Heuristic(problem, configs, clock.stopped),
            threads=problem.options.threads or s.threads or available_cores(),
        )
        run.incumbent.fairness_headroom = fairness_headroom(
            problem, configs.by_job, configs.best_samples_per_second
        )
        if isinstance(probe := clock.stop, ProbeStop):  # what a re-solve would need
            probe.to_guide = lambda: clock.deadline.at_pace(seconds_to_guide(run))
        if fallback_for:
            run.incumbent.degrade(fallback_for)
        violations, first = run_first(run)
        if violations:
            why = with_kept_jobs(problem, violations[0])
            return infeasible(problem, why, wall_seconds=clock.elapsed(), configs=configs)
        if fallback_for or not aggregate_fits(run):
            if not fallback_for:
                run.incumbent.note("no time left for the aggregated bound")
                # Its Lagrangian dual still bounds the answer (61 ms at 2,048 jobs, its
                # time capped): on a loaded machine this path answered at 0.6 s of 1 s
                # with no bound.
                if clock.left() > clock.deadline.at_pace(run.extract_seconds):
                    dual_first(run)
                    place_dual_guide(run, GUIDED_SEARCH_SECONDS)
            run_priced(run, first, clock.share_of_budget(s.heuristic_share))
            return run.result()
        if aggregate_is_slow(run):
            run.incumbent.note("priced passes before the slow aggregated LP")
            dual_first(run)
            run_priced(run, first, clock.share_of_budget(s.heuristic_share))
        guide = aggregate_bound(run)
        if backend in EXACT_BACKENDS:
            place_guided(run, guide, need=s.guided_start_share)
            if not run.incumbent.done():
                # As AUTO's: beyond in_process_max_variables in a worker killed at the
                # deadline, since HiGHS's presolve cannot be stopped (200 nodes / 400 jobs,
                # 201,260 variables: a 3 s call answered after 4.2-4.4 s in process).
                size = full_model_size(run)
                in_process = size <= s.in_process_max_variables
                solve_full_model(run, size, backend, run.threads, in_process=in_process)
            return run.result()
        if not run.incumbent.done():
            improve(run, guide, first, backend)
        if backend is Backend.HEURISTIC:
            run.incumbent.note("heuristic only (no exact solver beyond the aggregated LP)")
        return run.result()

    def _decomposed(
        self, problem: Problem, clock: Clock, on_first: Callable[[Plan], None] | None
    ) -> SolveResult:
        executor = self._executor()
        incumbent = Incumbent(problem, improve=False, on_first=on_first)
        try:
            d, quick_seconds = decompose_after_quick(
                problem, self.settings, clock, executor, incumbent
            )
        except (WorkerLost, Stopped, ConnectionError) as e:
            # No part came back (or the Ray cluster could not be joined: the error names the
            # address, the cause and the fix): the heuristic answers from here, or the quick
            # plan when time is short (and at once when the solve was stopped).
            why = str(e) if isinstance(e, ConnectionError) else f"{e} in the first round"
            estimate = self.first_plan_estimate(problem)
            if clock.left() >= estimate:
                return self._here(problem, clock, estimate, fallback_for=why, on_first=on_first)
            why = f"{why}; {self._short(clock, estimate)}"
            if incumbent.best is None:
                return self._quick(problem, clock, why)
            # The quick plan made before the parts: making it again took most of what was
            # left (0.7 s at 20,000 jobs), and within the rest it placed fewer jobs.
            incumbent.degrade(f"the quick plan ({why})")
            first_at = incumbent.first_at
            assert first_at is not None
            return incumbent.result(
                wall_seconds=clock.elapsed(), first_plan_seconds=first_at - clock.start
            )
        blocked = unkeepable_jobs(problem, d.configs)
        return finish_decomposed(
            problem, self.settings, clock, d, executor, blocked, incumbent, quick_seconds
        )


def unkeepable_jobs(problem: Problem, configs: ConfigSet) -> list[str]:
    """Non-preemptible running jobs with no configuration of the shape they run in."""
    out = []
    for job in problem.jobs:
        if job.current is None or job.preemptible:
            continue
        current = job.current.shape
        if not any(c.shape == current for c in configs.by_job[job.name]):
            out.append(job.name)
    return out


__all__ = ["EXACT_BACKENDS", "Solver", "unkeepable_jobs"]
