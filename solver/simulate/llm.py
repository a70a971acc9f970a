"""A synthetic LLM-development trace from the published statistics of Acme's Kalos cluster.

Hu et al., "Characterization of Large Language Model Development in the Datacenter" (NSDI 2024)
publish, per workload type of Shanghai AI Lab's Kalos cluster, the share of GPU time, the GPUs
per job (box plot) and the CDF of job durations; ``data/acme`` holds them, read back exactly from
the figures of the InternLM/AcmeTrace repository (``data/acme/SOURCE.md``). This module turns
them into a trace:

- Types: Pretrain, Eval, Debug, Other (Kalos runs no SFT or MLLM jobs). Each gets a number of
  jobs such that its expected GPU time is its published share of the offered GPU time
  (``offered_load`` x ``reference_gpus`` x ``window_s``): Kalos Pretrain 95.48 %, Other 2.51 %,
  Debug 1.59 %, Eval 0.42 % (``job_types.csv``). Counts follow from those shares, not from the
  job-count shares (92.82 % of Kalos's jobs are 1-GPU evaluations, which a few hundred
  node-sized jobs cannot reproduce alongside the GPU-time shares).
- GPUs per job: the box plot's five numbers (lower whisker, quartiles, upper whisker) as the
  quantiles 0, 0.25, 0.5, 0.75, 1 of a distribution interpolated linearly in log2, rounded to a
  power of two and clamped to ``min_gpus`` .. ``max_gpus`` (8 .. 1,024: whole 8-GPU nodes, as
  scenario (b) asks; Kalos's 1-GPU evaluations become one node, and outliers beyond the whiskers
  are not drawn). Kalos: Pretrain 96 / 256 / 512 / 512 / 512, Debug 1 / 32 / 128 / 512 / 1,024.
- Duration: the published CDF at 2^0 .. 2^21 s, interpolated linearly in log2 of the duration,
  truncated at ``max_duration_s`` (3 days by default: 1.1 % of Kalos's pretraining jobs ran
  longer; the truncation keeps one simulation within minutes). Durations are run times of
  every job, failed and cancelled ones included, as the trace records them.
- Sizes and durations are drawn independently (the paper gives marginals only), stratified: job
  i of a type takes quantile (s_i + U) / N for a random permutation s of 0 .. N-1, so every
  trace holds the tails (a pretraining run in the top 1/N of durations) and the shares hold
  closely. Submissions are uniform over ``window_s`` (a Poisson process given its count).
- Tenant: the type; workload: an architecture of ``architectures`` drawn uniformly among those
  that run on the job's GPUs. Evaluation jobs are marked (``evaluation``): they run as training
  does, but a restart reloads only their weights; debugging jobs are simulated as training.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from solver import resources
from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.simulate.core import TraceJob
from solver.simulate.workload import WorkloadMix

ACME_DIR = resources.data_dir() / "acme"
TYPES = ("Pretrain", "Eval", "Debug", "Other")
"""Kalos's workload types, in the order jobs are drawn."""
EVALUATION_TYPE = "Eval"
"""The type whose jobs evaluate a model (the trace's ``evaluation``: no optimizer state)."""
_QUARTILES = (0.0, 0.25, 0.5, 0.75, 1.0)
_GRID = 100_000
"""Midpoints of this many equal quantile steps give a type's expected GPUs and duration."""


@dataclass(frozen=True)
class TypeStats:
    """One workload type of one Acme cluster (``data/acme``)."""

    name: str
    jobs_pct: float
    gpu_time_pct: float
    gpus_box: tuple[float, ...]
    """Lower whisker, q1, median, q3, upper whisker of GPUs per job."""
    duration_cdf: tuple[tuple[float, float], ...]
    """(seconds, fraction of jobs that ran at most that long), ascending."""


def load_acme(cluster: str = "Kalos") -> dict[str, TypeStats]:
    """The workload types of ``cluster`` (Kalos or Seren) from ``data/acme``."""

    def rows(name: str) -> list[dict[str, str]]:
        with (ACME_DIR / name).open(newline="") as f:
            return [r for r in csv.DictReader(f) if r["cluster"] == cluster]

    box = {
        r["type"]: tuple(float(r[k]) for k in ("whisker_low", "q1", "median", "q3", "whisker_high"))
        for r in rows("gpu_num_box.csv")
    }
    cdf: dict[str, list[tuple[float, float]]] = {}
    for r in rows("duration_cdf.csv"):
        cdf.setdefault(r["type"], []).append((float(r["duration_s"]), float(r["cdf_pct"]) / 100))
    return {
        r["type"]: TypeStats(
            r["type"],
            float(r["jobs_pct"]),
            float(r["gpu_time_pct"]),
            box[r["type"]],
            tuple(sorted(cdf[r["type"]])),
        )
        for r in rows("job_types.csv")
    }


