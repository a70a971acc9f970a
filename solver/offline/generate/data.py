"""The bundled public data (``data/``): the Alibaba PAI 2020 machine spec, Gavel's and Pollux's
measured throughputs, and the Philly trace's GPU counts, durations and tenants."""

from __future__ import annotations

import csv
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np

from solver import resources
from solver.offline.generate.spec import NodeKind

DATA_DIR = resources.data_dir()
"""The bundled ``data/`` (the repository's in a checkout; see ``solver.resources``)."""


PAI_TYPES: Mapping[str, str] = {
    "P100": "P100-16GB",
    "T4": "T4",
    "V100": "V100-16GB",
    "V100M32": "V100-32GB",
}
"""Alibaba PAI GPU type -> catalog name (MISC and CPU machines are left out)."""


@cache
def pai_node_kinds() -> tuple[NodeKind, ...]:
    """Node kinds in the proportions of PAI's 1,897 machines, with their GPUs per machine."""
    counts: Counter[str] = Counter()
    gpus: dict[str, Counter[int]] = defaultdict(Counter)
    with (DATA_DIR / "alibaba" / "pai2020_machine_spec.csv").open(newline="") as f:
        for row in csv.DictReader(f):
            t = row["gpu_type"]
            if t in PAI_TYPES:
                counts[t] += 1
                gpus[t][int(row["cap_gpu"])] += 1
    kinds = []
    for t in sorted(counts, key=lambda t: PAI_TYPES[t]):
        per_node = gpus[t].most_common(1)[0][0]
        kinds.append(NodeKind(PAI_TYPES[t], per_node, float(counts[t]), 8 if per_node >= 8 else 16))
    return tuple(kinds)


# Parameters of the measured networks, for memory_per_gpu_gib (see instances/README.md).
GAVEL_PARAMETERS: Mapping[str, float] = {
    "ResNet-18": 11_173_962,  # CIFAR-10 ResNet-18 (kuangliu/pytorch-cifar), as Gavel trains
    "ResNet-50": 25_557_032,  # torchvision resnet50
    "Transformer": 65e6,  # Vaswani et al. 2017, base model (upper bound: Multi30k vocabulary)
    "LM": 13_987_678,  # computed: 2-layer LSTM 200/200, untied, WikiText-2 vocabulary 33,278
    "Recommendation": 8_063_708,  # computed: autoencoder 20,108 items -> 200 -> 20,108
}
POLLUX_PARAMETERS: Mapping[str, float] = {
    "bert": 110e6,  # BERT-base (Devlin et al. 2019), fine-tuned on SQuAD
    "cifar10": 11_173_962,  # ResNet-18 (kuangliu/pytorch-cifar)
    "imagenet": 25_557_032,  # torchvision resnet50
    "ncf": 1_602_657,  # computed: NeuMF, factors 32, 3 MLP layers, ml-1m 6,040 x 3,706
    "yolov3": 61.9e6,  # YOLOv3 (Darknet-53), 80-class head; the VOC head is slightly smaller
}
GAVEL_TYPES: Mapping[str, tuple[str, ...]] = {
    "k80": ("K80",),
    "p100": ("P100-16GB",),
    "v100": ("V100-16GB", "V100-32GB"),
}
"""Gavel's GPU names -> catalog types its measurements stand for."""


@dataclass(frozen=True)
class MeasuredPoint:
    gpu_type: str
    num_gpus: int
    samples_per_second: float


@dataclass(frozen=True)
class MeasuredWorkload:
    """One network at one batch size, with its measured points on catalog GPU types."""

    source: str
    network: str
    batch: str
    parameters: float
    points: tuple[MeasuredPoint, ...]

    @property
    def label(self) -> str:
        return f"{self.source}-{self.network.lower()}-{self.batch}"


def monotone(points: Sequence[tuple[int, float]]) -> list[tuple[int, float]]:
    """Keep the (num_gpus, samples/s) points that beat every point with fewer GPUs.

    Zero entries (runs that did not complete) and points slower than a smaller GPU count of
    the same type and batch size (measurement noise; no scheduler would pick them) are dropped.
    """
    kept: list[tuple[int, float]] = []
    for n, sps in sorted(points):
        if sps > 0 and (not kept or sps > kept[-1][1]):
            kept.append((n, sps))
    return kept


@cache
def _gavel_rows() -> tuple[tuple[str, str, int, int, float], ...]:
    rows = []
    with (DATA_DIR / "gavel" / "isolated_throughputs.csv").open(newline="") as f:
        for r in csv.DictReader(f):
            if r["consolidated"] == "1" and r["model"] in GAVEL_PARAMETERS:
                rows.append(
                    (
                        r["gpu_type"],
                        r["model"],
                        int(r["batch_size"]),
                        int(r["num_gpus"]),
                        float(r["steps_per_sec"]),
                    )
                )
    return tuple(rows)


