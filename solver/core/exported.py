"""The model ``dsfro export`` writes: the one DSFRO's exact backends solve for the snapshot, so
that another solver's optimum of the file is comparable with DSFRO's answer (docs/backends.md,
"Export and offline solving").

A solve does not hand the request's problem to the model as it is: jobs a grid forecast defers
are left out (and the energy weight scaled), jobs that finish within a finish-time horizon are
kept as they run, suspended nodes' GPUs are unavailable (nodes are woken afterwards, for jobs
left queued), and a MIG snapshot is the joint model of whole GPUs and slices where that model
covers it. The export does the same, in the solver's order, and says what it did. The power
margin is not a model: it is a loop of solves under a tightened budget, so the file holds the
budget as given and the export says so.
"""

from __future__ import annotations

from collections.abc import Sized
from dataclasses import dataclass

from solver.core.carbon import defer_for_carbon
from solver.core.leases import finish_leases
from solver.core.mig import kept_slices, uses_mig, whole_problem
from solver.core.power_states import awake_problem, uses_power_states
from solver.core.settings import SolverSettings
from solver.domain import Problem
from solver.exact import formulation
from solver.exact.mig_model import supports
from solver.exact.mig_plans import build_mig
from solver.perfmodel.configs import build_config_set
from solver.power_states import NodePowerState
from solver.scoring.completion import ranked_for_completion


@dataclass(frozen=True)
class ExportedModel:
    """The formulation to write and what was done to the snapshot to get it, one line each."""

    model: formulation.Formulation
    notes: tuple[str, ...]


def exported_model(problem: Problem, settings: SolverSettings) -> ExportedModel:
    """The model DSFRO's exact backends solve for `problem` under `settings`."""
    notes: list[str] = []
    problem = ranked_for_completion(problem)
    deferral = defer_for_carbon(problem, settings)
    if deferral.held:
        names = ", ".join(sorted(deferral.held))
        notes.append(f"grid forecast: {_count(deferral.held, 'job')} deferred, left out ({names})")
    problem = finish_leases(deferral.problem)
    if uses_power_states(problem):
        asleep = [
            n.name for n in problem.cluster.nodes if n.power.state is NodePowerState.SUSPENDED
        ]
        if asleep:
            notes.append(
                f"power states: the GPUs of {_count(asleep, 'suspended node')} unavailable "
                f"({', '.join(asleep)}); DSFRO wakes nodes after the solve, for jobs it queues"
            )
        problem = awake_problem(problem)
    model: formulation.Formulation
    configs = build_config_set(problem)
    if uses_mig(problem) and not supports(problem):
        notes.append("MIG: the joint model of whole GPUs and slices")
        model = build_mig(problem, configs)
    elif uses_mig(problem):
        # What the whole-GPU paths solve before the slices are packed (core.mig).
        kept, _ = kept_slices(problem, configs)
        rest = whole_problem(problem, kept)
        notes.append(
            f"MIG: the joint model does not cover {supports(problem)}; the file is the "
            f"whole-GPU model ({_count(kept, 'running slice job')} kept as they run, their draw "
            "taken from the budgets), which DSFRO solves before it packs the slices"
        )
        model = formulation.build(rest, configs if rest is problem else build_config_set(rest))
    else:
        model = formulation.build(problem, configs)
    budgets = problem.cluster.power_budget_watts is not None or bool(
        problem.cluster.rack_power_budgets_watts
    )
    if budgets and settings.power_margin_z > 0:
        notes.append(
            f"power margin: not in the file (z = {settings.power_margin_z:g}): DSFRO solves "
            "again under a budget tightened by a plan's margin, so its answer may be below the "
            "file's optimum; [tuning] power_margin_z = 0 in a profile turns the margin off"
        )
    return ExportedModel(model, tuple(notes))


def _count(items: Sized, noun: str) -> str:
    return f"{len(items)} {noun}" + ("" if len(items) == 1 else "s")


__all__ = ["ExportedModel", "exported_model"]
