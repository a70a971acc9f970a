"""The cores a process may use, and the thread caps for worker processes.

A Kubernetes CPU limit sets a cgroup quota, not an affinity: both are read, and the smaller
wins, so that a solve never plans for cores its container cannot have.
"""

from __future__ import annotations

import math
import os

CGROUP_CPU_MAX = "/sys/fs/cgroup/cpu.max"
"""cgroup v2's CPU quota of this container: "<quota> <period>" or "max <period>"."""
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
"""Thread caps of numerical libraries, set to 1 in pool workers: N workers use N cores."""


def available_cores(cpu_max: str = CGROUP_CPU_MAX) -> int:
    """Cores this process may use: its CPU affinity, capped by the container's CPU quota."""
    try:
        cores = max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:  # pragma: no cover - not Linux
        cores = max(os.cpu_count() or 1, 1)
    quota = cgroup_cpu_quota(cpu_max)
    return cores if quota is None else max(1, min(cores, math.ceil(quota - 1e-9)))


def cgroup_cpu_quota(path: str) -> float | None:
    """CPUs allowed by a cgroup v2 ``cpu.max`` file, or None without a quota or file."""
    try:
        with open(path) as f:
            quota, period = f.read().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        return None


def one_thread() -> None:
    """Pool worker initializer: one core per worker."""
    for var in THREAD_VARIABLES:
        os.environ[var] = "1"
