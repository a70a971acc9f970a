"""Extract the Acme (Kalos, Seren) workload statistics from the figures of the AcmeTrace repository.

Usage: python data/acme/extract.py PATH/TO/AcmeTrace [OUT_DIR]

The figures of Hu et al., "Characterization of Large Language Model Development in the
Datacenter" (NSDI 2024) are published as vector PDFs in InternLM/AcmeTrace (``figure/``), drawn
by its ``analysis.ipynb`` from the job traces. The numbers are the drawing coordinates, so they
are read back exactly (to the rounding of the PDF's coordinates), not digitised by eye:

- ``job_types.csv`` (``treemap_job_dist.pdf``): cluster, type, jobs_pct, gpu_time_pct. Treemap
  areas are proportional to the values (squarify); each share is its rectangle's area over the
  panel's total, which agrees with the printed labels (e.g. Kalos Pretrain 95.5 % of GPU time).
- ``gpu_num_box.csv`` (``box_gpu_num.pdf``): cluster, type, whisker_low, q1, median, q3,
  whisker_high: the box plot of GPUs per job by type (log10 axis; whiskers at 1.5 IQR, seaborn).
- ``duration_cdf.csv`` (``cdf_job_duration_queue.pdf``, panels a and c): cluster, type,
  duration_s, cdf_pct: the CDF of GPU job duration by type at durations 2^0 .. 2^21 s, the
  points the notebook evaluates (``x = [2**i for i in range(0, 22)]``).

Types are told apart by colour: the notebook gives Eval, Pretrain, SFT, MLLM, Debug, Other the
first six colours of seaborn's "pastel" (treemap, box plot) and "tab10" (CDF) palettes.
"""

from __future__ import annotations

import csv
import math
import re
import sys
import zlib
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

TYPES = ("Eval", "Pretrain", "SFT", "MLLM", "Debug", "Other")
PASTEL = (
    (0.631, 0.788, 0.957),
    (1.0, 0.706, 0.510),
    (0.553, 0.898, 0.631),
    (1.0, 0.624, 0.608),
    (0.816, 0.733, 1.0),
    (0.871, 0.733, 0.608),
)
TAB10 = (
    (0.122, 0.467, 0.706),
    (1.0, 0.498, 0.055),
    (0.173, 0.627, 0.173),
    (0.839, 0.153, 0.157),
    (0.580, 0.404, 0.741),
    (0.549, 0.337, 0.294),
)
TOKEN = re.compile(rb"\((?:\\.|[^\\)])*\)|\[|\]|/[^\s/\[\]()]+|[-+]?\d*\.?\d+|[A-Za-z'\"*]+")


@dataclass
class Drawing:
    """What a page draws: stroked and filled paths with their colours."""

    strokes: list[tuple[tuple[float, ...], list[tuple[float, float]], bool]] = field(
        default_factory=list
    )
    """(stroke colour, points, dashed)."""
    fills: list[tuple[tuple[float, ...], list[tuple[float, float]]]] = field(default_factory=list)


def _page(pdf: bytes) -> bytes:
    """The page's content stream: the compressed stream that draws text (``TJ``)."""
    for m in re.finditer(rb"stream\r?\n(.*?)\r?\nendstream", pdf, re.S):
        try:
            data = zlib.decompress(m.group(1))
        except zlib.error:
            continue
        if b"TJ" in data:
            return data
    raise ValueError("no page content stream found")


