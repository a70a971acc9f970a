"""A checked plan applied to the jobs: stops, starts, moves, restart and reconfiguration delays,
and each running job's true rate for the round, held to its power limit (``solver.simulate.engine``
calls it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from solver.domain import Allocation
from solver.perfmodel.slices import slice_share
from solver.simulate.core import Decision
from solver.simulate.guard import RoundGuard
from solver.simulate.mig_state import Gpu, MigState, Place
from solver.simulate.rounds import CheckedPlan, LiveJob
from solver.simulate.settings import EngineSettings
from solver.simulate.tenants import EqualShare
from solver.simulate.truth import Rate, Truth


@dataclass(frozen=True)
class Applied:
    starts: int
    migrations: int
    preemptions: int
    placed: tuple[LiveJob, ...] = ()
    """The jobs that start, move or reshape this round."""


@dataclass(frozen=True)
class Context:
    """What applying a plan reads besides the jobs."""

    truth: Truth
    settings: EngineSettings
    share: EqualShare
    mig: MigState
    guard: RoundGuard | None = None
    """The power limits of the round (``solver.simulate.guard``); None: none."""


def stop(j: LiveJob) -> None:
    """The job stops (preempted, or its node failed); its next start pays the restart delay."""
    assert j.allocation is not None
    j.stopped_nodes = nodes(j.allocation)
    j.allocation = None
    j.preemptions += 1
    j.pending_restart = True
    idle(j)


def idle(j: LiveJob) -> None:
    j.rate = Rate(0.0, 0.0)
    j.predicted_watts = 0.0
    j.normalized_rate = 0.0
    j.borrowed = False
    j.gpu_share = 1.0


def apply_plan(
    ctx: Context,
    t: float,
    active: Sequence[LiveJob],
    decision: Decision,
    checked: CheckedPlan,
    available_types: Mapping[str, int],
    changed: Mapping[Gpu, tuple[Place, ...]],
) -> Applied:
    """Apply the decision to every active job (the layout changes already applied: `changed`
    holds each changed GPU's layout before)."""
    starts = migrations = preemptions = 0
    placed: list[LiveJob] = []
    restart = ctx.settings.restart
    for j in active:
        new = decision.allocations.get(j.name)
        old = j.allocation
        if new is None:
            if old is not None:
                stop(j)
                preemptions += 1
            idle(j)
            continue
        if old is None:
            placed.append(j)
            starts += 1
            if j.first_start is None:
                j.first_start = t
            if j.pending_restart:
                j.restart_until = t + restart.seconds(
                    j.sim.parameters, j.stopped_nodes, nodes(new), j.sim.trace.evaluation
                )
                j.pending_restart = False
                j.restarts += 1
        elif old.shape != new.shape or gpus(old) != gpus(new) or _place(old) != _place(new):
            placed.append(j)
            migrations += 1
            j.migrations += 1
            j.restarts += 1
            j.restart_until = t + restart.seconds(
                j.sim.parameters, nodes(old), nodes(new), j.sim.trace.evaluation
            )
        if changed and ctx.mig.waits(new, changed):
            j.restart_until = max(j.restart_until, t + ctx.settings.reconfiguration_s)
        j.allocation = new
        j.rounds_run += 1
        _rate(ctx, j, new)
        j.predicted_watts = checked.watts[j.name]
        j.borrowed = j.name in checked.borrowed
        truth = ctx.truth
        model = truth.predicted(j.name, new.shape, new.sm_clock_mhz) if new.mig is None else None
        equal = ctx.share.rate(j.name, available_types, len(active))
        j.normalized_rate = 0.0
        if model is not None and equal > 0:
            j.normalized_rate = model.samples_per_second / equal
        if model is not None:
            j.observed_speed += j.rate.samples_per_second / model.samples_per_second
            j.observed_power += j.rate.watts / model.watts
            j.observations += 1
    return Applied(starts, migrations, preemptions, tuple(placed))


def _rate(ctx: Context, j: LiveJob, a: Allocation) -> None:
    """The job's true rate this round: whole GPUs or its instance, times the round's noise."""
    truth = ctx.truth
    if a.mig is None:
        base = truth.base_rate(j.name, a.shape, a.sm_clock_mhz)
        j.gpu_share = 1.0
    else:
        gpu_type = a.shape.gpu_type
        base = truth.slice_rate(j.name, gpu_type, a.mig.profile, a.sm_clock_mhz)
        j.gpu_share = slice_share(truth.problem.cluster.mig[gpu_type], a.mig.profile)
    speed, power = truth.round_noise()
    rate = Rate(base.samples_per_second * speed, base.watts * power)
    j.rate = rate if ctx.guard is None else ctx.guard.hold(j.name, rate, j.gpus())


def _place(a: Allocation) -> tuple[str, int] | None:
    """The allocation's MIG instance (profile, start), None on whole GPUs."""
    return None if a.mig is None else a.mig.place


def nodes(a: Allocation) -> int:
    """Nodes an allocation spans (each saves and loads its checkpoint shard)."""
    return len({s.node for s in a.placement if s.gpu_indices})


def gpus(a: Allocation) -> list[tuple[str, int]]:
    return sorted((s.node, i) for s in a.placement for i in s.gpu_indices)
