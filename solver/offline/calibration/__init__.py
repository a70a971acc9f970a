"""Calibration of the analytic performance and power model against public measurements.

``dsfro calibrate`` compares ``solver.perfmodel.throughput`` and ``solver.perfmodel.power``
with three measured sources,
fits the model's free constants to them and writes

- ``models/calibration.json``: the fitted constants that ``solver.perfmodel.throughput`` reads, with
  provenance
  (data files, method, error) and the fits that the service does not use, with the reason;
- ``docs/calibration.md``: the report (errors per source, what cannot be fitted and why), with a
  machine-readable block of every number in it;
- ``docs/img/calibration-*.png``: the figures.

Sources (``data/*/SOURCE.md``):

- Gavel: throughput of seven networks on K80, P100 and V100 at 1-8 GPUs. Fits the compute
  efficiency per GPU type and checks the throughput ratios across types and GPU counts.
- Pollux: step and gradient-sync times on 4-GPU T4 nodes for every placement up to 16 GPUs.
  Fits the T4 compute efficiency and the network efficiency of the data-parallel all-reduce.
- Zeus: time and power over the power limit on four GPUs. The clock model's constants are
  fitted by ``scripts/fit_clock_model.py`` (``models/clock_model.json``); this package holds the
  model and the per-workload fit that script uses, and reports the error at the file's
  constants.

Everything is deterministic numpy (grids, golden-section search, closed forms).

Modules:

- ``sources``: where the data is and how it maps onto the model (GPU types, FLOPs, precision);
- ``numeric``: error statistics and the golden-section search;
- ``efficiency``: the compute efficiency per GPU type (Gavel and Pollux 1-GPU runs);
- ``gavel``: throughput ratios across GPU types and GPU counts;
- ``pollux``: scaling over GPU count and placement, the network efficiency;
- ``zeus``: the clock model and its per-workload fit;
- ``fit``: every fit together (``run``) and the ``models/calibration.json`` document;
- ``comparison``: before and after the fit, per source and in the service's estimates;
- ``summary``: every number of the report, as JSON;
- ``report``, ``report_gavel``, ``report_pollux``, ``markdown``: docs/calibration.md;
- ``figures``: the report's figures;
- ``cli``: the ``dsfro calibrate`` command (also ``python -m solver.offline.calibration``).
"""

from solver.offline.calibration.cli import add_commands, cmd_calibrate, main
from solver.offline.calibration.efficiency import EfficiencyFit, EfficiencyPoint, fit_efficiency
from solver.offline.calibration.figures import FIGURES, make_figures, write_figures
from solver.offline.calibration.fit import Result, calibration_doc, run
from solver.offline.calibration.gavel import GavelResult, analyse_gavel
from solver.offline.calibration.pollux import (
    PolluxData,
    PolluxResult,
    analyse_pollux,
    fit_network_efficiency,
    pollux_predict,
)
from solver.offline.calibration.report import parse_markdown, render_markdown
from solver.offline.calibration.sources import (
    LM_MACS_PER_TOKEN,
    RESNET18_CIFAR_MACS,
    RESNET50_MACS,
    TRAIN_FLOPS_PER_SAMPLE,
)
from solver.offline.calibration.summary import summary
from solver.offline.calibration.zeus import ZeusResult, analyse_zeus

__all__ = [
    "FIGURES",
    "LM_MACS_PER_TOKEN",
    "RESNET18_CIFAR_MACS",
    "RESNET50_MACS",
    "TRAIN_FLOPS_PER_SAMPLE",
    "EfficiencyFit",
    "EfficiencyPoint",
    "GavelResult",
    "PolluxData",
    "PolluxResult",
    "Result",
    "ZeusResult",
    "add_commands",
    "analyse_gavel",
    "analyse_pollux",
    "analyse_zeus",
    "calibration_doc",
    "cmd_calibrate",
    "fit_efficiency",
    "fit_network_efficiency",
    "main",
    "make_figures",
    "parse_markdown",
    "pollux_predict",
    "render_markdown",
    "run",
    "summary",
    "write_figures",
]
