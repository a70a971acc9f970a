"""Local-search moves on a SearchState, each scored by its exact objective change.

Every move tries one change, keeps it only when the objective rises by more than EPSILON,
and otherwise leaves the state as it found it; it returns the objective gained (0 when it
did not move). Gains come from `Scorer.gain`, so the sum over moves is the plan's change.
"""

from __future__ import annotations

from dataclasses import dataclass

from solver.domain import Job
from solver.scoring.objective import migration_cost
from solver.search.pricing import Prices
from solver.search.repair import Ladder, Ladders, Repair, apply_repair
from solver.search.scorer import Scorer
from solver.search.state import Journal, SearchState

EPSILON = 1e-9
"""Least objective gain a move must bring to be taken."""
SWAP_CANDIDATES = 4
"""Running jobs that a swap tries to stop for one queued job (least gain per GPU first)."""
REFILL_JOBS = 4
"""Queued jobs, most valuable first, that a swap tries to start in what the swap left free."""

FREE = Prices()
"""No resource prices: moves compare exact objective."""


@dataclass(frozen=True)
class Placement:
    """A configuration of a job and where it runs, with what it would gain."""

    gain: float
    """Priced gain (the objective change when the prices are zero), net of the repair."""
    index: int
    counts: dict[str, int]
    repair: Repair | None = None


def best_config(
    scorer: Scorer, state: SearchState, job: Job, prices: Prices = FREE
) -> Placement | None:
    """The job's configuration of most priced gain that fits the free GPUs and power now."""
    best: Placement | None = None
    bonus = migration_cost(job, scorer.problem.weights)
    costs = None if prices.is_zero else scorer.costs(job.name, prices)
    for i, c in enumerate(scorer.configs.by_job[job.name]):
        cost = costs[i] if costs is not None else 0.0
        if best is not None and scorer.value[job.name, i] + bonus - cost <= best.gain:
            continue
        fitted = state.fit(job, c)
        if fitted is None or not state.within_budgets(c, fitted[0]):
            continue
        counts, keep = fitted
        g = scorer.gain(job, i, counts, keep) - cost
        if g > 0 and (best is None or g > best.gain):
            best = Placement(g, i, counts)
    return best


def move_reshape(scorer: Scorer, state: SearchState, job: Job) -> float:
    """Re-insert a running job at its best configuration given the others: another GPU type,
    shape or clock, placed anew (or kept where it runs)."""
    before = state.choices.get(job.name)
    if before is None or scorer.fixed(job):
        return 0.0
    old = scorer.choice_gain(job, before)
    state.release(job.name)
    move = best_config(scorer, state, job)
    if move is not None and move.gain > old + EPSILON:
        state.take(job.name, scorer.configs.by_job[job.name][move.index], move.counts)
        return move.gain - old
    state.take(job.name, *before)
    return 0.0


def move_clock(scorer: Scorer, state: SearchState, job: Job) -> float:
    """Change a running job's clock on the same GPUs: the best-valued clock of its shape that
    the power budgets allow. Non-preemptible jobs may change clock too."""
    before = state.choices.get(job.name)
    if before is None:
        return 0.0
    config, counts = before
    keep = scorer.kept(job, config, counts)
    old = scorer.choice_gain(job, before)
    state.release(job.name)
    best, best_gain = None, old + EPSILON
    for i in scorer.variants(job.name, config):
        c = scorer.configs.by_job[job.name][i]
        g = scorer.gain(job, i, counts, keep)
        if g > best_gain and state.within_budgets(c, counts):
            best, best_gain = c, g
    state.take(job.name, best if best is not None else config, counts)
    return best_gain - old if best is not None else 0.0


def best_admission(
    scorer: Scorer,
    state: SearchState,
    job: Job,
    ladders: Ladders | None = None,
    floor: float = 0.0,
) -> Placement | None:
    """The queued job's best configuration that fits the free GPUs, lowering running jobs'
    clocks (solver.search.repair) where power is short; its gain is net of the repair's loss.
    Only gains above `floor` count."""
    best: Placement | None = None
    bonus = migration_cost(job, scorer.problem.weights)
    ladder: Ladder | None = None
    for i in scorer.ranked(job.name):
        bar = max(floor, best.gain) if best is not None else floor
        if scorer.value[job.name, i] + bonus <= bar:
            break
        c = scorer.configs.by_job[job.name][i]
        over = state.cluster_over(c)
        if over > 0:
            ladder = ladder or (ladders or Ladders(scorer)).of(state)
            if scorer.value[job.name, i] + bonus - ladder.least_loss(over) <= bar:
                continue
        fitted = state.fit(job, c)
        if fitted is None:
            continue
        counts, keep = fitted
        g = scorer.gain(job, i, counts, keep)
        if g <= bar:
            continue
        if state.within_budgets(c, counts):
            best = Placement(g, i, counts)
            continue
        ladder = ladder or (ladders or Ladders(scorer)).of(state)
        repair = ladder.repair(*state.deficits(c, counts))
        if repair is not None and g - repair.loss > bar:
            best = Placement(g - repair.loss, i, counts, repair)
    return best


