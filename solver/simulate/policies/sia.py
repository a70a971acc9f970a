"""Sia: GPU type and count chosen per job by an ILP over normalised goodput, fixed shapes.

Sia (Jayaram Subramanya et al., SOSP'23), as implemented in its artifact (siasosp23/artifacts,
sia-simulator/sia.py ``SiaPolicy.optimize_mip`` and ``__solve_mip_rescaled``; defaults in
sia-simulator/simulator_config.py and run_experiment.sh):

- configurations per job: (GPU type, GPU count), counts 1, 2, 4, ... up to a node, then whole
  nodes (``CONFIGS_8GPU``/``CONFIGS_4GPU``), within the job's replica limits and multiples of
  its scale unit (GPUs per replica);
- goodput of each configuration, normalised per job: divided by the job's smallest goodput over
  all its configurations and times that configuration's scale unit (so the smallest is one
  replica's worth);
- restart factor (Pollux's, ``sia_use_pollux_realloc_factor = True``):
  r = max(age - restarts x penalty, 0) / (age + penalty), 1 while age < penalty, with
  penalty 30 s (``restart_penalty=30``; the per-model table gives 30 s to unknown models); a
  running job's goodput is multiplied by r in every configuration but its current one;
- utility A = (r x normalised goodput)^p, rounded to 2 decimals and capped at 3000
  (``sia_goodput_clip_val``), p = -0.5;
- ILP over binary X[j, c]: one configuration per job at most, GPUs per type within the
  type's GPUs; objective A.X + lambda_n x (jobs left without a configuration), lambda_n = 1.1,
  minimised for p < 0 (maximised for p > 0); lambda_a (0.01) is read but unused by the solve.

Adapted: goodput = DSFRO's predicted samples/s at the top clock (jobs here have a fixed batch
size, so goodput is throughput, as Sia treats its rigid jobs); the shape is fixed per job and
type: the tensor x pipeline degree of the user's configuration at its requested count (data
parallel unless the model needs a model-parallel split to fit), scaled by data parallelism; the
ILP is solved with HiGHS (the artifact uses CBC/GLPK through cvxpy). Restarts are counted by the
policy: each new allocation of a job that already ran. The hard constraint keeping jobs that are
checkpointing is not modelled (restart time is the engine's); non-preemptible running jobs keep
their GPUs and are left out of the ILP. Placement is DSFRO's best-fit, jobs staying on their
GPUs first; the power budget is one more resource at admission (Sia has none): jobs are
admitted by decreasing ILP gain, each trying smaller configurations of its chosen type when the
chosen one does not fit.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from solver.domain import Allocation, Config, Job, Shape
from solver.simulate.core import Decision, RoundInput
from solver.simulate.policies.common import (
    Candidate,
    Planner,
    RoundView,
    admit_in_order,
    pin_non_preemptible,
    rigid_count,
    usable,
    user_config,
)
from solver.simulate.policies.lp import solve_max

P_FAIRNESS = -0.5
"""Sia's default p (simulator_config.sia_default_p_val; run_experiment.sh --policy_p_val=-0.5)."""
LAMBDA_NO_ALLOC = 1.1
"""Penalty per job left without an allocation (sia_default_lambda_n; --mip_lambda_n=1.1)."""
RESTART_PENALTY_S = 30.0
"""Seconds lost per restart (SiaPolicy(restart_penalty=30) in multi_simulator.py)."""
MIP_GAP = 1e-4
"""Relative optimality gap of the ILP (simulator_config.sia_solver_thresh)."""
UTILITY_CAP = 3000.0
"""Cap on the powered-up goodput (simulator_config.sia_goodput_clip_val)."""


def sia_counts(gpus_per_node: int, limit: int) -> list[int]:
    """Sia's GPU counts: powers of two below a node, then whole nodes, up to `limit`."""
    out = []
    p = 1
    while p < gpus_per_node and p <= limit:
        out.append(p)
        p *= 2
    out.extend(range(gpus_per_node, limit + 1, gpus_per_node))
    return out


def restart_factor(age_s: float, restarts: int, penalty_s: float) -> float:
    """Pollux's re-allocation factor: the share of its age a job kept after one more restart."""
    if age_s < penalty_s:
        return 1.0
    return max(age_s - restarts * penalty_s, 0.0) / (age_s + penalty_s)


def utility(goodput: float, p: float) -> float:
    """(normalised goodput)^p, rounded to 2 decimals and capped, as Sia powers it up."""
    return min(round(goodput**p, 2), UTILITY_CAP) if goodput > 0 else UTILITY_CAP


