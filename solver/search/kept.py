"""What a greedy pass keeps before it chooses: non-preemptible jobs on their GPUs (only their
clocks chosen), and running jobs a pass cut short did not reach, where they run."""

from __future__ import annotations

from collections.abc import Mapping

from solver.domain import Config, Job
from solver.perfmodel.configs import ConfigSet
from solver.search.scorer import Scorer
from solver.search.state import SearchState


def place_fixed(
    scorer: Scorer, state: SearchState, guide: Mapping[str, Config] | None = None
) -> None:
    """Non-preemptible jobs keep their GPUs; only their clocks are chosen. All start at
    their lowest draw (what they need together at least), then each in turn takes its most
    valuable clock that the power left allows: one job's top clock never pushes another
    over a budget. A `guide` (an aggregated solution) that names a clock of the job's shape
    is tried before the others."""
    chosen: list[tuple[Job, list[int]]] = []
    for job in scorer.problem.jobs:
        if not scorer.fixed(job):
            continue
        assert job.current is not None
        configs = scorer.configs.by_job[job.name]
        options = [i for i, c in enumerate(configs) if c.shape == job.current.shape]
        if not options:
            continue
        lowest = min((configs[i] for i in options), key=lambda c: c.watts)
        state.take(job.name, lowest, job.current.gpus_per_node())
        ranked = sorted(options, key=lambda i: -scorer.value[job.name, i])
        wanted = guide.get(job.name) if guide else None
        if wanted is not None and wanted in (configs[i] for i in options):
            ranked.remove(scorer.position(job.name, wanted))
            ranked.insert(0, scorer.position(job.name, wanted))
        chosen.append((job, ranked))
    for job, options in chosen:
        configs = scorer.configs.by_job[job.name]
        current, counts = state.choices[job.name]
        for i in options:
            if configs[i] == current:
                break
            state.release(job.name)
            if state.within_budgets(configs[i], counts):
                state.take(job.name, configs[i], counts)
                break
            state.take(job.name, current, counts)


def keep_running(configs: ConfigSet, state: SearchState, running: list[Job]) -> None:
    """Running jobs the pass did not reach stay where they run, at their own clock (or
    the highest of their shape the power allows), if their GPUs are still free: stopping
    them would cost their migration."""
    for job in running:
        if job.name in state.choices:
            continue
        assert job.current is not None
        counts = job.current.gpus_per_node()
        if not state.placer.fits(counts):
            continue
        own = job.current.sm_clock_mhz
        options = sorted(
            (c for c in configs.by_job[job.name] if c.shape == job.current.shape),
            key=lambda c: (c.sm_clock_mhz != own, -c.watts),
        )
        for c in options:
            if state.within_budgets(c, counts):
                state.take(job.name, c, counts)
                break
