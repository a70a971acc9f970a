"""One solve: heuristic first, then the exact model seeded with it, within the time left.

The heuristic's plan exists before anything else runs, so a response is always there; the
exact model only replaces it with a better checked plan. Every plan that leaves is checked.
When the time left is shorter than the first plan's estimate (`first_plan_estimate`), the
quick plan (solver.search.quick: running jobs kept, queued ones placed in one pass until the
deadline) answers instead, FEASIBLE, its detail starting with "quick plan".
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from solver.domain import (
    Backend,
    Config,
    ObjectiveBreakdown,
    Plan,
    Problem,
    SolveResult,
    SolveStats,
    Termination,
)
from solver.exact import formulation
from solver.exact.backends import ExactOptions, SolverStatus, get_backend
from solver.exact.isolated import solve_in_process
from solver.exact.lns import SUB_BACKEND, Lns
from solver.exact.solve import plan_of, solve_full
from solver.perfmodel.configs import ConfigSet, build_config_set
from solver.runtime.pools import (
    Executor,
    Stopped,
    WorkerLost,
    available_cores,
    make_executor,
)
from solver.scoring.checker import check_plan
from solver.scoring.plans import materialize
from solver.search.bound import solve_aggregate
from solver.search.decompose import solve_decomposed
from solver.search.heuristic import Heuristic
from solver.search.lagrangian import solve_lagrangian
from solver.search.quick import QuickPlan, finish_seconds, quick_plan

log = logging.getLogger(__name__)

HEURISTIC_SHARE = 0.5
"""Safety stop for the heuristic, as a share of the budget: its work is limited by passes, so
its plan does not depend on the machine's speed; this stop binds only on an overloaded one."""
MAX_HEURISTIC_SECONDS = 2.0
"""Safety stop for a guided pass."""
EXTRACT_MARGIN_SECONDS = 0.15
"""Time kept back after CP-SAT stops, to extract, check and return its plan."""
IMPROVEMENT_EPSILON = 1e-9
BUILD_SECONDS_PER_VARIABLE = 2e-6
"""Rough cost of building the full model, its warm start and loading it into a solver
(measured 0.6-0.8 us per variable on a quiet machine, 1.3-2 us on a loaded one;
docs/benchmarks.md, "Building the full model")."""
MERGE_SECONDS_PER_JOB = 2e-4
"""Time kept for merging, completing and checking a decomposed plan (about 3 s at 16,384
jobs on the 2-core machine)."""
OPTIMALITY_TOLERANCE = 1e-6
"""Relative gap reported as OPTIMAL: the integer scaling of CP-SAT's objective
(backends.cpsat.SCALE) and the MILP solvers' bound margins leave a proven bound that can sit
this far above the optimum."""
AUTO_EXACT_BACKEND = Backend.HIGHS
"""The full model's backend under AUTO: HiGHS proved pai optimal in 12 s and closed
modern-power to 0.2 % where CP-SAT stayed at 4.9 % and 7.0 % (docs/backends.md)."""
LP_MAX_CONFIGURATIONS = 50_000
"""Above this, the aggregated bound comes from the Lagrangian dual (solver.search.lagrangian): GLOP
takes ~11 s on 250,000 configurations, the cutting planes under a second."""
DECOMPOSE_MIN_JOBS = 8_192
DECOMPOSE_MIN_NODES = 4_096
"""AUTO decomposes (solver.search.decompose) snapshots with this many jobs or nodes."""
FULL_MODEL_MAX_VARIABLES = 200_000
"""AUTO solves the full placement model only up to about this many variables (0.2-0.4 s to
build and load, in a child process killed at the deadline); beyond, HiGHS's presolve alone
outlasts most budgets, and LNS and the aggregated MIP use the time."""
AGGREGATE_SECONDS_PER_CONFIGURATION = 8e-6
"""Rough cost of the aggregated LP (built and solved): 0.27 s for large's 37,000
configurations, about 7-9 us each. With less time left, the heuristic's plan returns
at once rather than late."""
IN_PROCESS_MAX_VARIABLES = 20_000
"""Up to this size the full model is solved in-process (presolve takes milliseconds, and a
worker process would cost its start); beyond, in a worker killed at the deadline."""
AGGREGATE_MIP_SHARE = 0.5
"""Share of the time left for the aggregated MIP (beside LNS, or before it on one core)."""
MIN_AGGREGATE_MIP_SECONDS = 0.1
LNS_SHARE_ONE_CORE = 0.5
"""On one core, the share of the time left that LNS gets before the full model runs."""
FIRST_PLAN_SECONDS = 0.003
FIRST_PLAN_SECONDS_PER_JOB = 2e-4
"""Estimated time of the normal path's first answer (enumeration, the heuristic's set-up, its
first greedy pass, the plan, the checker): measured 137 us a job at medium, 113 at large and
159 at xl (in-process) on the 2-core machine at a 1-minute load of 3-5
(scripts/bench_deadline.py --profile; docs/benchmarks.md, "Short budgets"), with half again
for load; a slower machine is caught after enumeration (AFTER_ENUMERATION_SHARE) and by the
first greedy pass's own stop. With less time left, the quick plan (solver.search.quick)
answers instead."""
AFTER_ENUMERATION_SHARE = 0.7
"""Share of the first plan's estimate needed after enumeration (the heuristic's set-up, its
first pass, the plans and the checker: measured 0.19 s at large, 93 us a job, against
0.29 s kept)."""
DECOMPOSED_FIRST_PLAN_SECONDS_PER_JOB = 6e-4
"""The same for a decomposed solve (parts on the executor, merge, completion, bound): xl's
16,384 jobs answered in 9.2 s (5.6e-4 s a job) at the shortest budgets on the 2-core machine
at a load of 8, before the quick plan existed."""