@dataclass(frozen=True)
class LlmTraceSpec:
    """Everything that determines the synthetic trace (scenario (b) uses the defaults)."""

    reference_gpus: int = 2048
    """GPUs of the reference type the offered load is measured against."""
    window_s: float = 2 * 86_400.0
    """Submissions fall in [0, window_s)."""
    offered_load: float = 0.9
    """Offered GPU time over reference_gpus x window_s (a scenario choice, not a measurement)."""
    max_duration_s: float = 3 * 86_400.0
    min_gpus: int = 8
    max_gpus: int = 1024
    cluster: str = "Kalos"
    architectures: tuple[str, ...] = ("llama2-7b", "llama2-13b", "llama2-70b")
    """Workloads of every type (Llama 2, a public family of LLM pretraining runs)."""
    types: tuple[str, ...] = TYPES
    tenants: Mapping[str, str] = field(default_factory=dict)
    """Tenant of a type; default: the type in lower case."""


class _Sampler:
    """Inverse CDFs of one type's GPUs and (truncated) duration."""

    def __init__(self, stats: TypeStats, spec: LlmTraceSpec) -> None:
        self.box = np.log2(np.asarray(stats.gpus_box))
        self.lo, self.hi = math.log2(spec.min_gpus), math.log2(spec.max_gpus)
        xs: list[float] = []  # log2 seconds and CDF, strictly increasing from the last 0
        fs: list[float] = []
        for seconds, f in stats.duration_cdf:
            if fs and f <= fs[-1]:
                if len(fs) == 1 and f == fs[0]:
                    xs[0] = math.log2(seconds)
                continue
            xs.append(math.log2(seconds))
            fs.append(f)
        self.xs, self.fs = np.asarray(xs), np.asarray(fs)
        self.f_max = float(np.interp(math.log2(spec.max_duration_s), self.xs, self.fs))
        grid = (np.arange(_GRID) + 0.5) / _GRID
        self.mean_gpus = float(self.gpus(grid).mean())
        self.mean_duration = float(self.duration(grid).mean())

    def gpus(self, u: np.ndarray) -> np.ndarray:
        k = np.clip(np.round(np.interp(u, _QUARTILES, self.box)), self.lo, self.hi)
        return np.asarray(2**k, dtype=np.int64)

    def duration(self, u: np.ndarray) -> np.ndarray:
        f = self.fs[0] + u * (self.f_max - self.fs[0])
        return np.asarray(2 ** np.interp(f, self.fs, self.xs))


def _strata(rng: np.random.Generator, n: int) -> np.ndarray:
    return np.asarray((rng.permutation(n) + rng.random(n)) / n)


def llm_trace(
    seed: int, cluster: pb.ClusterSnapshot, spec: LlmTraceSpec | None = None
) -> list[TraceJob]:
    """The synthetic trace (module docstring), sorted by submission; deterministic in ``seed``
    and ``spec``. ``cluster`` decides which architectures a job's GPUs can run."""
    spec = spec or LlmTraceSpec()
    stats = load_acme(spec.cluster)
    mix = WorkloadMix(seed=seed)
    rng = np.random.default_rng(seed)
    offered = spec.offered_load * spec.reference_gpus * spec.window_s
    drawn: list[tuple[float, str, int, float, str]] = []
    for name in spec.types:
        s = _Sampler(stats[name], spec)
        share = stats[name].gpu_time_pct / sum(stats[t].gpu_time_pct for t in spec.types)
        n = max(1, round(share * offered / (s.mean_gpus * s.mean_duration)))
        gpus = s.gpus(_strata(rng, n))
        durations = s.duration(_strata(rng, n))
        submits = rng.random(n) * spec.window_s
        picks = rng.random(n)
        for g, d, t, p in zip(gpus, durations, submits, picks, strict=True):
            runnable = mix.runnable(spec.architectures, int(g), cluster)
            if not runnable:
                raise ValueError(f"no architecture of {spec.architectures} runs on {g} GPUs")
            arch = runnable[int(p * len(runnable))]
            drawn.append((float(t), name, int(g), float(d), arch))
    drawn.sort()
    return [
        TraceJob(
            job_id=f"llm-{i:04d}",
            submit_time_s=round(t, 1),
            tenant=spec.tenants.get(name, name.lower()),
            workload=arch,
            num_gpus=g,
            duration_s=round(d, 1),
            evaluation=name == EVALUATION_TYPE,
            row=i + 2,  # its line once written (write_trace)
        )
        for i, (t, name, g, d, arch) in enumerate(drawn)
    ]