class SiaPolicy:
    """Sia's goodput ILP over (GPU type, count) per job, fixed parallelism shape, top clock."""

    name = "sia"

    def __init__(
        self,
        p_fairness: float = P_FAIRNESS,
        lambda_no_alloc: float = LAMBDA_NO_ALLOC,
        restart_penalty_s: float = RESTART_PENALTY_S,
    ) -> None:
        """p_fairness: Sia's p; lambda_no_alloc: its lambda_n, the cost of leaving a job out
        (its sign opposite to p's, as simulator_config.py requires); restart_penalty_s: the
        seconds one restart costs in the restart factor."""
        if p_fairness == 0:
            raise ValueError("p_fairness must not be 0")
        self.p = p_fairness
        self.lambda_no_alloc = lambda_no_alloc
        self.restart_penalty_s = restart_penalty_s
        self._started: set[str] = set()
        self.restarts: dict[str, int] = {}

    def configs(self, view: RoundView, job: Job, capacity: dict[str, int]) -> list[Config]:
        """The job's (type, count) configurations in its fixed shape, at the top clock."""
        out: list[Config] = []
        want = rigid_count(view, job)
        for t in view.types_for(job):
            limit = min(job.max_gpus, capacity.get(t, 0))
            counts = [
                n for n in sia_counts(view.facts[t].gpus_per_node, limit) if n >= job.min_gpus
            ]
            if not counts and job.min_gpus <= want <= limit:
                counts = [want]
            unit = next(
                (c.shape for n in [want, *counts] if (c := user_config(view, job, t, n))), None
            )
            if unit is None:
                continue
            mp = unit.tensor_parallel * unit.pipeline_parallel
            for n in counts:
                if n % mp:
                    continue
                shape = Shape(t, n // mp, unit.tensor_parallel, unit.pipeline_parallel)
                c = view.config(job, shape, view.top_clock(t))
                if c is not None and usable(job, c):
                    out.append(c)
        return out

    def gains(self, view: RoundView, job: Job, configs: Sequence[Config]) -> list[float]:
        """Per configuration, what choosing it adds to Sia's objective (maximised)."""
        smallest = min(configs, key=lambda c: c.samples_per_second)
        unit = smallest.shape.tensor_parallel * smallest.shape.pipeline_parallel
        cur = job.current
        r = 1.0
        if cur is not None:
            r = restart_factor(
                view.age_s(job), self.restarts.get(job.name, 0), self.restart_penalty_s
            )
        sign = -1.0 if self.p < 0 else 1.0
        out = []
        for c in configs:
            g = c.samples_per_second / smallest.samples_per_second * unit
            same = cur is not None and (cur.shape.gpu_type, cur.shape.num_gpus) == (
                c.gpu_type,
                c.num_gpus,
            )
            if cur is not None and not same:
                g *= r
            out.append(sign * (utility(g, self.p) - self.lambda_no_alloc))
        return out

    def choose(self, view: RoundView, jobs: Sequence[Job], pinned: Planner) -> list[Candidate]:
        """The ILP's configuration per job, as candidates by decreasing gain, each followed by
        the job's smaller configurations of the same type. Should HiGHS find no solution in
        the round's time, each job offers its configurations of positive gain, best first."""
        capacity = {
            t: view.available_gpus(t)
            - sum(c.num_gpus for c in pinned.configs.values() if c.gpu_type == t)
            for t in view.facts
        }
        columns: list[tuple[Job, Config, float]] = []
        by_job: dict[str, list[int]] = {}
        by_type: dict[str, list[int]] = {t: [] for t in capacity}
        for job in jobs:
            configs = self.configs(view, job, capacity)
            for c, g in zip(
                configs, self.gains(view, job, configs) if configs else [], strict=True
            ):
                by_job.setdefault(job.name, []).append(len(columns))
                by_type[c.gpu_type].append(len(columns))
                columns.append((job, c, g))
        rows: list[tuple[Sequence[int], Sequence[float], float]] = [
            (cols, [1.0] * len(cols), 1.0) for cols in by_job.values()
        ]
        rows.extend(
            (cols, [float(columns[i][1].num_gpus) for i in cols], float(capacity[t]))
            for t, cols in by_type.items()
        )
        gains = [g for _, _, g in columns]
        x = solve_max(
            gains, rows, integer=True, relative_gap=MIP_GAP, time_limit_s=view.time_budget_s
        )
        if x is None:
            x = [1.0 if g > 0 else 0.0 for g in gains]
        out = []
        for i in sorted((i for i, v in enumerate(x) if v > 0.5), key=lambda i: -gains[i]):
            job, c, _ = columns[i]
            others = [
                k
                for k in by_job[job.name]
                if k != i
                and (
                    x[k] > 0.5
                    or (
                        columns[k][1].gpu_type == c.gpu_type and columns[k][1].num_gpus < c.num_gpus
                    )
                )
            ]
            others.sort(key=lambda k: -gains[k])
            out.append(Candidate(job, (c, *(columns[k][1] for k in others))))
        return out

    def decide(self, round_input: RoundInput) -> Decision:
        started = time.perf_counter()
        view = RoundView.of(round_input)
        names = {j.name for j in view.problem.jobs}
        self._started = {n for n in self._started if n in names} | {
            j.name for j in view.problem.jobs if j.current is not None
        }
        self.restarts = {n: k for n, k in self.restarts.items() if n in names}
        pinned = Planner(view)
        pin_non_preemptible(pinned)
        jobs = [j for j in view.problem.jobs if j.name not in pinned]
        planner = admit_in_order(view, self.choose(view, jobs, pinned))
        self._count_restarts(view, planner.allocations)
        return planner.decision(started, f"{len(planner.allocations)} running")

    def _count_restarts(self, view: RoundView, allocations: dict[str, Allocation]) -> None:
        for job in view.problem.jobs:
            a = allocations.get(job.name)
            if a is None or (job.current is not None and _same_gpus(a, job.current)):
                continue
            if job.name in self._started:
                self.restarts[job.name] = self.restarts.get(job.name, 0) + 1
            self._started.add(job.name)

    def close(self) -> None:
        """Nothing to release."""


def _same_gpus(a: Allocation, b: Allocation) -> bool:
    """Same shape on the same GPUs (a clock change alone restarts nothing)."""
    gpus = [sorted((s.node, i) for s in x.placement for i in s.gpu_indices) for x in (a, b)]
    return a.shape == b.shape and gpus[0] == gpus[1]