@dataclass(frozen=True)
class _Clock:
    start: float
    end: float
    cancel: threading.Event | None = None
    """Set when the caller gives up (a cancelled or expired RPC): no time is left."""

    def stopped(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()

    def left(self) -> float:
        return 0.0 if self.stopped() else self.end - time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.start


def solve(
    problem: Problem,
    *,
    deadline: float | None = None,
    executor: Executor | None = None,
    cancel: threading.Event | None = None,
) -> SolveResult:
    """Solve within min(the problem's time budget, `deadline` as a time.monotonic() instant).

    `executor` runs the sub-problems of a decomposed solve (default: a local process pool
    made for this solve); other backends ignore it. Once `cancel` is set, the search, the
    solvers (interrupted) and the worker process (killed) stop and the best plan so far
    returns at once.
    """
    start = time.monotonic()
    end = start + problem.options.time_budget_seconds
    if deadline is not None:
        end = min(end, deadline)
    clock = _Clock(start, end, cancel)
    estimate = first_plan_estimate(problem)
    if clock.left() < estimate:
        return _solve_quick(problem, clock, estimate)
    if decomposes(problem):
        if executor is not None:
            return _solve_decomposed(problem, clock, executor)
        own = make_executor()
        try:
            return _solve_decomposed(problem, clock, own)
        finally:
            own.close()
    return _solve_here(problem, clock, estimate)


def _solve_here(
    problem: Problem, clock: _Clock, estimate: float, *, heuristic_only: bool = False
) -> SolveResult:
    """The heuristic's plan, improved by the portfolio (or not, `heuristic_only`), in this
    process; the quick plan if enumeration leaves too little time."""
    configs = build_config_set(problem)
    if clock.left() < AFTER_ENUMERATION_SHARE * estimate:  # a machine slower than estimated
        return _solve_quick(problem, clock, AFTER_ENUMERATION_SHARE * estimate, "after enumeration")

    blocked = _unkeepable_jobs(problem, configs)
    if blocked:
        return _infeasible(
            problem,
            configs,
            clock,
            "non-preemptible jobs whose running shape has no estimate: " + ", ".join(blocked),
        )

    heuristic = Heuristic(problem, configs)
    heuristic_plan = heuristic.run(
        clock.start + HEURISTIC_SHARE * (clock.end - clock.start),
        stop_at=clock.end - finish_seconds(problem),
    )
    assert heuristic.first_plan_at is not None
    first_plan = heuristic.first_plan_at - clock.start
    violations = check_plan(problem, heuristic_plan.assignments)
    if violations:
        # Only hard constraints of the request itself (non-preemptible jobs over a power budget)
        # defeat the heuristic, which places those jobs first whatever they draw.
        return _infeasible(problem, configs, clock, violations[0].message)
    cut = f"the first greedy pass stopped at the deadline after {heuristic.cut_short} jobs; "
    if heuristic_only or problem.options.backend is Backend.HEURISTIC:
        return _result(
            heuristic_plan,
            configs,
            clock,
            Termination.FEASIBLE,
            Backend.HEURISTIC,
            None,
            first_plan,
            (cut if heuristic.cut_short is not None else "") + "heuristic only",
        )
    portfolio = _Portfolio(problem, configs, clock, heuristic, heuristic_plan, first_plan)
    if heuristic.cut_short is not None:
        portfolio.notes.append(cut.removesuffix("; "))
    return portfolio.run()


def first_plan_estimate(problem: Problem) -> float:
    """Roughly how long the normal path takes to its first answer (FIRST_PLAN_SECONDS_PER_JOB);
    with less time left the quick plan answers."""
    per_job = (
        DECOMPOSED_FIRST_PLAN_SECONDS_PER_JOB if decomposes(problem) else FIRST_PLAN_SECONDS_PER_JOB
    )
    return FIRST_PLAN_SECONDS + per_job * len(problem.jobs)


def _solve_quick(problem: Problem, clock: _Clock, estimate: float, when: str = "") -> SolveResult:
    """The quick plan (solver.search.quick), checked; the plan that only keeps the running jobs
    if it fails the checker (a bug: logged); INFEASIBLE if that fails too (the request's own
    hard constraints: non-preemptible jobs that cannot keep their GPUs or their power)."""
    why = f"{max(clock.left(), 0.0):.3f} s left, the first plan needs ~{estimate:.3f} s"
    if when:
        why += f" {when}"
    end = clock.end - finish_seconds(problem)
    quick = quick_plan(problem, end, clock.stopped)
    first_plan = clock.elapsed()
    if quick.blocked:
        return _infeasible(
            problem,
            quick.configs,
            clock,
            "non-preemptible jobs that cannot keep their allocation: " + ", ".join(quick.blocked),
        )
    violations = check_plan(problem, quick.plan.assignments)
    if violations and quick.started:
        log.error("quick plan rejected by the checker: %s", violations[0])
        kept = quick_plan(problem, float("-inf"))
        if not check_plan(problem, kept.plan.assignments):
            return _quick_result(
                kept,
                clock,
                first_plan,
                f"{why}; the quick plan failed the "
                f"checker ({violations[0].constraint}): running jobs kept only",
            )
    if violations:
        return _infeasible(problem, quick.configs, clock, violations[0].message)
    return _quick_result(quick, clock, first_plan, why)


def _quick_result(quick: QuickPlan, clock: _Clock, first_plan: float, why: str) -> SolveResult:
    return _result(
        quick.plan,
        quick.configs,
        clock,
        Termination.FEASIBLE,
        Backend.HEURISTIC,
        None,
        first_plan,
        f"{quick.summary()} ({why})",
    )


class _Portfolio:
    """The exact path: aggregated bound and guided plan, then the full model on an exact
    backend (CP-SAT under AUTO)."""

    def __init__(
        self,
        problem: Problem,
        configs: ConfigSet,
        clock: _Clock,
        heuristic: Heuristic,
        heuristic_plan: Plan,
        first_plan: float,
    ) -> None:
        self.problem = problem
        self.configs = configs
        self.clock = clock
        self.heuristic = heuristic
        self.heuristic_plan = heuristic_plan
        self.first_plan = first_plan
        self.best = heuristic_plan
        self.best_backend = Backend.HEURISTIC
        self.bound: float | None = None
        self.proven_optimal = False
        self.notes: list[str] = []
        self.threads = problem.options.threads or available_cores()
        self.lock = threading.Lock()
        """Guards best, bound and notes while LNS and the full model run side by side."""
        self.guide: dict[str, Config] = {}
        """The aggregated MIP's choice, which LNS also searches around."""
        self.running_lns: Lns | None = None
        self.heuristic_lock = threading.Lock()
        self.closed = False
        """Set when the answer is being made: later offers (a late full model) are ignored."""

    def offer(self, plan: Plan | None, source: str, backend: Backend) -> None:
        """Keep `plan` if it passes the checker and beats the best so far."""
        if plan is None:
            return
        violations = check_plan(self.problem, plan.assignments)
        with self.lock:
            if self.closed:
                return
            if violations:
                log.error("%s plan rejected by the checker: %s", source, violations[0])
                self.notes.append(f"{source} plan failed the checker ({violations[0].constraint})")
                return
            if plan.objective.total > self.best.objective.total + IMPROVEMENT_EPSILON:
                self.best = plan
                self.best_backend = backend

    def tighten(self, bound: float | None) -> None:
        with self.lock:
            if self.closed:
                return
            if bound is not None and (self.bound is None or bound < self.bound):
                self.bound = bound

    def gap_closed(self) -> bool:
        if self.bound is None:
            return False
        gap = (self.bound - self.best.objective.total) / max(abs(self.best.objective.total), 1e-9)
        return self.proven_optimal or gap <= max(
            self.problem.options.relative_gap, OPTIMALITY_TOLERANCE
        )

    def run(self) -> SolveResult:
        full_size = formulation.estimate_size(self.problem, self.configs)
        backend = self.problem.options.backend
        needed = AGGREGATE_SECONDS_PER_CONFIGURATION * self.configs.num_configurations
        if self.clock.left() < EXTRACT_MARGIN_SECONDS + needed:
            self.notes.append("no time left for the aggregated bound")
            return self.finish()
        choice = self.aggregate()
        if backend in _EXACT:
            self.place_guided(choice)
            if not self.gap_closed():
                self.full(full_size, backend, self.threads)
        elif not self.gap_closed():
            self.search(full_size, choice)
        return self.finish()

    def search(self, full_size: int, choice: Mapping[str, Config]) -> None:
        """AUTO: LNS around the best plan until the end; beside it (when cores allow) or before
        and after it, the aggregated model as a MIP (a tighter bound, an integral guide) and the
        full model if it is small enough to build in time. The solvers release the GIL, so a
        thread gives them their own core from the start; the aggregated LP's choice is placed
        meanwhile."""
        end = self.clock.end - EXTRACT_MARGIN_SECONDS
        fits = full_size <= FULL_MODEL_MAX_VARIABLES
        small = full_size <= IN_PROCESS_MAX_VARIABLES
        if not fits:
            self.notes.append(f"full model skipped: ~{full_size} variables")

        def exact_side(threads: int) -> None:
            self.refine()
            if fits and not self.gap_closed():
                self.full(full_size, AUTO_EXACT_BACKEND, threads, in_process=small)

        if self.threads < 2:
            self.place_guided(choice)
            self.refine()
            self.lns(time.monotonic() + LNS_SHARE_ONE_CORE * (end - time.monotonic()))
            if fits and not self.gap_closed():
                self.full(full_size, AUTO_EXACT_BACKEND, 1, in_process=small)
            return
        # Not a daemon: a solver thread still inside HiGHS when the interpreter exits would
        # abort the process; after a stop it ends within its solver's next interrupt check.
        exact = threading.Thread(
            target=exact_side, args=(self.threads - 1,), name="dsfro-exact", daemon=False
        )
        exact.start()
        self.place_guided(choice)
        self.lns(
            end, stop=lambda: self.clock.stopped() or (not exact.is_alive() and self.gap_closed())
        )
        exact.join(timeout=max(self.clock.left(), 0.0))
        if exact.is_alive():
            with self.lock:
                self.closed = True
                why = "cancelled" if self.clock.stopped() else "ran past the deadline"
                self.notes.append(f"the exact side {why}; its result is ignored")

    def refine(self) -> None:
        """The aggregated model with integral choices (HiGHS MIP, a share of the time left):
        its dual bound tightens the LP's, and its choice is placed like the LP's."""
        if self.configs.num_configurations > LP_MAX_CONFIGURATIONS or self.gap_closed():
            return
        limit = AGGREGATE_MIP_SHARE * (self.clock.left() - EXTRACT_MARGIN_SECONDS)
        if limit < MIN_AGGREGATE_MIP_SECONDS:
            return
        outcome = solve_aggregate(
            self.problem, self.configs, integer=True, time_limit=limit, stop=self.clock.stopped
        )
        self.notes.append(f"aggregate MIP {outcome.status} in {outcome.wall_seconds:.2f} s")
        self.tighten(outcome.best_bound)
        if outcome.choice:
            with self.lock:
                self.guide = outcome.choice
                if self.running_lns is not None:
                    self.running_lns.set_guide(outcome.choice)
        self.place_guided(outcome.choice, "MIP-guided")

    def lns(self, end: float, stop: Callable[[], bool] | None = None) -> None:
        """Large-neighbourhood search from the best plan so far (solver.exact.lns)."""
        if end - time.monotonic() < 2 * EXTRACT_MARGIN_SECONDS:
            return
        with self.lock:
            start = self.best
            search = Lns(self.problem, self.configs, start)
            if self.guide:
                search.set_guide(self.guide)
            self.running_lns = search
        search.run(
            end,
            on_improve=lambda plan: self.offer(plan, "LNS", SUB_BACKEND),
            stop=stop if stop is not None else lambda: self.clock.stopped() or self.gap_closed(),
        )
        with self.lock:
            self.notes.append(search.stats.summary())

    def aggregate(self) -> Mapping[str, Config]:
        """Bound the aggregated model (LP, or its Lagrangian dual when large); its
        configuration choice, to place."""
        if self.configs.num_configurations <= LP_MAX_CONFIGURATIONS:
            outcome = solve_aggregate(self.problem, self.configs)
            self.notes.append(f"aggregate LP {outcome.status} in {outcome.wall_seconds:.2f} s")
            bound, choice = outcome.best_bound, outcome.choice
        else:
            dual = solve_lagrangian(
                self.problem, self.configs, time_limit=max(0.2 * self.clock.left(), 0.1)
            )
            self.notes.append(
                f"aggregate Lagrangian bound in {dual.wall_seconds:.2f} s ({dual.iterations} cuts)"
            )
            bound, choice = dual.best_bound, dual.choice
        self.tighten(bound)
        return choice

    def place_guided(self, choice: Mapping[str, Config], source: str = "guided") -> None:
        """Place a configuration choice best-fit, then local search; offer the plan."""
        needed = EXTRACT_MARGIN_SECONDS + 2 * self.heuristic.pass_seconds
        if not choice or self.clock.left() <= needed or self.gap_closed():
            return
        with self.heuristic_lock:  # one guided placement at a time: the heuristic has state
            ls_end = time.monotonic() + min(
                self.clock.left() - EXTRACT_MARGIN_SECONDS, MAX_HEURISTIC_SECONDS
            )
            started = time.monotonic()
            plan = self.heuristic.run_guided(choice, ls_end)
        self.offer(plan, source, Backend.AGGREGATE)
        self.notes.append(f"{source} placement in {time.monotonic() - started:.2f} s")

    def full(self, size: int, which: Backend, threads: int, *, in_process: bool = True) -> None:
        """The full formulation on an exact backend (CP-SAT, HiGHS or Pyomo), seeded with the
        best plan so far; with `in_process` false, in a child process stopped at the deadline
        (solver.exact.isolated)."""
        if self.clock.left() <= EXTRACT_MARGIN_SECONDS + BUILD_SECONDS_PER_VARIABLE * size:
            self.notes.append("no time left to build and solve the full model")
            return
        model = formulation.build(self.problem, self.configs)
        with self.lock:
            hint = formulation.hint(model, self.best)
        time_limit = self.clock.left() - EXTRACT_MARGIN_SECONDS
        if time_limit <= 0:
            self.notes.append("building the full model used up the time budget")
            return
        o = self.problem.options
        options = ExactOptions(
            time_limit=time_limit,
            relative_gap=o.relative_gap,
            seed=o.seed,
            threads=threads,
            time_budget=o.time_budget_seconds,
            solver_name=o.pyomo_solver,
            stop=self.clock.stopped,
        )
        if in_process:
            result = solve_full(model, which, hint=hint, options=options)
        else:
            solved = solve_in_process(
                self.problem,
                self.configs,
                which,
                hint=hint,
                options=options,
                deadline=self.clock.end - EXTRACT_MARGIN_SECONDS,
            )
            result = plan_of(model, solved, get_backend(which).name)
        name = result.backend
        note = f"{name} {result.status.value} in {result.wall_seconds:.2f} s"
        self.notes.append(f"{note} ({result.detail})" if result.detail else note)
        if result.status is SolverStatus.INFEASIBLE:
            # The heuristic's plan passed the checker, so the model disagrees with the checker.
            log.error("%s says infeasible but the heuristic plan passes the checker", name)
            self.notes.append(f"{name} disagreed with the checker; its verdict ignored")
            return
        if result.status is SolverStatus.ERROR:
            log.error("%s failed: %s", name, result.detail)
            return
        self.offer(result.plan, name, which)
        self.tighten(result.best_bound)
        if result.status is SolverStatus.OPTIMAL and not self.closed:
            self.proven_optimal = True

    def finish(self) -> SolveResult:
        """OPTIMAL when the bound meets the plan; else FEASIBLE for an improved plan, FALLBACK
        for the heuristic's own. backend_used names where the returned plan came from."""
        detail = "; ".join(self.notes)
        if self.gap_closed():
            termination = Termination.OPTIMAL
        elif self.best_backend is Backend.HEURISTIC:
            termination = Termination.FALLBACK
            detail += "; nothing better than the heuristic's plan"
        else:
            termination = Termination.FEASIBLE
        return _result(
            self.best,
            self.configs,
            self.clock,
            termination,
            self.best_backend,
            self.bound,
            self.first_plan,
            detail,
        )


def decomposes(problem: Problem) -> bool:
    """Whether the solve of `problem` is decomposed (and needs an executor)."""
    backend = problem.options.backend
    return backend is Backend.DECOMPOSED or (
        backend is Backend.AUTO
        and (
            len(problem.jobs) >= DECOMPOSE_MIN_JOBS
            or len(problem.cluster.nodes) >= DECOMPOSE_MIN_NODES
        )
    )


def _solve_decomposed(problem: Problem, clock: _Clock, executor: Executor) -> SolveResult:
    """Parts solved through the executor, merged, completed by one global pass, checked, and
    bounded by the Lagrangian dual over every part's configurations."""
    reserve = min(0.3 * (clock.end - clock.start), MERGE_SECONDS_PER_JOB * len(problem.jobs) + 0.5)
    try:
        d = solve_decomposed(problem, executor, end=clock.end - reserve, stop=clock.stopped)
    except (WorkerLost, Stopped) as e:
        # No part came back: the heuristic answers from here, or the quick plan when time is
        # short (and at once when the solve was stopped).
        why = f"{e} in the first round"
        estimate = first_plan_estimate(problem)
        if clock.left() < estimate:
            return _fallback(_solve_quick(problem, clock, estimate, "after the parts failed"), why)
        return _fallback(_solve_here(problem, clock, estimate, heuristic_only=True), why)
    configs = d.configs
    blocked = _unkeepable_jobs(problem, configs)
    if blocked:
        return _infeasible(
            problem,
            configs,
            clock,
            "non-preemptible jobs whose running shape has no estimate: " + ", ".join(blocked),
        )
    first = materialize(problem, configs, d.first)
    violations = check_plan(problem, first.assignments)
    if violations:
        return _infeasible(problem, configs, clock, violations[0].message)
    notes = [f"{d.parts} parts on {executor.name} ({executor.workers} workers)"]
    dual = solve_lagrangian(problem, configs, time_limit=max(0.1 * clock.left(), 0.1))
    notes.append(f"Lagrangian bound in {dual.wall_seconds:.2f} s")
    best = first
    heuristic = Heuristic(problem, configs)
    completed = heuristic.complete(d.final, clock.end - EXTRACT_MARGIN_SECONDS - 0.1 * reserve)
    if check_plan(problem, completed.assignments):
        notes.append("completed plan failed the checker; the first plan is returned")
    elif completed.objective.total > best.objective.total:
        best = completed
    gap = (dual.best_bound - best.objective.total) / max(abs(best.objective.total), 1e-9)
    termination = Termination.OPTIMAL if gap <= OPTIMALITY_TOLERANCE else Termination.FEASIBLE
    if d.lost and termination is not Termination.OPTIMAL and not clock.stopped():
        # The second round's work died with its worker: the first round's plan, completed.
        termination = Termination.FALLBACK
        notes.append(f"{d.lost}; the first round's plan, completed")
    elif d.lost:
        notes.append(f"second round {d.lost}")
    return _result(
        best,
        configs,
        clock,
        termination,
        Backend.DECOMPOSED,
        dual.best_bound,
        d.first_seconds,
        "; ".join(notes),
    )


def _fallback(result: SolveResult, why: str) -> SolveResult:
    """`result` told as a FALLBACK (the search that should have answered failed), unless it is
    INFEASIBLE, which stays what it is; `why` leads its detail."""
    if result.stats.termination is Termination.INFEASIBLE:
        return result
    stats = dataclasses.replace(
        result.stats, termination=Termination.FALLBACK, detail=f"{why}; {result.stats.detail}"
    )
    return dataclasses.replace(result, stats=stats)


_EXACT = frozenset({Backend.CPSAT, Backend.HIGHS, Backend.PYOMO})
"""Backends that solve the full formulation (solver.exact.backends)."""


def _unkeepable_jobs(problem: Problem, configs: ConfigSet) -> list[str]:
    out = []
    for job in problem.jobs:
        if job.current is None or job.preemptible:
            continue
        current = job.current.shape
        if not any(c.shape == current for c in configs.by_job[job.name]):
            out.append(job.name)
    return out


def _result(
    plan: Plan,
    configs: ConfigSet,
    clock: _Clock,
    termination: Termination,
    backend: Backend,
    bound: float | None,
    first_plan: float,
    detail: str,
) -> SolveResult:
    objective = plan.objective.total
    gap = None
    if bound is not None:
        bound = max(bound, objective)
        gap = (bound - objective) / max(abs(objective), 1e-9)
    stats = SolveStats(
        termination=termination,
        backend_used=backend,
        objective=objective,
        best_bound=bound,
        relative_gap=gap,
        wall_seconds=clock.elapsed(),
        first_plan_seconds=first_plan,
        num_configurations=configs.num_configurations,
        num_configurations_enumerated=configs.num_enumerated,
        detail=detail,
    )
    return SolveResult(plan=plan, stats=stats)


def _infeasible(problem: Problem, configs: ConfigSet, clock: _Clock, detail: str) -> SolveResult:
    """No valid plan exists (or none was found and the model proved there is none)."""
    empty = Plan(assignments=(), objective=ObjectiveBreakdown(0.0, 0.0, 0.0, 0.0, 0.0, 0.0))
    stats = SolveStats(
        termination=Termination.INFEASIBLE,
        backend_used=problem.options.backend,
        objective=0.0,
        best_bound=None,
        relative_gap=None,
        wall_seconds=clock.elapsed(),
        first_plan_seconds=clock.elapsed(),
        num_configurations=configs.num_configurations,
        num_configurations_enumerated=configs.num_enumerated,
        detail=detail,
    )
    return SolveResult(plan=empty, stats=stats)
