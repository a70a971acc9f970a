"""Large-neighbourhood search on the full model: fix most jobs where the incumbent has them,
re-optimise the others exactly, keep the result if the whole plan is better.

A neighbourhood is a set of free jobs. Its model is the full formulation of a sub-problem: the
free jobs on the same nodes with the GPUs of the fixed jobs taken away and the power budgets
lowered by the fixed jobs' draw above idle. The free jobs' objective terms are those of the full
problem (the same configurations, the same energy denominator), so a better sub-plan is a better
whole plan; the merged plan is still scored from scratch and checked before it is offered.

Neighbourhoods follow the problem's structure: a GPU type (re-type and re-size its jobs), a
rack (re-pack it), the power budget (trade clocks between jobs across the cluster) and random
job sets. Their size adapts to the time a sub-model takes to close.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from solver.domain import Backend, Config, Job, JobState, Plan, Problem
from solver.exact import formulation
from solver.exact.backends import ExactOptions, SolverStatus
from solver.exact.solve import solve_full
from solver.perfmodel import budgets, quotas
from solver.perfmodel.configs import ConfigSet
from solver.scoring.checker import check_plan
from solver.scoring.fairness import part_fairness
from solver.scoring.objective import running_gain
from solver.scoring.plans import Choice, materialize

INITIAL_VARIABLES = 1_000
"""First neighbourhood size, in the sub-model's variables."""
MIN_VARIABLES = 300
MAX_VARIABLES = 60_000
GROW = 1.5
"""Size factor after a sub-model closed in under half its time; its inverse after one did not."""
MIN_SLICE_SECONDS = 0.15
"""Shortest time given to one sub-model: below it HiGHS rarely gets past presolve."""
SLICE_SHARE = 0.03
"""A sub-model gets this share of the time left (at least MIN_SLICE_SECONDS)."""
STALL_STEPS = 8
"""Non-improving neighbourhoods in a row after which they get twice as large and more time:
the small ones have found what they can."""
IMPROVEMENT = 1e-9
KINDS = ("gpu-type", "rack", "power", "random", "guide")
SUB_BACKEND = Backend.CPSAT
"""Backend of the neighbourhoods: CP-SAT, warm-started from the incumbent, improves small
placement models within tenths of a second where HiGHS often spends its slice at the root."""


@dataclass(frozen=True)
class Neighbourhood:
    kind: str
    """One of KINDS: what the free jobs have in common."""
    jobs: frozenset[str]


@dataclass
class LnsStats:
    iterations: int = 0
    improvements: int = 0
    by_kind: dict[str, int] = dataclasses.field(default_factory=dict)
    """Improving neighbourhoods per kind."""

    def summary(self) -> str:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.by_kind.items()))
        return f"LNS {self.improvements}/{self.iterations} improving" + (
            f" ({kinds})" if kinds else ""
        )


def choices_of(plan: Plan) -> dict[str, Choice]:
    """Each running job's configuration and GPUs per node."""
    return {
        a.job: (a.config, a.gpus_per_node())
        for a in plan.assignments
        if a.state is JobState.RUNNING and a.config is not None
    }


def sub_problem(
    problem: Problem, configs: ConfigSet, incumbent: Plan, free: Collection[str]
) -> tuple[Problem, ConfigSet]:
    """The free jobs alone, on the cluster that the incumbent's other jobs leave them."""
    free = set(free)
    cluster = problem.cluster
    taken: dict[str, set[int]] = {}
    by_name = {j.name: j for j in problem.jobs}
    fixed: list[tuple[Job, Config]] = []
    fixed_watts = 0.0
    rack_watts: dict[str, float] = {}
    for a in incumbent.assignments:
        if a.job in free or a.state is not JobState.RUNNING or a.config is None:
            continue
        fixed.append((by_name[a.job], a.config))
        per_gpu = budgets.extra_watts_per_gpu(cluster, a.config)
        fixed_watts += per_gpu * a.config.num_gpus
        for s in a.placement:
            taken.setdefault(s.node, set()).update(s.gpu_indices)
            rack = cluster.node(s.node).rack
            rack_watts[rack] = rack_watts.get(rack, 0.0) + per_gpu * len(s.gpu_indices)
    nodes = tuple(
        dataclasses.replace(n, unavailable_gpu_indices=n.unavailable_gpu_indices | taken[n.name])
        if n.name in taken
        else n
        for n in cluster.nodes
    )
    budget = cluster.power_budget_watts
    # Everything else of the cluster carries over (the power-saving policy prices a suspended
    # node's floor).
    sub_cluster = dataclasses.replace(
        cluster,
        nodes=nodes,
        power_budget_watts=None if budget is None else budget - fixed_watts,
        rack_power_budgets_watts={
            r: w - rack_watts.get(r, 0.0) for r, w in cluster.rack_power_budgets_watts.items()
        },
        reference_gpu_watts=cluster.max_gpu_watts(),
        queues=quotas.residual_queues(cluster, fixed),
    )
    jobs = tuple(j for j in problem.jobs if j.name in free)
    sub_configs = ConfigSet(
        by_job={j.name: configs.by_job[j.name] for j in jobs},
        best_samples_per_second={j.name: configs.best_samples_per_second[j.name] for j in jobs},
        num_enumerated=0,
        least_joules_per_sample={j.name: configs.least_joules(j.name) for j in jobs},
    )
    options = dataclasses.replace(problem.options, backend=SUB_BACKEND, threads=1)
    fairness = part_fairness(problem, configs.best_samples_per_second)
    return Problem(sub_cluster, jobs, problem.weights, options, fairness), sub_configs


