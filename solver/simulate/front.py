"""The JCT-energy front (issue 19; docs/simulation.md, "The JCT-energy front"): DSFRO run at
several energy weights beside the other policies, every run of a scenario and seed at one equal
horizon, and the figure ``<prefix>-front.png`` of mean JCT against energy, DSFRO's settings
joined by a line and every other policy a point, so one glance shows who dominates.

The points are means over seeds of each policy's mean JCT and its cluster energy at the equal
horizon (``metrics.equal_horizon``); ``front_data`` computes them, ``dominated`` says which
policies some DSFRO setting beats on both at once (tests check both without images).
"""

from __future__ import annotations

import argparse
import math
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from solver.domain import ObjectiveWeights
from solver.extras import new_figure
from solver.simulate.metrics import Summary

if TYPE_CHECKING:
    from matplotlib.figure import Figure

SWEPT = "dsfro"
"""The policy run once per energy weight (its other variants stay points)."""


@dataclass(frozen=True)
class FrontPoint:
    """One policy (or one DSFRO setting): means over its seeds."""

    label: str
    jct_h: float
    energy_kwh: float
    seeds: int
    energy_weight: float | None = None
    """The DSFRO setting's energy weight; None for the other policies."""


def energy_weight_arg(text: str) -> float:
    """An energy weight on the command line: a finite number >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"an energy weight must be finite and >= 0, got {text}")
    return value


def variant_label(policy: str, weight: float) -> str:
    """The name of DSFRO's run at an energy weight (its files and its rows)."""
    return f"{policy}-e{weight:g}"


def energy_weight_of(overrides: Mapping[str, object]) -> float:
    """The energy weight DSFRO's requests carry under these engine overrides."""
    weights = overrides.get("weights")
    if isinstance(weights, Mapping) and "energy" in weights:
        return float(weights["energy"])
    return ObjectiveWeights().energy


def front_data(
    summaries: Sequence[Summary], weights: Mapping[str, float]
) -> dict[str, list[FrontPoint]]:
    """Per scenario, a point per policy label (means over seeds; runs with no finished job or
    no energy at the horizon left out); ``weights`` maps DSFRO's labels to their energy
    weights. Summaries must be at their equal horizon."""
    runs: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    for s in summaries:
        if s.jct_mean_s is not None and s.energy_horizon_kwh is not None:
            runs[s.scenario, s.policy].append((s.jct_mean_s / 3600, s.energy_horizon_kwh))
    out: dict[str, list[FrontPoint]] = defaultdict(list)
    for (scenario, label), values in runs.items():
        out[scenario].append(
            FrontPoint(
                label,
                statistics.fmean(v[0] for v in values),
                statistics.fmean(v[1] for v in values),
                len(values),
                weights.get(label),
            )
        )
    return dict(out)


def dominated(points: Sequence[FrontPoint]) -> dict[str, list[str]]:
    """Per other policy, the DSFRO settings with both a lower mean JCT and a lower energy."""
    settings = [p for p in points if p.energy_weight is not None]
    return {
        p.label: [s.label for s in settings if s.jct_h < p.jct_h and s.energy_kwh < p.energy_kwh]
        for p in points
        if p.energy_weight is None
    }


def plot_front(points_by_scenario: Mapping[str, Sequence[FrontPoint]]) -> Figure:
    """Mean JCT against energy at the equal horizon, a panel per scenario: DSFRO's settings
    joined in order of energy weight, labelled by it; the other policies as labelled points."""
    fig = new_figure(6.5 * len(points_by_scenario), 5)
    axes = fig.subplots(1, len(points_by_scenario), squeeze=False)[0]
    for ax, (scenario, points) in zip(axes, sorted(points_by_scenario.items()), strict=True):
        settings = sorted(
            (p for p in points if p.energy_weight is not None),
            key=lambda p: p.energy_weight or 0.0,
        )
        if settings:
            ax.plot(
                [p.jct_h for p in settings],
                [p.energy_kwh for p in settings],
                "o-",
                color="C0",
                label="DSFRO, energy weight swept",
            )
            for p in settings:
                ax.annotate(f"{p.energy_weight:g}", (p.jct_h, p.energy_kwh), fontsize="small",
                            xytext=(4, 4), textcoords="offset points")  # fmt: skip
        others = [p for p in points if p.energy_weight is None]
        for i, p in enumerate(sorted(others, key=lambda p: p.label)):
            ax.scatter([p.jct_h], [p.energy_kwh], color=f"C{(i + 1) % 10}", marker="s",
                       label=p.label)  # fmt: skip
        ax.set_title(scenario)
        ax.set_xlabel("mean JCT (h)")
        ax.set_ylabel("cluster energy at an equal horizon (kWh)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle("JCT against energy (means over seeds; lower left dominates)")
    return fig
