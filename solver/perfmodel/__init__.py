"""The performance and power model: GPU and architecture catalog, throughput and power
predictions, and the configurations (GPU type x parallelism x clock) a job may run in."""

from __future__ import annotations

from solver.perfmodel import catalog, power, throughput
from solver.perfmodel.catalog import CatalogError


def load_all() -> None:
    """Load and validate every file of ``models/``: the GPU and model catalogs and the fitted
    constants of the performance and power models (``calibration.json``, ``clock_model.json``).

    The service calls it before it reports SERVING; a missing or bad file raises CatalogError
    naming it. The fitted constants stay cached (per models folder) for the solves.
    """
    catalog.load_gpu_catalog()
    catalog.load_architectures()
    throughput.load_calibration()
    power.load_clock_model()


__all__ = ["CatalogError", "load_all"]
