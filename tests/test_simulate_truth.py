"""The truth model's fastest pace (solver.simulate.truth.Truth.fastest_rate): the JCT floor of
scripts/jct_floor.py."""

from __future__ import annotations

import dataclasses

import pytest

from solver.simulate.engine import Simulation
from solver.simulate.settings import EngineSettings
from tests.test_simulate_engine import EXACT, FirstFit, measured_job, two_gpu_cluster


def test_the_fastest_rate_takes_the_most_gpus_the_job_may_have() -> None:
    # Measured at 10 samples/s per GPU on 1 or 2 GPUs (the measurement is the truth).
    fixed = measured_job("fixed", 0.0, 100.0)
    growing = dataclasses.replace(measured_job("growing", 0.0, 100.0), max_gpus=2)
    settings = EngineSettings(truth=EXACT, reference_gpu_type="G")
    sim = Simulation(two_gpu_cluster(), [fixed, growing], FirstFit(), settings=settings, seed=1)
    assert sim.truth.fastest_rate(fixed) == pytest.approx(10.0)
    assert sim.truth.fastest_rate(growing) == pytest.approx(20.0)
    # The floor: 100 s of work on one GPU, done in 50 s on two.
    assert sim.samples_to_train("growing") / sim.truth.fastest_rate(growing) == pytest.approx(50.0)
