"""Ruin and recreate (Schrimpf, Schneider, Stamm-Wilbrandt and Dueck, J. Comput. Phys. 159,
2000): stop a few related running jobs, start them and the most valuable queued jobs again in
a shuffled order of value density (each at its best admission, with a clock repair where power
is short), and keep the result only if the objective rose.

Where power binds, which jobs run and at which clocks is a knapsack over watts that a single
move cannot reorder: swapping two large jobs for three smaller ones needs several changes at
once, which is what a ruin gives. A job is ruined with the jobs it competes with most: those
on its GPU type (its GPUs) or, under a cluster budget, any (its watts).

The work is bounded by a count of attempts (a stagnation limit), so the result does not depend
on the machine's speed; the deadline is only a safety stop.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable

from solver.domain import Job
from solver.scoring.plans import Choice
from solver.search.moves import EPSILON, admit, queued_by_value
from solver.search.repair import Ladders
from solver.search.scorer import Scorer
from solver.search.state import Journal, SearchState

MAX_RUINED = 8
"""Running jobs stopped by one ruin at most (at least two)."""
REFILL_FACTOR = 2
"""Queued jobs offered to each recreate: this many per ruined job, the most valuable first."""
ORDER_NOISE = 0.25
"""Spread of the log-normal noise on each job's value density in a recreate's order."""
STALL_ATTEMPTS = 400
"""Attempts in a row that do not beat the best state met, after which the search stops (a
work limit)."""
RECORD_TOLERANCE = 1e-4
"""How far below the best objective met (relative) a kept ruin may leave the state."""


def ruin_and_recreate(
    scorer: Scorer,
    state: SearchState,
    deadline: float,
    seed: int | random.Random,
    stop: Callable[[], bool] | None = None,
    stall_attempts: int = STALL_ATTEMPTS,
    tolerance: float = RECORD_TOLERANCE,
) -> float:
    """Improve `state` in place until `stall_attempts` attempts in a row improve on the best
    state met (or the deadline, or `stop()`); returns the objective gained. A ruin is kept
    while the objective stays within `tolerance` (relative) of the best met (record-to-record
    travel, Dueck 1993): the search crosses plateaus; the best state is the one left. `seed`
    may be a generator already drawn from: a search stopped and resumed on the state it left
    draws on as if it had not stopped."""
    rng = seed if isinstance(seed, random.Random) else random.Random(seed)
    ladders = Ladders(scorer)
    now = best = 0.0
    scale = max(
        abs(sum(scorer.choice_gain(scorer.jobs[n], c) for n, c in state.choices.items())), 1.0
    )
    kept = dict(state.choices)
    stalled = 0
    while stalled < stall_attempts:
        if time.monotonic() >= deadline or (stop is not None and stop()):
            break
        now += _attempt(scorer, state, ladders, rng, floor=best - now - tolerance * scale)
        if now > best + EPSILON:
            best = now
            kept = dict(state.choices)
            stalled = 0
        else:
            stalled += 1
    if now < best - EPSILON:
        _restore(state, kept)
    return best


def _restore(state: SearchState, choices: dict[str, Choice]) -> None:
    for name in list(state.choices):
        if state.choices[name] is not choices.get(name):
            state.release(name)
    for name, choice in choices.items():
        if name not in state.choices:
            state.take(name, *choice)


def _attempt(
    scorer: Scorer, state: SearchState, ladders: Ladders, rng: random.Random, floor: float
) -> float:
    """One ruin and recreate: kept (its objective change returned) if that change is above
    `floor` and not zero, else undone (0)."""
    ruined = _ruin_set(scorer, state, rng)
    if not ruined:
        return 0.0
    queued = queued_by_value(scorer, state)[: REFILL_FACTOR * len(ruined)]
    journal = Journal(state)
    net = 0.0
    for job in ruined:
        net -= scorer.choice_gain(job, state.choices[job.name])
        journal.release(job.name)
    offered = {j.name: j for j in (*ruined, *queued)}
    for job in sorted(offered.values(), key=lambda j: -_density(scorer, j, rng)):
        if job.name not in state.choices:
            net += admit(scorer, journal, job, ladders)
    if net > floor and abs(net) > EPSILON:
        return net
    journal.undo()
    return 0.0


def _ruin_set(scorer: Scorer, state: SearchState, rng: random.Random) -> list[Job]:
    """A running job drawn at random and up to MAX_RUINED - 1 of its competitors: jobs on its
    GPU type, or under a cluster power budget, half the time, any running job."""
    movable = [scorer.jobs[n] for n in state.choices if not scorer.fixed(scorer.jobs[n])]
    if len(movable) < 2:
        return []
    seed_job = rng.choice(movable)
    gpu_type = state.choices[seed_job.name][0].gpu_type
    power = scorer.problem.cluster.power_budget_watts is not None
    if power and rng.random() < 0.5:
        pool = [j for j in movable if j is not seed_job]
    else:
        pool = [
            j
            for j in movable
            if j is not seed_job and state.choices[j.name][0].gpu_type == gpu_type
        ]
    k = rng.randint(1, min(MAX_RUINED - 1, len(pool))) if pool else 0
    return [seed_job, *rng.sample(pool, k)]


def _density(scorer: Scorer, job: Job, rng: random.Random) -> float:
    """The job's best value per GPU, with noise: the recreate's order."""
    configs = scorer.configs.by_job[job.name]
    values = scorer.values(job.name)
    best = max((v / c.num_gpus for v, c in zip(values, configs, strict=True)), default=-math.inf)
    return best * math.exp(rng.gauss(0.0, ORDER_NOISE))
