"""Pollux: step and sync times over GPU count and placement; the network efficiency of the
data-parallel all-reduce."""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from solver.domain import GpuType
from solver.offline.calibration.numeric import Array, golden_section
from solver.offline.calibration.sources import (
    DATA_DIR,
    GRADIENT_BYTES_PER_PARAMETER,
    POLLUX_GPUS_PER_NODE,
    POLLUX_NETWORK_GBPS,
)
from solver.offline.generate import POLLUX_PARAMETERS, packed_placement
from solver.perfmodel import throughput


def pollux_rows(data_dir: Path = DATA_DIR) -> dict[str, list[dict[str, str]]]:
    """Every application's placements.csv, by application (the apps of
    ``solver.offline.generate``)."""
    out = {}
    for app in sorted(POLLUX_PARAMETERS):
        with (data_dir / "pollux" / app / "placements.csv").open(newline="") as f:
            out[app] = list(csv.DictReader(f))
    return out


@dataclass(frozen=True)
class PolluxData:
    """Every multi-GPU Pollux measurement with its 1-GPU counterpart (same local batch)."""

    app: tuple[str, ...]
    placement: tuple[str, ...]
    local_batch: npt.NDArray[np.int64]
    num_gpus: npt.NDArray[np.int64]
    nodes: npt.NDArray[np.int64]
    step: Array
    sync: Array
    step_1: Array
    sync_1: Array
    gradient_bytes: Array

    @property
    def across(self) -> npt.NDArray[np.bool_]:
        return self.nodes > 1

    @cached_property
    def placement_class(self) -> tuple[str, ...]:
        """ "one node", "packed" (nodes filled in turn, as the service places) or "spread"."""
        out = []
        for pl, n, k in zip(self.placement, self.num_gpus, self.nodes, strict=True):
            if k == 1:
                out.append("one node")
            elif pl == packed_placement(int(n), POLLUX_GPUS_PER_NODE):
                out.append("packed")
            else:
                out.append("spread")
        return tuple(out)

    @cached_property
    def weights(self) -> Array:
        """Each application weighs the same in the fit, whatever its number of rows."""
        counts: dict[str, int] = defaultdict(int)
        for a in self.app:
            counts[a] += 1
        return np.array([1.0 / counts[a] for a in self.app])


def load_pollux(rows: Mapping[str, Sequence[Mapping[str, str]]]) -> PolluxData:
    cols: dict[str, list[Any]] = defaultdict(list)
    for app, rs in sorted(rows.items()):
        by_key = {(r["placement"], int(r["local_bsz"])): r for r in rs}
        for (pl, lbs), r in sorted(by_key.items()):
            one = by_key.get(("1", lbs))
            if pl == "1" or one is None:
                continue
            sizes = [int(c) for c in pl]
            cols["app"].append(app)
            cols["placement"].append(pl)
            cols["local_batch"].append(lbs)
            cols["num_gpus"].append(sum(sizes))
            cols["nodes"].append(len(sizes))
            cols["step"].append(float(r["step_time"]))
            cols["sync"].append(float(r["sync_time"]))
            cols["step_1"].append(float(one["step_time"]))
            cols["sync_1"].append(float(one["sync_time"]))
            cols["gradient_bytes"].append(GRADIENT_BYTES_PER_PARAMETER * POLLUX_PARAMETERS[app])
    return PolluxData(
        app=tuple(cols["app"]),
        placement=tuple(cols["placement"]),
        local_batch=np.array(cols["local_batch"], dtype=np.int64),
        num_gpus=np.array(cols["num_gpus"], dtype=np.int64),
        nodes=np.array(cols["nodes"], dtype=np.int64),
        step=np.array(cols["step"]),
        sync=np.array(cols["sync"]),
        step_1=np.array(cols["step_1"]),
        sync_1=np.array(cols["sync_1"]),
        gradient_bytes=np.array(cols["gradient_bytes"]),
    )


