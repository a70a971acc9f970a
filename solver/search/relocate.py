"""Rack-power relocation: start a job where only rack budgets block it, by moving running jobs
out of the racks short of power to racks with watts to spare.

Under rack budgets a choice that fits the cluster in aggregate (the aggregated model's) can
fail to place: the racks with free GPUs of the job's type (or the rack a running job holds)
have no watts left, while other racks have watts and no free GPUs of that type. Moving a
running job from a short rack keeps its configuration and value (locality and migration
aside, which the gain counts), so it frees the rack's watts at little cost.
"""

from __future__ import annotations

from collections.abc import Mapping

from solver.domain import Job
from solver.search.scorer import Scorer
from solver.search.state import POWER_SLACK, Journal, SearchState, keep_counts

MOVERS_PER_RACK = 8
"""Running jobs a relocation tries to move out of one short rack (most watts there first)."""


def start_with_rack_room(scorer: Scorer, state: SearchState, job: Job, index: int) -> float:
    """Start queued `job` in its configuration `index`: where it runs now, else on a new
    best-fit placement, moving running jobs out of racks short of power for it where needed.
    The placement that gains most (the job's gain less what the moves cost) is kept; with no
    gain the state is left as it was. The gain (0: not started)."""
    config = scorer.configs.by_job[job.name][index]
    if job.name in state.choices or (state.quotas.active and not state.quotas.fits(job, config)):
        return 0.0
    options: list[dict[str, int]] = []
    kept = keep_counts(job, config, state.placer)
    if kept is not None:
        options.append(kept)
    if not config.kept_only:
        for placed in (
            state.fit_anew(config),
            state.placer.place(
                config.gpu_type,
                config.num_gpus,
                config.tensor_parallel,
                barred=state.barred(job.name),
            ),
        ):
            if placed is not None and placed not in options:
                options.append(placed)
    best: tuple[float, int] | None = None
    for k, counts in enumerate(options):
        journal = Journal(state)
        net = _start_at(scorer, journal, job, index, counts)
        journal.undo()
        if net > 0.0 and (best is None or net > best[0]):
            best = (net, k)
    if best is None:
        return 0.0
    journal = Journal(state)
    net = _start_at(scorer, journal, job, index, options[best[1]])
    if net <= 0.0:  # cannot happen: the same steps on the same state
        journal.undo()
        return 0.0
    return net


def _start_at(
    scorer: Scorer, journal: Journal, job: Job, index: int, counts: Mapping[str, int]
) -> float:
    """Start the job on `counts` through `journal`, emptying its short racks enough; the
    objective gained, or -inf (changes left in `journal` for the caller to undo)."""
    state = journal.state
    config = scorer.configs.by_job[job.name][index]
    over, racks = state.deficits(config, counts)
    if over > POWER_SLACK:
        return float("-inf")
    journal.take(job.name, config, counts)
    net = scorer.gain(job, index, counts, scorer.kept(job, config, counts))
    for rack, deficit in racks.items():
        if deficit > POWER_SLACK:
            net += _empty_enough(scorer, journal, rack, exclude=job.name)
            if state.rack_over(rack) > POWER_SLACK:
                return float("-inf")
    return net


def _empty_enough(scorer: Scorer, journal: Journal, rack: str, exclude: str) -> float:
    """Move running jobs out of `rack` (those drawing most there first) until its budget
    holds; the objective change of the moves (<= 0: locality and migration)."""
    state = journal.state
    movers = []
    for name, (config, counts) in state.choices.items():
        if name == exclude or scorer.fixed(scorer.jobs[name]):
            continue
        watts = state.rack_delta(config, counts).get(rack, 0.0)
        if watts > 0.0:
            movers.append((-watts, name))
    movers.sort()
    change = 0.0
    for _, name in movers[:MOVERS_PER_RACK]:
        if state.rack_over(rack) <= POWER_SLACK:
            break
        mover = scorer.jobs[name]
        before = state.choices[name]
        old = scorer.choice_gain(mover, before)
        journal.release(name)
        moved = state.fit_anew(before[0])  # racks short of power are avoided
        if (
            moved is None
            or rack in state.rack_delta(before[0], moved)
            or not state.within_budgets(before[0], moved)
        ):
            journal.take(name, *before)
            continue
        journal.take(name, before[0], moved)
        change += scorer.choice_gain(mover, state.choices[name]) - old
    return change
