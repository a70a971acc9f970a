"""The fairness modes' value F, written apart from ``solver.scoring.fairness`` from the formulas
of docs/objective.md ("Fairness"), for the tests that check the product against it."""

from __future__ import annotations

import math
from collections.abc import Mapping

from solver.domain import Config, FairnessMode, FairnessScope, Problem


def reference_value(
    problem: Problem, best: Mapping[str, float], run: Mapping[str, Config]
) -> float:
    """F of a plan running `run` (job -> configuration), by the documented formulas."""
    fair = problem.fairness
    horizon = fair.horizon_seconds
    ftf = fair.mode is FairnessMode.FINISH_TIME
    demand = [
        j for j in problem.jobs if best.get(j.name, 0) > 0 and (not ftf or j.remaining_samples > 0)
    ]
    if not demand:
        return 0.0
    gpus = sum(n.available_gpus for n in problem.cluster.nodes)
    share = fair.equal_share_gpus or gpus / len(
        [j for j in problem.jobs if best.get(j.name, 0) > 0]
    )
    equal = {j.name: best[j.name] * min(1.0, share / j.min_gpus) for j in demand}

    def key(job_name: str) -> str:
        j = next(x for x in demand if x.name == job_name)
        return j.name if fair.scope is FairnessScope.JOB else (j.tenant or "default")

    entities: dict[str, list[str]] = {}
    for j in demand:
        entities.setdefault(key(j.name), []).append(j.name)
    jobs = {j.name: j for j in demand}
    declared = {q.name: q for q in problem.cluster.queues}

    def weight(e: str) -> float:
        if fair.scope is FairnessScope.JOB:
            return jobs[e].weight
        return declared[e].weight if e in declared else 1.0

    def attained(e: str) -> tuple[float, float]:
        if fair.scope is FairnessScope.JOB:
            return jobs[e].attained.gpu_seconds, jobs[e].attained.normalized_seconds
        if e in declared:
            return declared[e].attained.gpu_seconds, declared[e].attained.normalized_seconds
        members = entities[e]
        return (
            sum(jobs[m].attained.gpu_seconds for m in members),
            sum(jobs[m].attained.normalized_seconds for m in members),
        )

    def rate(m: str) -> float:
        return run[m].samples_per_second / equal[m] if m in run else 0.0

    per_type = {
        t: sum(n.available_gpus for n in problem.cluster.nodes if n.gpu_type == t)
        for t in problem.cluster.gpu_types
    }
    budget = problem.cluster.power_budget_watts

    def dominant(members: list[str]) -> float:
        """The largest share of one resource (a GPU type, the budget's watts) they take."""
        taken: dict[str, float] = {}
        for m in members:
            if m in run:
                c = run[m]
                taken[c.gpu_type] = taken.get(c.gpu_type, 0.0) + c.num_gpus / per_type[c.gpu_type]
                if budget:
                    taken["watts"] = taken.get("watts", 0.0) + c.watts / budget
        return max(taken.values(), default=0.0)

    def rho(m: str) -> float:
        j = jobs[m]
        ideal = j.attained.normalized_seconds + j.remaining_samples / equal[m]
        if m in run:
            return (j.age_seconds + j.remaining_samples / run[m].samples_per_second) / ideal
        return (j.age_seconds + horizon + j.remaining_samples / equal[m]) / ideal

    total_weight = sum(weight(e) for e in entities)
    asks = {e: min(1.0, sum(jobs[m].max_gpus for m in ms) / gpus) for e, ms in entities.items()}
    entitled = _water_fill(asks, {e: weight(e) for e in entities})
    values = []
    for e, members in entities.items():
        _, norm_s = attained(e)
        served = (norm_s + horizon * sum(rate(m) for m in members)) / horizon
        if fair.mode is FairnessMode.MAX_MIN:
            values.append(served / weight(e))
        elif fair.mode is FairnessMode.PROPORTIONAL:
            values.append(weight(e) * math.log(1 + served))
        elif fair.mode is FairnessMode.DRF:
            values.append(min(1.0, dominant(members) / entitled[e]))
        else:
            mean_rho = sum(rho(m) for m in members) / len(members)
            values.append(-mean_rho * weight(e) / (total_weight / len(entities)))
    if fair.mode is FairnessMode.PROPORTIONAL:
        return sum(values)
    return min(values) + fair.mean_weight * sum(values) / len(values)


def _water_fill(asks: Mapping[str, float], weights: Mapping[str, float]) -> dict[str, float]:
    """Weighted max-min shares of a capacity of 1: each gets min(ask, level x weight), the
    level found by bisection so that the shares use min(1, total ask)."""
    target = min(1.0, sum(asks.values()))
    low, high = 0.0, 1.0 / min(weights.values())
    for _ in range(200):
        level = (low + high) / 2
        if sum(min(a, level * weights[e]) for e, a in asks.items()) < target:
            low = level
        else:
            high = level
    return {e: min(a, high * weights[e]) for e, a in asks.items()}