def move_admit(
    scorer: Scorer, state: SearchState, job: Job, ladders: Ladders | None = None
) -> float:
    """Start a queued job in its best configuration that fits, lowering other jobs' clocks
    when only power blocks it and the job is worth more than the throughput they lose."""
    if job.name in state.choices:
        return 0.0
    return admit(scorer, Journal(state), job, ladders)


def move_swap(
    scorer: Scorer, state: SearchState, job: Job, ladders: Ladders | None = None
) -> float:
    """Stop a running job to start a queued one, then restart the stopped job wherever it fits
    (another type, shape or node) and start what else now fits; kept when all of it together
    raises the objective. Tries SWAP_CANDIDATES running jobs (_swap_candidates); the queued
    jobs restarted after are the REFILL_JOBS most valuable others."""
    if job.name in state.choices or not scorer.ranked(job.name):
        return 0.0
    ladders = ladders or Ladders(scorer)
    others = [q for q in queued_by_value(scorer, state) if q is not job][:REFILL_JOBS]
    best: tuple[float, str] | None = None
    for name in _swap_candidates(scorer, state, job):
        journal = Journal(state)
        bar = best[0] if best is not None else EPSILON
        net = _swap(scorer, journal, job, name, others, ladders, bar)
        journal.undo()
        if net > bar:
            best = (net, name)
    if best is None:
        return 0.0
    journal = Journal(state)
    net = _swap(scorer, journal, job, best[1], others, ladders, EPSILON)
    if net <= EPSILON:  # cannot happen: the same steps on the same state
        journal.undo()
        return 0.0
    return net


def _swap_candidates(scorer: Scorer, state: SearchState, job: Job) -> list[str]:
    """Running preemptible jobs that free GPUs the job can use, then (under a cluster power
    budget) watts of other types; least gain per GPU first (ties: the state's order)."""
    types = {c.gpu_type for c in scorer.configs.by_job[job.name]}
    power = scorer.problem.cluster.power_budget_watts is not None
    ranked = []
    for k, (name, choice) in enumerate(state.choices.items()):
        usable = choice[0].gpu_type in types
        if scorer.fixed(scorer.jobs[name]) or not (usable or power):
            continue
        density = scorer.choice_gain(scorer.jobs[name], choice) / choice[0].num_gpus
        ranked.append((not usable, density, k, name))
    ranked.sort()
    return [r[3] for r in ranked[:SWAP_CANDIDATES]]


def _swap(
    scorer: Scorer,
    journal: Journal,
    job: Job,
    drop: str,
    others: list[Job],
    ladders: Ladders,
    bar: float,
) -> float:
    """Stop `drop`, start `job`, restart `drop` and then `others` where they fit; the
    objective gained, the changes left in `journal`. Stops early (-inf) once even every
    remaining job at its most valuable configuration could not gain more than `bar`."""
    state = journal.state
    stopped = scorer.jobs[drop]
    rest = sum(max(scorer.ceiling(o), 0.0) for o in (stopped, *others))
    net = -scorer.choice_gain(stopped, state.choices[drop])
    if net + scorer.ceiling(job) + rest <= bar:
        return float("-inf")
    journal.release(drop)
    gained = admit(scorer, journal, job, ladders)
    if gained <= 0:
        return float("-inf")
    net += gained
    for other in (stopped, *others):
        if net + rest <= bar:
            return float("-inf")
        rest -= max(scorer.ceiling(other), 0.0)
        if other.name not in state.choices:
            net += admit(scorer, journal, other, ladders)
    return net


def admit(scorer: Scorer, journal: Journal, job: Job, ladders: Ladders | None) -> float:
    """Start the job at its best admission through `journal`; the gain (0: not started)."""
    state = journal.state
    move = best_admission(scorer, state, job, ladders, EPSILON)
    if move is None:
        return 0.0
    c = scorer.configs.by_job[job.name][move.index]
    saved = {name: state.choices[name] for name in move.repair.configs} if move.repair else {}
    if move.repair is not None:
        apply_repair(journal, move.repair)
    if not (state.placer.fits(move.counts) and state.within_budgets(c, move.counts)):
        for name, choice in saved.items():  # the repair fell short by rounding: put back
            journal.release(name)
            journal.take(name, *choice)
        return 0.0
    journal.take(job.name, c, move.counts)
    return move.gain


def queued_by_value(scorer: Scorer, state: SearchState) -> list[Job]:
    """Queued jobs that have configurations, the most valuable first (ties: job order)."""
    ranked = []
    for k, job in enumerate(scorer.problem.jobs):
        if job.name in state.choices or not scorer.ranked(job.name):
            continue
        ranked.append((-scorer.ceiling(job), k, job))
    ranked.sort(key=lambda r: (r[0], r[1]))
    return [r[2] for r in ranked]
