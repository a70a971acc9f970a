"""Repacking one GPU type so that a chosen job fits.

Why: the guided placement keeps running jobs on their own GPUs first (the aggregated model
counts them as not migrated), and a kept job spread over two nodes can leave no node with room
for a job the choice needs whole: on the multi-tenant scenario an 8-GPU job found no node among
four 8-GPU nodes that its type's chosen jobs (8, 8, 8 and four of 2) filled exactly, and the
search that placed it instead gave up a tenant's DRF share. Here the type's movable jobs are
placed again with the job, best fit, and the result is kept only where every one of them runs
and the search's score gains. Placing all of them largest first (best-fit decreasing) moves
jobs that were in nobody's way (each move a restart), so the job is also placed first with
the others kept on their GPUs where still free, and the packing the score values most wins.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from solver.domain import Config, Job
from solver.scoring.plans import Choice
from solver.search.scorer import Scorer
from solver.search.state import SearchState


def repack_type(scorer: Scorer, state: SearchState, job: Job, config: Config) -> bool:
    """Start `job` in `config` by placing its GPU type's movable jobs again; whether it runs.
    Two packings are tried, the job first with the others kept on their GPUs where still free
    (few moves), and all of them largest first; the one the search's score values most is kept,
    if above the score before. Unchanged (and False) when neither places every job or gains."""
    if config.mig_profile or config.kept_only or job.name in state.choices:
        return False
    jobs = scorer.jobs
    moved = {
        name: choice
        for name, choice in state.choices.items()
        if choice[0].gpu_type == config.gpu_type
        and not choice[0].mig_profile
        and not scorer.fixed(jobs[name])
    }
    best = sum(scorer.choice_gain(jobs[name], choice) for name, choice in moved.items())
    chosen = moved
    for name in moved:
        state.release(name)
    for keep in (True, False):
        placed = _pack(state, jobs, job, config, moved, keep)
        if placed is None:
            continue
        gain = sum(scorer.choice_gain(jobs[name], state.choices[name]) for name in placed)
        if gain > best:
            best, chosen = gain, {name: state.choices[name] for name in placed}
        for name in placed:
            state.release(name)
    for name, (c, counts) in chosen.items():
        state.take(name, c, counts)
    return job.name in chosen


def _pack(
    state: SearchState,
    jobs: Mapping[str, Job],
    job: Job,
    config: Config,
    moved: Mapping[str, Choice],
    keep: bool,
) -> list[str] | None:
    """The jobs placed (all of `moved` and `job`), or None with the state as it was. `keep`:
    `job` first, the others on their own GPUs where free, the rest after; else largest first."""
    placed: list[str] = []

    def anew(j: Job, c: Config) -> bool:
        counts = state.fit_anew(c)
        if counts is None or not state.within_budgets(c, counts):
            return False
        state.take(j.name, c, counts)
        placed.append(j.name)
        return True

    rest = [(jobs[name], c) for name, (c, _) in moved.items()]
    if keep:
        if not anew(job, config):
            return None
        rest = []
        for name, (c, counts) in moved.items():
            if state.placer.fits(counts) and state.within_budgets(c, counts):
                state.take(name, c, counts)
                placed.append(name)
            else:
                rest.append((jobs[name], c))
    else:
        rest.append((job, config))
    for j, c in sorted(rest, key=lambda jc: (-jc[1].num_gpus, jc[0].name)):
        if not anew(j, c):
            for name in placed:
                state.release(name)
            return None
    return placed


def repack_unplaced(
    scorer: Scorer,
    state: SearchState,
    order: Sequence[Job],
    choice: Mapping[str, Config],
    stop: Callable[[], bool],
) -> None:
    """``repack_type`` for each job of `order` that the choice runs and the state does not,
    until `stop()`; a type that could not take a job is not tried again for a job as large
    under the same exclusions."""
    failed: dict[tuple[str, frozenset[str]], int] = {}
    for job in order:
        c = choice.get(job.name)
        if c is None or job.name in state.choices:
            continue
        key = (c.gpu_type, job.barred_nodes)
        if failed.get(key, 1 << 30) <= c.num_gpus:
            continue
        if stop():
            return
        if not repack_type(scorer, state, job, c):
            failed[key] = min(failed.get(key, c.num_gpus), c.num_gpus)
