"""Small jobs on MIG instances: how fast they really train there, and what the scheduler is told.

A small job does not saturate a whole GPU, which is why slices pay. Gavel measured one-GPU jobs
sharing a V100 with a copy of themselves (``data/gavel/colocation.csv``, derived from Gavel's
``simulation_throughputs.json``): a job that keeps ``kept`` of its isolated speed on about half
a GPU uses ``u = min(1, 0.5 / kept)`` of the whole GPU. Each slice job is given the fraction of
one of Gavel's job types, drawn from its seed and name (``draw_fraction``).

- **Truth**: on an instance of share ``s`` (``solver.perfmodel.slices.slice_share``: the smaller
  of its SM and memory shares) a job trains at ``r_m * min(1, s / u)``, ``r_m`` its true
  one-GPU rate with the instance's memory as the limit on its micro-batch (the analytic model,
  times the job's throughput error), and draws ``(W_m - idle) * min(1, s / u)`` above the GPU's
  idle power (the same energy per sample as on the whole GPU), times its power error.
- **Prediction** (every policy that uses slices sees the same): the request carries the job as
  a measured profile, its whole-GPU points the analytic model's predictions unchanged and, per
  MIG profile and clock, a point (``ProfilePoint.mig_profile``) predicted by the same rule with
  the model's rate and a predicted fraction ``u * e``, ``e`` a mean-one lognormal error with the
  truth's ``throughput_sigma`` drawn once per job: a scheduler that profiled the job on a shared
  GPU, as Gavel's space-sharing policy is given its measured colocation throughputs.
"""

from __future__ import annotations

import csv
import functools
import zlib
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from solver import resources
from solver.domain import Config, Job, ProfilePoint
from solver.mig import MigGeometry
from solver.perfmodel.facts import TypeFacts
from solver.perfmodel.slices import slice_configs, slice_share

COLOCATION = resources.data_dir() / "gavel" / "colocation.csv"


@functools.lru_cache(maxsize=4)
def load_fractions(path: Path = COLOCATION) -> dict[str, float]:
    """Gavel's job types with their measured fraction of a GPU (types without one left out)."""
    with path.open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    out = {r["job_type"]: float(r["used_fraction"]) for r in rows if r["used_fraction"]}
    if not out:
        raise ValueError(f"{path}: no job type with a used_fraction")
    bad = sorted(k for k, v in out.items() if not 0 < v <= 1)
    if bad:
        raise ValueError(f"{path}: used_fraction must be in (0, 1]: {', '.join(bad)}")
    return out


def draw_fraction(seed: int, job_id: str) -> tuple[str, float]:
    """A job type of Gavel's and its fraction of a GPU, drawn from the seed and the job's name
    alone (the same whatever the other jobs)."""
    table = load_fractions()
    names = sorted(table)
    rng = np.random.default_rng([seed, zlib.crc32(job_id.encode()), 5])
    name = names[int(rng.integers(len(names)))]
    return name, table[name]


def predicted_fraction(seed: int, job_id: str, used: float, sigma: float) -> float:
    """The fraction the scheduler is told: the true one times a mean-one lognormal error
    (``sigma``, the truth's throughput error), drawn once per job, at most 1."""
    if sigma <= 0:
        return used
    rng = np.random.default_rng([seed, zlib.crc32(job_id.encode()), 6])
    return min(1.0, used * float(rng.lognormal(-sigma * sigma / 2, sigma)))


def kept_share(share: float, used: float) -> float:
    """The share of its whole-GPU speed a job that uses ``used`` of a GPU keeps on an instance
    of ``share``: ``min(1, share / used)``."""
    if not (0 < share <= 1 and 0 < used <= 1):
        raise ValueError(f"share and used fraction must be in (0, 1], got {share}, {used}")
    return min(1.0, share / used)


def instance_configs(
    job: Job, facts: Mapping[str, TypeFacts], geometries: Mapping[str, MigGeometry]
) -> dict[tuple[str, str, int], Config]:
    """The performance model's slice configurations of a slice job, by (GPU type, profile,
    clock): ``share x`` its one-GPU rate within the instance's memory."""
    return {
        (c.gpu_type, c.mig_profile, c.sm_clock_mhz): c
        for c in slice_configs(job, facts, geometries)
        if not c.kept_only
    }


def at_fraction(c: Config, geometry: MigGeometry, used: float) -> tuple[float, float]:
    """(samples/s, watts above idle) of a model slice configuration for a job using ``used``
    of a GPU: the model's one-GPU figures within the instance's memory, times ``kept_share``."""
    share = slice_share(geometry, c.mig_profile)
    k = kept_share(share, used) / share
    return c.samples_per_second * k, c.watts * k


def slice_points(
    job: Job,
    facts: Mapping[str, TypeFacts],
    geometries: Mapping[str, MigGeometry],
    used: float,
) -> list[ProfilePoint]:
    """The job's predicted points on every instance it may use, for a predicted fraction
    ``used`` (watts above idle, as a MIG profile point carries them)."""
    out = []
    for (gpu_type, profile, clock), c in sorted(instance_configs(job, facts, geometries).items()):
        sps, watts = at_fraction(c, geometries[gpu_type], used)
        out.append(
            ProfilePoint(gpu_type, 1, 1, 1, clock, sps, watts, c.memory_per_gpu_gib, profile)
        )
    return out
