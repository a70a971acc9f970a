"""Every fit together (``run``) and the document written to ``models/calibration.json``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from solver.offline.calibration.efficiency import EfficiencyFit, efficiency_points, fit_efficiency
from solver.offline.calibration.gavel import GavelResult, analyse_gavel, gavel_rows
from solver.offline.calibration.pollux import PolluxResult, analyse_pollux, load_pollux, pollux_rows
from solver.offline.calibration.sources import DATA_DIR, POLLUX_GPU
from solver.offline.calibration.zeus import ZeusResult, analyse_zeus, load_zeus
from solver.perfmodel.catalog import load_gpu_catalog, read_json

COMMAND = "dsfro calibrate"
CLOCK_COMMAND = ".venv/bin/python scripts/fit_clock_model.py"


@dataclass(frozen=True)
class Result:
    efficiency: tuple[EfficiencyFit, ...]
    gavel: GavelResult
    pollux: PolluxResult
    zeus: ZeusResult
    clock_doc: Mapping[str, Any]


def run(data_dir: Path = DATA_DIR) -> Result:
    """Every comparison and fit, on the bundled data and the catalog of ``models/``."""
    catalog = load_gpu_catalog()
    gavel, pollux = gavel_rows(data_dir), pollux_rows(data_dir)
    fits = fit_efficiency(efficiency_points(gavel, pollux, catalog), catalog)
    clock_doc = read_json("clock_model.json")
    return Result(
        efficiency=tuple(fits),
        gavel=analyse_gavel(gavel, fits, catalog),
        pollux=analyse_pollux(load_pollux(pollux), catalog[POLLUX_GPU]),
        zeus=analyse_zeus(load_zeus(data_dir / "zeus"), clock_doc),
        clock_doc=clock_doc,
    )


def calibration_doc(r: Result, s: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON document written to models/calibration.json."""
    fits = []
    for e in s["efficiency"]:
        fits.append(
            {
                **e,
                "data": (
                    "data/gavel/isolated_throughputs.csv (1 GPU, packed)"
                    if e["family"] != "T4"
                    else "data/pollux/{"
                    + ",".join(sorted(e["networks"]))
                    + "}/placements.csv (placement 1)"
                ),
            }
        )
    pol = s["pollux"]
    return {
        "description": (
            "Constants of the analytic model fitted to measured data by `dsfro calibrate` "
            "(solver/offline/calibration/); docs/calibration.md is the report. "
            "solver.perfmodel.throughput reads "
            "compute_efficiency and network_efficiency, keyed by GPU family (a token the "
            "name starts with: solver.perfmodel.families)."
        ),
        "compute_efficiency": s["constants"]["compute_efficiency"],
        "network_efficiency": s["constants"]["network_efficiency"],
        "fallback": (
            "Families not listed under compute_efficiency keep "
            "solver.perfmodel.throughput.COMPUTE_EFFICIENCY "
            "(cited MFUs: A100, H100, H200, V100) or DEFAULT_COMPUTE_EFFICIENCY 0.30; families "
            "not listed under network_efficiency use the full line rate (1.0)."
        ),
        "fits": {
            "compute_efficiency": {
                "method": (
                    "per GPU type and precision: geometric mean over networks of the achieved "
                    "training FLOP/s at each network's largest measured batch (1 GPU) over the "
                    "peak of the arithmetic used; FLOPs per sample = 3 forward passes at 2 "
                    "FLOPs per multiply-accumulate (BERT: 6 x parameters x tokens)"
                ),
                "fits": fits,
            },
            "network_efficiency": {
                "value": pol["network_efficiency"],
                "data": "data/pollux/{bert,cifar10,imagenet,ncf,yolov3}/placements.csv",
                "method": (
                    "least squares over the rows that cross nodes of (modelled - measured "
                    "sync_time) / measured step_time, each application weighing the same; "
                    "log grid then golden section on [0.01, 1]"
                ),
                "model": (
                    "ring all-reduce of 4 B x parameters over efficiency x 50 Gbit/s / 4 GPUs "
                    "per node, less 2/3 of the 1-GPU step time"
                ),
                "rows": pol["rows_across_nodes"],
                "error": {
                    k: {
                        "step_time": v["step_after"],
                        "sync_time_over_step_time": v["sync_share_of_step_after"],
                    }
                    for k, v in pol["by_class"].items()
                    if k != "one node"
                },
            },
            "clock": {
                "file": "models/clock_model.json",
                "command": CLOCK_COMMAND,
                "alpha": s["constants"]["alpha"],
                "dynamic_fraction": s["constants"]["dynamic_fraction"],
                "error": s["zeus"]["all"],
            },
        },
        "command": COMMAND,
    }