def gavel_workloads(types: Sequence[str], *, per_step: bool = False) -> list[MeasuredWorkload]:
    """Gavel's consolidated isolated runs on catalog types: samples/s = steps/s x batch, or
    with ``per_step`` steps/s (one "sample" a training step: Gavel's own unit)."""
    series: dict[tuple[str, int, str], list[tuple[int, float]]] = defaultdict(list)
    for gavel_type, model, batch, n, steps in _gavel_rows():
        series[(model, batch, gavel_type)].append((n, steps if per_step else steps * batch))
    out = []
    for model, batch in sorted({(m, b) for m, b, _ in series}):
        points: list[MeasuredPoint] = []
        for gavel_type, targets in GAVEL_TYPES.items():
            for n, sps in monotone(series.get((model, batch, gavel_type), [])):
                points.extend(MeasuredPoint(t, n, sps) for t in targets if t in types)
        if points:
            out.append(
                MeasuredWorkload(
                    "gavel", model, f"bs{batch}", GAVEL_PARAMETERS[model], tuple(points)
                )
            )
    return out


def packed_placement(num_gpus: int, gpus_per_node: int) -> str:
    """Pollux's id of ``num_gpus`` packed on nodes of ``gpus_per_node``: e.g. 8 on 4 -> "44"."""
    parts = [gpus_per_node] * (num_gpus // gpus_per_node)
    if num_gpus % gpus_per_node:
        parts.append(num_gpus % gpus_per_node)
    rotations = ["".join(map(str, parts[i:] + parts[:i])) for i in range(len(parts))]
    return min(rotations)


def pollux_workloads(gpus_per_node: int, counts: Sequence[int]) -> list[MeasuredWorkload]:
    """Pollux's T4 runs at packed placements: samples/s = local batch x GPUs / step time."""
    out = []
    for app in sorted(POLLUX_PARAMETERS):
        times: dict[tuple[str, int], float] = {}
        with (DATA_DIR / "pollux" / app / "placements.csv").open(newline="") as f:
            for r in csv.DictReader(f):
                times[(r["placement"], int(r["local_bsz"]))] = float(r["step_time"])
        for lbs in sorted({b for _, b in times}):
            raw = []
            for n in counts:
                key = (packed_placement(n, gpus_per_node), lbs)
                if key in times:
                    raw.append((n, lbs * n / times[key]))
            points = tuple(MeasuredPoint("T4", n, sps) for n, sps in monotone(raw))
            if points:
                out.append(
                    MeasuredWorkload("pollux", app, f"lbs{lbs}", POLLUX_PARAMETERS[app], points)
                )
    return out


@dataclass(frozen=True)
class Philly:
    """The Philly extracts: GPU-count histogram, duration quantiles per count, tenants."""

    jobs: Mapping[int, int]
    """Jobs that asked for each GPU count (the distribution over arrivals)."""
    job_seconds: Mapping[int, float]
    """Summed durations per GPU count (the distribution over a snapshot of present jobs)."""
    durations: Mapping[int, tuple[tuple[float, ...], tuple[float, ...]]]
    tenants: Mapping[str, int]

    def draw_num_gpus(self, rng: np.random.Generator, allowed: Sequence[int], view: str) -> int:
        """A GPU count of the trace, restricted to ``allowed``; ``view``: snapshot or arrivals."""
        weight = self.job_seconds if view == "snapshot" else self.jobs
        counts = sorted(n for n in set(allowed) if n in weight)
        if not counts:
            raise ValueError(f"no Philly GPU count among {sorted(set(allowed))}")
        w = np.array([weight[n] for n in counts], dtype=float)
        return counts[int(rng.choice(len(counts), p=w / w.sum()))]

    def draw_duration(self, rng: np.random.Generator, num_gpus: int) -> float:
        """A duration (s) of a job of ``num_gpus`` GPUs by inverse CDF of the quantiles."""
        q, v = self.durations[num_gpus]
        return float(np.interp(rng.random(), q, v))

    def draw_tenant(self, rng: np.random.Generator) -> str:
        names = sorted(self.tenants)
        weights = np.array([self.tenants[t] for t in names], dtype=float)
        return names[int(rng.choice(len(names), p=weights / weights.sum()))]


@cache
def load_philly() -> Philly:
    d = DATA_DIR / "philly"
    with (d / "num_gpus.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    quant: dict[int, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    with (d / "durations.csv").open(newline="") as f:
        for r in csv.DictReader(f):
            qs, vs = quant[int(r["num_gpus"])]
            qs.append(float(r["quantile"]))
            vs.append(float(r["duration_s"]))
    with (d / "tenants.csv").open(newline="") as f:
        tenants = {r["cluster"]: int(r["jobs"]) for r in csv.DictReader(f)}
    return Philly(
        {int(r["num_gpus"]): int(r["jobs"]) for r in rows},
        {int(r["num_gpus"]): float(r["job_seconds"]) for r in rows},
        {n: (tuple(q), tuple(v)) for n, (q, v) in quant.items()},
        tenants,
    )
