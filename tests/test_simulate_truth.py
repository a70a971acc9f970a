"""The truth model's fastest pace and most frugal cost (solver.simulate.truth.Truth
.fastest_rate, .least_joules_per_sample): the JCT floor of scripts/jct_floor.py and the energy
floor of scripts/energy_floor.py."""

from __future__ import annotations

import dataclasses

import pytest

from solver.domain import ProfilePoint, ThroughputProfile
from solver.simulate.core import SimJob, TraceJob
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


def _two_point_job(name: str, *, least_gpus: int) -> SimJob:
    """Measured on 1 GPU at 10 samples/s and 100 W, on 2 at 15 samples/s and 200 W (10 and
    13.3 J a sample); asks for 2 GPUs, may take `least_gpus` to 2."""
    points = (
        ProfilePoint("G", 1, 1, 1, 1000, 10.0, 100.0, 10.0),
        ProfilePoint("G", 2, 1, 1, 1000, 15.0, 200.0, 10.0),
    )
    trace = TraceJob(name, 0.0, "t", "measured", 2, 100.0)
    return SimJob(trace, ThroughputProfile(points), "measured", least_gpus, 2, measured=True)


def test_the_least_joules_per_sample_is_the_most_frugal_shape_and_bounds_a_run() -> None:
    """The energy floor of scripts/energy_floor.py: no run of the job spends less a sample."""
    elastic, rigid = _two_point_job("elastic", least_gpus=1), _two_point_job("rigid", least_gpus=2)
    settings = EngineSettings(truth=EXACT, reference_gpu_type="G")
    sim = Simulation(two_gpu_cluster(nodes=2), [elastic, rigid], FirstFit(), settings=settings)
    assert sim.truth.least_joules_per_sample(elastic) == pytest.approx(10.0)
    assert sim.truth.least_joules_per_sample(rigid) == pytest.approx(200.0 / 15.0)
    # (seconds, joules) per sample of each configuration: 2 GPUs faster, 1 GPU more frugal.
    flat = [x for point in sorted(sim.truth.costs(elastic)) for x in point]
    assert flat == pytest.approx([1 / 15, 200 / 15, 0.1, 10.0])
    assert [x for point in sim.truth.costs(rigid) for x in point] == pytest.approx(
        [1 / 15, 200 / 15]
    )
    # First fit runs each as asked, on 2 GPUs: the rigid job at its floor, the elastic above.
    spent = {j.job_id: j.energy_j / j.samples for j in sim.run().jobs}
    assert spent["rigid"] == pytest.approx(200.0 / 15.0)
    assert spent["elastic"] == pytest.approx(200.0 / 15.0)
    assert all(
        spent[j.name] >= sim.truth.least_joules_per_sample(j) - 1e-9 for j in (elastic, rigid)
    )