def merge(
    problem: Problem, configs: ConfigSet, incumbent: Plan, free: Collection[str], sub: Plan
) -> Plan:
    """The incumbent with the free jobs as the sub-plan has them."""
    choices: dict[str, Choice | None] = {
        name: c for name, c in choices_of(incumbent).items() if name not in free
    }
    choices.update(choices_of(sub))
    return materialize(problem, configs, choices)


class Lns:
    """Neighbourhoods solved one after the other until a deadline."""

    def __init__(self, problem: Problem, configs: ConfigSet, incumbent: Plan) -> None:
        self.problem = problem
        self.configs = configs
        self.best = incumbent
        self.rng = random.Random(problem.options.seed)
        self.stats = LnsStats()
        self.exhausted = False
        """Set once a neighbourhood of every movable job was solved to optimality: the
        incumbent is then optimal given the fixed jobs, and more search cannot help."""
        self.target = INITIAL_VARIABLES
        self.stall = 0
        """Non-improving neighbourhoods in a row."""
        self.weights = dict.fromkeys(KINDS, 1.0)
        if (
            problem.cluster.power_budget_watts is None
            and not problem.cluster.rack_power_budgets_watts
        ):
            self.weights["power"] = 0.0
        self.weights["guide"] = 0.0
        self.guide: Mapping[str, Config] = {}
        """A configuration choice to move towards (the aggregated MIP's), once set_guide()."""
        cluster = problem.cluster
        nodes_of_type: dict[str, int] = {}
        for n in cluster.nodes:
            nodes_of_type[n.gpu_type] = nodes_of_type.get(n.gpu_type, 0) + 1
        factor = 3 if problem.weights.locality > 0 else 2
        max_watts = cluster.max_gpu_watts()
        self.size: dict[str, int] = {}
        self.types: dict[str, frozenset[str]] = {}
        self.value: dict[str, float] = {}
        """Each job's best gain over queueing: who is worth admitting."""
        for job in problem.jobs:
            options = configs.by_job[job.name]
            types = frozenset(c.gpu_type for c in options)
            self.types[job.name] = types
            self.size[job.name] = len(options) + factor * sum(nodes_of_type[t] for t in types)
            best, least = configs.best_samples_per_second[job.name], configs.least_joules(job.name)
            self.value[job.name] = max(
                (running_gain(job, c, best, problem.weights, max_watts, least) for c in options),
                default=0.0,
            )
        self.movable = [
            j.name
            for j in problem.jobs
            if configs.by_job[j.name] and (j.current is None or j.preemptible)
        ]

    # ------------------------------------------------------------ neighbourhoods

    def neighbourhood(self) -> Neighbourhood:
        """A set of free jobs of about `target` variables, of a kind drawn by past success."""
        kinds = [k for k in KINDS if self.weights[k] > 0]
        kind = self.rng.choices(kinds, weights=[self.weights[k] for k in kinds])[0]
        running = choices_of(self.best)
        cluster = self.problem.cluster
        if kind == "gpu-type":
            gpu_type = self.rng.choice(sorted({n.gpu_type for n in cluster.nodes}))
            core = [j for j in self.movable if j in running and running[j][0].gpu_type == gpu_type]
            extra = [j for j in self.movable if gpu_type in self.types[j] and j not in running]
        elif kind == "rack":
            rack = self.rng.choice(cluster.racks)
            core = [
                j
                for j in self.movable
                if j in running and any(cluster.node(n).rack == rack for n in running[j][1])
            ]
            rack_types = {n.gpu_type for n in cluster.nodes if n.rack == rack}
            extra = [j for j in self.movable if j not in running and self.types[j] & rack_types]
        elif kind == "guide":
            # Jobs whose configuration differs from the guide's, and the running jobs of the
            # same GPU types to make room.
            differ = [
                j
                for j in self.movable
                if self.guide.get(j) != (running[j][0] if j in running else None)
            ]
            kinds_of = {running[j][0].gpu_type for j in differ if j in running}
            kinds_of |= {self.guide[j].gpu_type for j in differ if j in self.guide}
            core = differ
            extra = [
                j
                for j in self.movable
                if j in running and j not in differ and running[j][0].gpu_type in kinds_of
            ]
        elif kind == "power":
            # The jobs drawing most above idle per unit of value, and those waiting.
            core = sorted(
                (j for j in self.movable if j in running),
                key=lambda j: -running[j][0].watts / max(self.value[j], 1e-9),
            )
            core = core[: max(1, len(core) // 3)]
            extra = [j for j in self.movable if j not in running]
        else:
            core = [j for j in self.movable if j in running]
            extra = [j for j in self.movable if j not in running]
        waiting = [j for j in extra if self.value[j] > 0 or j in running]
        self.rng.shuffle(core)
        self.rng.shuffle(waiting)
        picked: list[str] = []
        size = 0
        # Alternate running and waiting jobs so that both sides of a trade are free.
        for pair in _interleave(core, waiting):
            if size >= self.target:
                break
            picked.append(pair)
            size += self.size[pair]
        return Neighbourhood(kind, frozenset(picked))

    def adopt(self, plan: Plan) -> None:
        """Search from `plan` from now on if it is better than the incumbent (a plan found
        elsewhere: a guided placement)."""
        if plan.objective.total > self.best.objective.total + IMPROVEMENT:
            self.best = plan
            self.exhausted = False

    def set_guide(self, choice: Mapping[str, Config]) -> None:
        """Search also around `choice`: neighbourhoods of the jobs the plan runs otherwise."""
        self.guide = dict(choice)
        self.weights["guide"] = 2.0

    # ------------------------------------------------------------ search

    def step(self, deadline: float, stop: Callable[[], bool] | None = None) -> bool:
        """Solve one neighbourhood within the time left (its solver interrupted once `stop()`
        is true); True if the incumbent improved."""
        improved = self._step(deadline, stop)
        self.stall = 0 if improved else self.stall + 1
        if self.stall and self.stall % STALL_STEPS == 0:
            self.target = min(MAX_VARIABLES, 2 * self.target)
        return improved

    def _step(self, deadline: float, stop: Callable[[], bool] | None) -> bool:
        left = deadline - time.monotonic()
        if left < MIN_SLICE_SECONDS:
            return False
        if not self.movable:
            self.exhausted = True
            return False
        hood = self.neighbourhood()
        if not hood.jobs:
            self.weights[hood.kind] = max(0.05, 0.5 * self.weights[hood.kind])
            return False
        self.stats.iterations += 1
        sub, sub_configs = sub_problem(self.problem, self.configs, self.best, hood.jobs)
        model = formulation.build(sub, sub_configs)
        hint = formulation.hint(model, self.best)
        escalate = 1 + self.stall // STALL_STEPS
        budget = min(max(MIN_SLICE_SECONDS, SLICE_SHARE * left) * escalate, 0.5 * left)
        budget = min(budget, deadline - time.monotonic())
        if budget <= 0.05:
            return False
        started = time.monotonic()
        result = solve_full(
            model,
            SUB_BACKEND,
            hint=hint,
            options=ExactOptions(
                time_limit=budget, seed=self.problem.options.seed, threads=1, stop=stop
            ),
        )
        took = time.monotonic() - started
        if result.status is SolverStatus.OPTIMAL and took < budget / 2:
            self.target = min(MAX_VARIABLES, int(self.target * GROW))
        elif result.status is not SolverStatus.OPTIMAL:
            self.target = max(MIN_VARIABLES, int(self.target / GROW))
        if result.status is SolverStatus.OPTIMAL and self._covers_all(hood):
            self.exhausted = True
        if result.plan is None:
            return False
        try:
            merged = merge(self.problem, self.configs, self.best, hood.jobs, result.plan)
        except ValueError:
            return False
        if merged.objective.total <= self.best.objective.total + IMPROVEMENT:
            self.weights[hood.kind] = max(0.2, self.weights[hood.kind] * 0.9)
            return False
        if check_plan(self.problem, merged.assignments, merged.layout_changes):
            return False
        self.best = merged
        self.stats.improvements += 1
        self.stats.by_kind[hood.kind] = self.stats.by_kind.get(hood.kind, 0) + 1
        self.weights[hood.kind] = min(5.0, self.weights[hood.kind] + 1.0)
        return True

    def _covers_all(self, hood: Neighbourhood) -> bool:
        """Whether every job that runs or is worth running was free in `hood`."""
        running = choices_of(self.best)
        return all(j in hood.jobs for j in self.movable if j in running or self.value[j] > 0)

    def run(
        self,
        deadline: float,
        *,
        on_improve: Callable[[Plan], None] | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> Plan:
        """Improve the incumbent until `deadline` (time.monotonic()) or until `stop()`."""
        while (
            time.monotonic() + MIN_SLICE_SECONDS < deadline
            and not self.exhausted
            and not (stop and stop())
        ):
            if self.step(deadline, stop) and on_improve is not None:
                on_improve(self.best)
        return self.best


def _interleave(a: list[str], b: list[str]) -> list[str]:
    out: list[str] = []
    for i in range(max(len(a), len(b))):
        if i < len(a):
            out.append(a[i])
        if i < len(b):
            out.append(b[i])
    return out


def improve_by_lns(
    problem: Problem, configs: ConfigSet, incumbent: Plan, deadline: float
) -> tuple[Plan, LnsStats]:
    """The incumbent improved by LNS until `deadline`; the plan passes the checker."""
    lns = Lns(problem, configs, incumbent)
    return lns.run(deadline), lns.stats
