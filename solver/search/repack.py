"""Repacking one GPU type so that a chosen job fits.

Why: the guided placement keeps running jobs on their own GPUs first (the aggregated model
counts them as not migrated), and a kept job spread over two nodes can leave no node with room
for a job the choice needs whole: on the multi-tenant scenario an 8-GPU job found no node among
four 8-GPU nodes that its type's chosen jobs (8, 8, 8 and four of 2) filled exactly, and the
search that placed it instead gave up a tenant's DRF share. Here the type's movable jobs are
placed again with the job, largest first, best fit (best-fit decreasing), and the result is
kept only where every one of them runs and the search's score gains.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from solver.domain import Config, Job
from solver.search.scorer import Scorer
from solver.search.state import SearchState


def repack_type(scorer: Scorer, state: SearchState, job: Job, config: Config) -> bool:
    """Start `job` in `config` by placing its GPU type's movable jobs again; whether it runs.
    Unchanged (and False) when they do not all fit, or the moves cost more than it gains."""
    if config.mig_profile or config.kept_only or job.name in state.choices:
        return False
    jobs = {j.name: j for j in scorer.problem.jobs}
    moved = {
        name: choice
        for name, choice in state.choices.items()
        if choice[0].gpu_type == config.gpu_type
        and not choice[0].mig_profile
        and not scorer.fixed(jobs[name])
    }
    before = sum(scorer.choice_gain(jobs[name], choice) for name, choice in moved.items())
    for name in moved:
        state.release(name)
    order = sorted(
        [(job, config), *((jobs[name], c) for name, (c, _) in moved.items())],
        key=lambda jc: (-jc[1].num_gpus, jc[0].name),
    )
    after = 0.0
    placed: list[str] = []
    for j, c in order:
        counts = state.fit_anew(c)
        if counts is None or not state.within_budgets(c, counts):
            break
        state.take(j.name, c, counts)
        placed.append(j.name)
        after += scorer.choice_gain(j, state.choices[j.name])
    else:
        if after > before:
            return True
    for name in placed:
        state.release(name)
    for name, (c, kept) in moved.items():
        state.take(name, c, kept)
    return False


def repack_unplaced(
    scorer: Scorer,
    state: SearchState,
    order: Sequence[Job],
    choice: Mapping[str, Config],
    stop: Callable[[], bool],
) -> None:
    """``repack_type`` for each job of `order` that the choice runs and the state does not,
    until `stop()`; a type that could not take a job is not tried again for a job as large."""
    failed: dict[str, int] = {}
    for job in order:
        c = choice.get(job.name)
        if c is None or job.name in state.choices or failed.get(c.gpu_type, 1 << 30) <= c.num_gpus:
            continue
        if stop():
            return
        if not repack_type(scorer, state, job, c):
            failed[c.gpu_type] = min(failed.get(c.gpu_type, c.num_gpus), c.num_gpus)
