"""The trade-off figure: normalised throughput over power, the Pareto front marked and labelled
with its weights."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from solver.extras import new_figure
from solver.offline.sweep.front import same_place
from solver.offline.sweep.run import SweepOutcome

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def plot_sweep(outcome: SweepOutcome) -> Figure:
    """Normalised throughput over power, every plan a point, the Pareto front marked."""
    fig = new_figure(7.5, 5.2)  # matplotlib: the ``plot`` extra
    ax = fig.subplots()
    points = outcome.points
    on_front = set(outcome.front)
    front_points = [points[i] for i in outcome.front]
    others = [
        p
        for i, p in enumerate(points)
        if p.placed and i not in on_front and not any(same_place(p, q) for q in front_points)
    ]
    if others:
        ax.scatter(
            [p.power_w / 1000 for p in others],
            [p.throughput for p in others],
            color="0.6",
            label="dominated plan",
            zorder=2,
        )
    front = [points[i] for i in outcome.front]
    if front:
        ax.plot(
            [p.power_w / 1000 for p in front],
            [p.throughput for p in front],
            color="C3",
            marker="o",
            linewidth=1.5,
            label="Pareto front",
            zorder=3,
        )
        labels = []
        for p in front:
            same = [q for q in points if q.placed and same_place(p, q)]
            text = "; ".join(q.label() for q in same)
            if len(text) > 40:
                text = f"{same[0].label()} (+{len(same) - 1})"
            labels.append((p.power_w / 1000, p.throughput, text))
        _annotate(ax, labels)
    ax.set_xlabel("power drawn by running jobs (kW)")
    ax.set_ylabel(r"cluster throughput  $\Sigma_j w_j u_j \,/\, \Sigma_j w_j$")
    ax.margins(x=0.1, y=0.08)
    ax.set_title(outcome.title or "Throughput against power over objective weights")
    ax.grid(True, alpha=0.3)
    if ax.lines or ax.collections:
        ax.legend(fontsize="small", loc="lower right")
    return fig


_LABEL_OFFSETS = ((6, -12), (-6, 6), (6, 6), (-6, -14), (6, -24), (-6, 18), (6, 18), (-6, -26))
"""Where a front label may go, in points from its marker, tried in this order."""
_AXES_POINTS = (430.0, 300.0)
"""Rough size of the plot area in points (figure 7.5 x 5.2 in), to tell labels apart."""


def _annotate(ax: Any, labels: Sequence[tuple[float, float, str]]) -> None:
    """Label the front's points, each where it overlaps no earlier label and no marker."""
    if not labels:
        return
    xs = [x for x, _, _ in labels]
    ys = [y for _, y, _ in labels]
    span_x = (max(xs) - min(xs)) or 1.0
    span_y = (max(ys) - min(ys)) or 1.0

    def to_points(x: float, y: float) -> tuple[float, float]:
        return (
            (x - min(xs)) / span_x * _AXES_POINTS[0],
            (y - min(ys)) / span_y * _AXES_POINTS[1],
        )

    markers = [to_points(x, y) for x, y, _ in labels]
    boxes: list[tuple[float, float, float, float]] = []
    for x, y, text in labels:
        px, py = to_points(x, y)
        width, height = 4.2 * len(text), 8.0
        chosen = _LABEL_OFFSETS[0]
        for dx, dy in _LABEL_OFFSETS:
            left = px + dx if dx > 0 else px + dx - width
            box = (left, py + dy, left + width, py + dy + height)
            clear = all(
                box[2] < b[0] or b[2] < box[0] or box[3] < b[1] or b[3] < box[1] for b in boxes
            ) and not any(
                box[0] - 3 <= mx <= box[2] + 3 and box[1] - 3 <= my <= box[3] + 3
                for mx, my in markers
            )
            if clear:
                chosen = (dx, dy)
                boxes.append(box)
                break
        else:
            dx, dy = chosen
            left = px + dx
            boxes.append((left, py + dy, left + width, py + dy + height))
        ax.annotate(
            text,
            (x, y),
            textcoords="offset points",
            xytext=chosen,
            ha="left" if chosen[0] > 0 else "right",
            fontsize="x-small",
        )
