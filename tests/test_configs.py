"""Configuration enumeration: the batched model, the array Pareto filter and the shared
enumerations give exactly what the per-point model and the pair-by-pair filter give."""

from __future__ import annotations

import gc
import itertools
import pickle
import random
from pathlib import Path

import numpy as np
import pytest

from solver.app.convert import load_request_json, problem_from_proto
from solver.app.limits import Limits
from solver.domain import Config, Problem, Shape
from solver.offline.generate import generate, spec_from_args
from solver.perfmodel import bulk, configs, throughput
from solver.perfmodel.catalog import load_architectures, load_gpu_catalog
from solver.perfmodel.facts import divisors, type_facts
from solver.perfmodel.grid import estimate_grid
from tests import reference_configs as reference

ROOT = Path(__file__).resolve().parent.parent
INSTANCES = sorted(p.stem for p in (ROOT / "instances").glob("*.json"))
GPUS = load_gpu_catalog()
ARCHS = load_architectures()


def load(name: str) -> Problem:
    return problem_from_proto(load_request_json(ROOT / "instances" / f"{name}.json"), Limits())


def generated(family: str, seed: int) -> Problem:
    request = generate(spec_from_args(["--family", family, "--seed", str(seed)]))
    return problem_from_proto(request, Limits(max_time_budget_seconds=600))


def assert_same(got: configs.ConfigSet, want: configs.ConfigSet) -> None:
    assert list(got.by_job) == list(want.by_job)
    for job, expected in want.by_job.items():
        assert got.by_job[job] == expected, job  # dataclass equality: floats bit for bit
        assert all(c.job == job for c in got.by_job[job])
    assert got.best_samples_per_second == want.best_samples_per_second
    assert got.num_enumerated == want.num_enumerated