def parse(path_: Path) -> Drawing:
    """Interpret the path operators of a matplotlib PDF page (absolute coordinates)."""
    d = Drawing()
    numbers: list[float] = []
    dash: list[float] = []
    in_array = False
    state = [((0.0,), (0.0,), False)]  # (stroke colour, fill colour, dashed), saved by q/Q
    path: list[tuple[float, float]] = []
    for tok in TOKEN.findall(_page(path_.read_bytes())):
        s = tok.decode("latin-1")
        stroke, fill, dashed = state[-1]
        if s == "[":
            in_array, dash = True, []
            continue
        if s == "]":
            in_array = False
            continue
        if s.startswith(("(", "/")):
            continue
        if re.fullmatch(r"[-+]?\d*\.?\d+", s):
            (dash if in_array else numbers).append(float(s))
            continue
        if s == "RG":
            state[-1] = (tuple(numbers[-3:]), fill, dashed)
        elif s == "G":
            state[-1] = ((numbers[-1],), fill, dashed)
        elif s == "rg":
            state[-1] = (stroke, tuple(numbers[-3:]), dashed)
        elif s == "g":
            state[-1] = (stroke, (numbers[-1],), dashed)
        elif s == "d":
            state[-1] = (stroke, fill, bool(dash))
        elif s in ("m", "l"):
            path.append((numbers[-2], numbers[-1]))
        elif s == "re":
            x, y, w, h = numbers[-4:]
            path.extend([(x, y), (x + w, y), (x + w, y + h), (x, y + h)])
        elif s == "S":
            d.strokes.append((stroke, path, dashed))
            path = []
        elif s in ("B", "f"):
            d.fills.append((fill, path))
            path = []
        elif s == "n":
            path = []
        elif s == "q":
            state.append(state[-1])
        elif s == "Q":
            state.pop()
        numbers = []
    return d


def _type(colour: tuple[float, ...], palette: tuple[tuple[float, float, float], ...]) -> str | None:
    for name, ref in zip(TYPES, palette, strict=True):
        if len(colour) == 3 and all(abs(a - b) < 0.002 for a, b in zip(colour, ref, strict=True)):
            return name
    return None


def _box(points: list[tuple[float, float]]) -> tuple[float, float, float, float]:
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    return min(xs), min(ys), max(xs), max(ys)


def _panel(x: float, y: float, panels: list[tuple[float, float, float, float]]) -> int:
    for i, (x0, y0, x1, y1) in enumerate(panels):
        if x0 - 0.01 <= x <= x1 + 0.01 and y0 - 0.01 <= y <= y1 + 0.01:
            return i
    return -1


def _axes(d: Drawing) -> list[tuple[float, float, float, float]]:
    """Panel frames: the white rectangles matplotlib fills behind each axes, in reading order."""
    frames = [_box(p) for c, p in d.fills if c == (1.0,) and len(p) == 4]
    frames = [f for f in frames if f[0] > 1]  # not the page background
    return sorted(frames, key=lambda f: (-f[1], f[0]))


def job_types(src: Path) -> list[list[str]]:
    d = parse(src / "figure" / "treemap_job_dist.pdf")
    panels = _axes(d)  # a: Seren jobs, b: Seren GPU time, c: Kalos jobs, d: Kalos GPU time
    area: dict[int, dict[str, float]] = defaultdict(dict)
    for colour, pts in d.fills:
        name = _type(colour, PASTEL)
        if name is None or len(pts) < 4:
            continue
        x0, y0, x1, y1 = _box(pts)
        p = _panel((x0 + x1) / 2, (y0 + y1) / 2, panels)
        if p >= 0:
            area[p][name] = area[p].get(name, 0.0) + (x1 - x0) * (y1 - y0)
    rows = []
    for cluster, jobs, gtime in (("Seren", 0, 1), ("Kalos", 2, 3)):
        tj, tg = sum(area[jobs].values()), sum(area[gtime].values())
        for name in TYPES:
            if name in area[jobs]:
                rows.append(
                    [
                        cluster,
                        name,
                        f"{100 * area[jobs][name] / tj:.2f}",
                        f"{100 * area[gtime][name] / tg:.2f}",
                    ]
                )
    return rows


def _gridlines(
    d: Drawing, panel: tuple[float, float, float, float], horizontal: bool
) -> list[float]:
    """Positions of a panel's dotted gridlines: dashed lines spanning the whole panel."""
    x0, y0, x1, y1 = panel
    out = set()
    for _, pts, dashed in d.strokes:
        if not dashed or len(pts) != 2:
            continue
        (xa, ya), (xb, yb) = pts
        if not (x0 - 0.01 <= xa <= x1 + 0.01 and y0 - 0.01 <= ya <= y1 + 0.01):
            continue
        if horizontal and ya == yb and abs(xa - x0) < 0.01 and abs(xb - x1) < 0.01:
            out.add(ya)
        if not horizontal and xa == xb and abs(ya - y0) < 0.01 and abs(yb - y1) < 0.01:
            out.add(xa)
    return sorted(out)