def pollux_predict(
    d: PolluxData,
    gpu: GpuType,
    network_efficiency: float,
    *,
    intra_efficiency: float = 1.0,
    overlap: float = throughput.BACKWARD_SHARE,
) -> tuple[Array, Array]:
    """(sync, step) seconds the model predicts for every row of ``d``.

    ``solver.perfmodel.throughput``'s data-parallel term, vectorised: a ring all-reduce of the FP32
    gradients over NVLink/PCIe inside one node, else over the node's network link shared by its
    4 GPUs at ``network_efficiency``; the backward pass (``overlap`` of the compute, the model's
    2/3) hides part of it. Compute is the measured 1-GPU step at the same local batch less its sync
    time; the 1-GPU sync time (bookkeeping, no communication) is added back.
    ``intra_efficiency`` scales the in-node bandwidth (1 in the model; a diagnostic only).
    """
    inside = intra_efficiency * gpu.intra_node_bandwidth_gbps / 2 * 1e9
    share = POLLUX_NETWORK_GBPS / 8 * 1e9 / POLLUX_GPUS_PER_NODE
    bandwidth = np.where(d.across, network_efficiency * share, inside)
    n = d.num_gpus.astype(np.float64)
    allreduce = 2 * (n - 1) / n * d.gradient_bytes / bandwidth
    exposed = np.maximum(0.0, allreduce - overlap * (d.step_1 - d.sync_1))
    return d.sync_1 + exposed, d.step_1 + exposed


NETWORK_EFFICIENCY_RANGE = (0.01, 1.0)


def _minimise_log_grid(objective: Callable[[float], float]) -> float:
    """A log-spaced grid of 200 values in NETWORK_EFFICIENCY_RANGE, then golden section
    between the best grid point's neighbours; rounded to 3 decimals."""
    low, high = NETWORK_EFFICIENCY_RANGE
    grid = np.exp(np.linspace(math.log(low), math.log(high), 200))
    values = [objective(float(x)) for x in grid]
    i = int(np.argmin(values))
    lo, hi = float(grid[max(i - 1, 0)]), float(grid[min(i + 1, len(grid) - 1)])
    return round(golden_section(objective, lo, hi, 1e-5), 3)


def sync_objective(d: PolluxData, rows: npt.NDArray[np.bool_], sync: Array) -> float:
    """Weighted sum of squares of (modelled - measured sync) / measured step over ``rows``;
    each application weighs the same."""
    w = d.weights[rows]
    r = (sync[rows] - d.sync[rows]) / d.step[rows]
    return float(np.sum(w * r * r))


def fit_network_efficiency(
    d: PolluxData,
    gpu: GpuType,
    rows: npt.NDArray[np.bool_] | None = None,
    overlap: float = throughput.BACKWARD_SHARE,
) -> tuple[float, float]:
    """(efficiency, objective): least squares of the sync time of every cross-node row (or of
    ``rows``), each residual in units of that row's step time, each application weighing the
    same (``sync_objective``), minimised by ``_minimise_log_grid``."""
    mask = d.across if rows is None else rows

    def objective(eta: float) -> float:
        return sync_objective(d, mask, pollux_predict(d, gpu, eta, overlap=overlap)[0])

    eta = _minimise_log_grid(objective)
    return eta, objective(eta)


def fit_intra_efficiency(d: PolluxData, gpu: GpuType) -> float:
    """A diagnostic, not a model constant: the in-node efficiency that would reproduce the
    one-node sync times with the model's overlap."""
    mask = ~d.across

    def objective(eta: float) -> float:
        return sync_objective(d, mask, pollux_predict(d, gpu, 1.0, intra_efficiency=eta)[0])

    return _minimise_log_grid(objective)


@dataclass(frozen=True)
class PolluxResult:
    data: PolluxData
    network_efficiency: float
    objective: float
    objective_before: float
    sync_before: Array
    step_before: Array
    sync_after: Array
    step_after: Array


def analyse_pollux(d: PolluxData, gpu: GpuType) -> PolluxResult:
    eta, objective = fit_network_efficiency(d, gpu)
    sync_b, step_b = pollux_predict(d, gpu, 1.0)
    sync_a, step_a = pollux_predict(d, gpu, eta)
    before = sync_objective(d, d.across, sync_b)
    return PolluxResult(d, eta, objective, before, sync_b, step_b, sync_a, step_a)