@pytest.mark.parametrize("calibration", [None, throughput.UNCALIBRATED])
@pytest.mark.parametrize("gpu", ["A100-80GB", "H100-80GB", "V100-16GB", "T4", "K80"])
def test_grid_is_the_point_model(gpu: str, calibration: throughput.Calibration | None) -> None:
    """Every shape up to 64 GPUs, every offered clock, with and without the memory check,
    inside one node and across nodes: the same floats as throughput.estimate, None where it is."""
    g = GPUS[gpu]
    clocks = configs.offered_clocks(g)
    points = [
        (dp, tp, pp, clock, check)
        for n in (1, 2, 3, 4, 6, 8, 12, 16, 32, 64)
        for tp in divisors(n, 8)
        for pp in divisors(n // tp, 16)
        for dp in [n // (tp * pp)]
        for clock in clocks
        for check in (True, False)
    ]
    dp, tp, pp, clock, check = (np.array(column) for column in zip(*points, strict=True))
    for spec, (per_node, network) in itertools.product(ARCHS.values(), [(8, 200.0), (4, 25.0)]):
        grid = estimate_grid(
            spec,
            g,
            dp,
            tp,
            pp,
            clock,
            check,
            gpus_per_node=per_node,
            network_bandwidth_gbps=network,
            calibration=calibration,
        )
        for i, (d, t, p, f, c) in enumerate(points):
            want = throughput.estimate(
                spec,
                g,
                Shape(gpu, d, t, p),
                f,
                gpus_per_node=per_node,
                network_bandwidth_gbps=network,
                check_memory=c,
                calibration=calibration,
            )
            assert bool(grid.valid[i]) == (want is not None)
            if want is not None:
                got = (grid.samples_per_second[i], grid.watts[i], grid.memory_per_gpu_gib[i])
                assert got == (want.samples_per_second, want.watts, want.memory_per_gpu_gib)


def test_grid_rejects_what_the_point_model_rejects() -> None:
    g, spec = GPUS["A100-80GB"], ARCHS["gpt3-1.3b"]
    one = np.array([1])
    with pytest.raises(ValueError):
        estimate_grid(
            spec, g, one, one, one, np.array([5000]), np.array([True]),
            gpus_per_node=8, network_bandwidth_gbps=200,
        )  # fmt: skip
    with pytest.raises(ValueError):
        estimate_grid(
            spec, g, one * 0, one, one, np.array([1410]), np.array([True]),
            gpus_per_node=8, network_bandwidth_gbps=200,
        )  # fmt: skip


@pytest.mark.parametrize("name", INSTANCES)
def test_bundled_instances_enumerate_as_the_point_model(name: str) -> None:
    problem = load(name)
    assert_same(configs.build_config_set(problem), reference.build_config_set(problem))


@pytest.mark.parametrize(("family", "seed"), [("small", 1), ("medium", 1), ("medium", 2)])
def test_generated_families_enumerate_as_the_point_model(family: str, seed: int) -> None:
    problem = generated(family, seed)
    facts = type_facts(problem.cluster)
    assert_same(configs.build_config_set(problem, facts), reference.build_config_set(problem))


def test_large_family_enumerates_as_the_point_model() -> None:
    """2,048 jobs, of which many share a workload: the shared enumerations as well."""
    problem = generated("large", 1)
    assert_same(configs.build_config_set(problem), reference.build_config_set(problem))


@pytest.mark.parametrize("name", ["pai", "modern-power"])
def test_unfiltered_enumeration_and_resolution_agree(name: str) -> None:
    problem = load(name)
    facts = type_facts(problem.cluster)
    for job in problem.jobs:
        got = configs.enumerate_configs(job, facts)
        assert got == reference.enumerate_configs(job, facts)
        for c in got:  # the point path (EvaluatePlan) resolves each to the same configuration
            assert configs.resolve_config(problem, job, c.shape, c.sm_clock_mhz, facts) == c


def test_pareto_filter_is_the_pairwise_filter() -> None:
    """Random configurations with many ties in throughput, power and GPUs, with and without a
    running shape to keep: the same survivors in the same order as the sequential filter."""
    rng = random.Random(7)
    for _ in range(300):
        cs = []
        for _ in range(rng.randint(0, 30)):
            tp, pp = rng.choice([1, 2, 4]), rng.choice([1, 2])
            shape = Shape(rng.choice(["A", "B"]), rng.choice([1, 2, 4]), tp, pp)
            cs.append(
                Config(
                    "j",
                    shape,
                    rng.choice([1000, 1200, 1400]),
                    float(rng.randint(1, 6)),
                    float(rng.randint(1, 6)),
                    1.0,
                    rng.randint(1, 3),
                    1,
                )
            )
        keep = rng.choice([None, *(c.shape for c in cs)])
        assert configs.pareto_filter(cs, keep) == reference.pareto_filter(cs, keep)


def test_collector_pause_nests_and_restores() -> None:
    assert gc.isenabled()
    with bulk.collector_paused():
        with bulk.collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with bulk.collector_paused():
            pass
        assert not gc.isenabled()  # left as the caller had it
    finally:
        gc.enable()


def test_config_sets_pickle_as_columns_to_the_same_values() -> None:
    """Decomposed solves pickle configuration sets across processes: same configurations,
    same float bits, same field types; the collector is back on afterwards."""
    built = configs.build_config_set(load("modern-power"))
    odd = Config("not-the-key", Shape("A100", 2, 1, 1), 1410, 0.1 + 0.2, 1e-300, 3.5, 1, 1, True)
    for original in (
        built,
        configs.ConfigSet({"j": (odd,), "empty": ()}, {"j": 1.0, "empty": 0.0}, 3),
        configs.ConfigSet({}, {}, 0),
    ):
        copy = pickle.loads(pickle.dumps(original))
        assert copy == original and list(copy.by_job) == list(original.by_job)
        for got, want in zip(
            (c for cs in copy.by_job.values() for c in cs),
            (c for cs in original.by_job.values() for c in cs),
            strict=True,
        ):
            for name in Config._fields:
                a, b = getattr(got, name), getattr(want, name)
                assert type(a) is type(b) and a == b
    assert gc.isenabled()