def _log_axis(
    d: Drawing, panel: tuple[float, float, float, float], vertical: bool
) -> tuple[float, float]:
    """(position of 10^0, points per decade) of a panel's log axis: its gridlines are at
    10^0, 10^1, ... (the tick labels of these figures)."""
    lines = _gridlines(d, panel, horizontal=vertical)
    return lines[0], (lines[-1] - lines[0]) / (len(lines) - 1)


def gpu_num_box(src: Path) -> list[list[str]]:
    path = src / "figure" / "box_gpu_num.pdf"
    d = parse(path)
    panels = sorted(_axes(d), key=lambda f: f[0])  # a: Seren, b: Kalos
    rows = []
    for cluster, panel in zip(("Seren", "Kalos"), panels, strict=True):
        y0, decade = _log_axis(d, panel, vertical=True)

        def gpus(y: float, y0: float = y0, decade: float = decade) -> float:
            return 10 ** ((y - y0) / decade)

        boxes = []
        for colour, pts in d.fills:
            name = _type(colour, PASTEL)
            if name and len(pts) >= 4 and _panel(*pts[0], [panel]) == 0:
                boxes.append((name, *_box(pts)))
        for name, x0, q1, x1, q3 in boxes:
            cx = (x0 + x1) / 2
            whisk = [
                p
                for _, p, _ in d.strokes
                if len(p) == 2 and abs(p[0][0] - cx) < 0.01 and abs(p[1][0] - cx) < 0.01
            ]
            ends = [y for p in whisk for y in (p[0][1], p[1][1])]
            medians = [
                p[0][1]
                for _, p, _ in d.strokes
                if len(p) == 2
                and abs(p[0][1] - p[1][1]) < 1e-6
                and abs(p[0][0] - x0) < 0.01
                and abs(p[1][0] - x1) < 0.01
            ]
            values = (min(ends), q1, medians[0], q3, max(ends))
            rows.append([cluster, name, *(_round(gpus(v)) for v in values)])
    return rows


def _round(x: float) -> str:
    return f"{round(x, 2):g}"


def duration_cdf(src: Path) -> list[list[str]]:
    path = src / "figure" / "cdf_job_duration_queue.pdf"
    d = parse(path)
    panels = _axes(d)  # a, b (Seren), c, d (Kalos)
    rows = []
    for cluster, panel in (("Seren", panels[0]), ("Kalos", panels[2])):
        x0, decade = _log_axis(d, panel, vertical=False)
        ys = _gridlines(d, panel, horizontal=True)
        zero, full = ys[0], ys[-1]  # gridlines at 0 % and 100 %
        for colour, pts, _ in d.strokes:
            name = _type(colour, TAB10)
            if name is None or len(pts) < 10 or _panel(*pts[0], [panel]) != 0:
                continue
            for x, y in pts:
                seconds = 2 ** round(math.log2(10 ** ((x - x0) / decade)))
                rows.append(
                    [cluster, name, str(seconds), f"{100 * (y - zero) / (full - zero):.2f}"]
                )
    return rows


def write(path: Path, header: list[str], rows: list[list[str]]) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    src = Path(argv[1])
    out = Path(argv[2]) if len(argv) == 3 else Path(__file__).resolve().parent
    write(out / "job_types.csv", ["cluster", "type", "jobs_pct", "gpu_time_pct"], job_types(src))
    write(
        out / "gpu_num_box.csv",
        ["cluster", "type", "whisker_low", "q1", "median", "q3", "whisker_high"],
        gpu_num_box(src),
    )
    write(out / "duration_cdf.csv", ["cluster", "type", "duration_s", "cdf_pct"], duration_cdf(src))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
