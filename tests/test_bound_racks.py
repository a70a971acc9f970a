"""The aggregated LP under rack power budgets: the split over racks per power class (one column
per class and rack) bounds exactly as the split per configuration, and its guide's per-job
splits add up to what the LP put in each rack."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import highspy
import numpy as np
import pytest

from solver.app import pipeline
from solver.app.convert import load_request_json
from solver.app.limits import Limits
from solver.domain import Cluster, Problem
from solver.perfmodel import budgets
from solver.perfmodel.configs import ConfigSet, build_config_set
from solver.scoring.objective import migration_cost, queued_value, running_gain
from solver.search.bound import LP_SAFETY, aggregate_columns, solve_aggregate
from solver.search.guide import split_over_racks
from tests import factories as f
from tests.bruteforce import brute_force

STORED = Path(__file__).resolve().parent.parent / "instances" / "hetero-power"


def _stored(name: str) -> Problem:
    """A stored power-bound instance, every job queued (the plain LP below has no running
    jobs' keep-or-migrate columns)."""
    request = load_request_json(STORED / f"{name}.json")
    p = pipeline.to_problem(request, Limits(max_time_budget_seconds=3600))
    return dataclasses.replace(p, jobs=tuple(dataclasses.replace(j, current=None) for j in p.jobs))


def per_configuration_split_bound(p: Problem, configs: ConfigSet) -> float:
    """The aggregated LP written plainly: every configuration's GPUs split over every rack of
    its type (a column each), rack GPU and rack power rows, the type pools and the budget."""
    cluster, w = p.cluster, p.weights
    best, max_watts = configs.best_samples_per_second, cluster.max_gpu_watts()
    cost: list[float] = []
    upper: list[float] = []
    rows: list[tuple[dict[int, float], float, float]] = []

    def column(c: float, hi: float) -> int:
        cost.append(c)
        upper.append(hi)
        return len(cost) - 1

    offset = 0.0
    pool: dict[str, dict[int, float]] = {}
    power: dict[int, float] = {}
    rack_gpus: dict[tuple[str, str], dict[int, float]] = {}
    rack_power: dict[str, dict[int, float]] = {}
    budgeted = cluster.rack_power_budgets_watts
    for job in p.jobs:
        offset += queued_value(job, w) - migration_cost(job, w)
        choose: dict[int, float] = {}
        for c in configs.by_job[job.name]:
            y = column(running_gain(job, c, best[job.name], w, max_watts), 1.0)
            choose[y] = 1.0
            pool.setdefault(c.gpu_type, {})[y] = float(c.num_gpus)
            power[y] = budgets.extra_watts(cluster, c)
            racks = sorted({n.rack for n in cluster.nodes if n.gpu_type == c.gpu_type})
            split = {y: -float(c.num_gpus)}
            for rack in racks:
                z = column(0.0, float(c.num_gpus))
                split[z] = 1.0
                if rack in budgeted:
                    rack_gpus.setdefault((rack, c.gpu_type), {})[z] = 1.0
                    rack_power.setdefault(rack, {})[z] = budgets.extra_watts_per_gpu(cluster, c)
            rows.append((split, 0.0, 0.0))
        rows.append((choose, -highspy.kHighsInf, 1.0))
    for gpu_type, terms in pool.items():
        cap = sum(n.available_gpus for n in cluster.nodes if n.gpu_type == gpu_type)
        rows.append((terms, -highspy.kHighsInf, float(cap)))
    room = budgets.power_room(cluster)
    if room is not None:
        rows.append((power, -highspy.kHighsInf, room))
    for (rack, gpu_type), terms in rack_gpus.items():
        cap = sum(
            n.available_gpus for n in cluster.nodes if (n.rack, n.gpu_type) == (rack, gpu_type)
        )
        rows.append((terms, -highspy.kHighsInf, float(cap)))
    for rack, room_r in budgets.rack_power_room(cluster).items():
        rows.append((rack_power.get(rack, {}), -highspy.kHighsInf, room_r))
    h = highspy.Highs()  # type: ignore[no-untyped-call]
    h.setOptionValue("output_flag", False)
    n = len(cost)
    h.addVars(n, np.zeros(n), np.array(upper))
    h.changeColsCost(n, np.arange(n, dtype=np.int32), np.array(cost))
    h.changeObjectiveSense(highspy.ObjSense.kMaximize)
    for terms, lo, hi in rows:
        idx = np.array(list(terms), dtype=np.int32)
        h.addRow(lo, hi, idx.size, idx, np.array(list(terms.values())))
    h.run()
    assert h.getModelStatus() == highspy.HighsModelStatus.kOptimal
    return float(h.getInfo().objective_function_value) + offset


@pytest.mark.parametrize("name", ["hetero-power-32-s1", "hetero-power-32-s3"])
def test_the_split_per_power_class_bounds_as_the_split_per_configuration(name: str) -> None:
    p = _stored(name)
    assert p.cluster.rack_power_budgets_watts, "the instance must have rack budgets"
    configs = build_config_set(p)
    outcome = solve_aggregate(p, configs)
    plain = per_configuration_split_bound(p, configs)
    assert outcome.best_bound is not None
    # equal, but for the safety margin the product adds to its bound (LP_SAFETY)
    margin = LP_SAFETY * abs(plain)
    assert plain - 1e-7 * abs(plain) <= outcome.best_bound <= plain + margin + 1e-7 * abs(plain)
    # and the LP is smaller than the per-configuration split by a wide margin
    racks = len({n.rack for n in p.cluster.nodes})
    assert aggregate_columns(p, configs) < configs.num_configurations * (1 + racks) / 2


def test_the_guides_rack_splits_fit_the_racks_and_the_jobs() -> None:
    p = _stored("hetero-power-32-s2")
    configs = build_config_set(p)
    outcome = solve_aggregate(p, configs)
    assert outcome.racks, "rack budgets bind here: the guide splits jobs over racks"
    per_rack_type: dict[tuple[str, str], float] = {}
    for job, split in outcome.racks.items():
        c = outcome.choice[job]
        assert sum(split.values()) <= c.num_gpus + 1e-6
        for rack, gpus in split.items():
            key = (rack, c.gpu_type)
            per_rack_type[key] = per_rack_type.get(key, 0.0) + gpus
    for (rack, gpu_type), gpus in per_rack_type.items():
        if rack not in p.cluster.rack_power_budgets_watts:
            continue
        have = sum(
            n.available_gpus for n in p.cluster.nodes if (n.rack, n.gpu_type) == (rack, gpu_type)
        )
        assert gpus <= have + 1e-6


def test_integral_rack_splits_tighten_the_bound_and_still_bound_the_optimum() -> None:
    # Stored instances with proven optima: optimum <= integral-split bound <= continuous bound.
    optima = {
        e["instance"]: float(e["objective"])
        for e in json.loads((STORED / "optima.json").read_text())["instances"]
        if e["proven_optimal"]
    }
    for name in ("hetero-power-32-s1", "hetero-power-32-s2"):
        request = load_request_json(STORED / f"{name}.json")
        p = pipeline.to_problem(request, Limits(max_time_budget_seconds=3600))
        configs = build_config_set(p)
        loose = solve_aggregate(p, configs, integer=True, time_limit=60)
        tight = solve_aggregate(p, configs, integer=True, time_limit=60, integral_racks=True)
        assert loose.best_bound is not None and tight.best_bound is not None
        assert tight.status == "OPTIMAL"
        # (equal bounds may differ in the last digits: the two MIPs sum in different orders)
        assert optima[f"{name}.json"] <= tight.best_bound <= loose.best_bound * (1 + 1e-12)


def two_racks(room: float) -> Cluster:
    """Racks r0 and r1 of one 4-GPU A100 node each (one clock), each with `room` W above idle."""
    idle = 4 * f.A100.idle_watts
    c = f.cluster(
        f.node("n0", count=4, rack="r0"),
        f.node("n1", count=4, rack="r1"),
        rack_power={"r0": idle + room, "r1": idle + room},
    )
    one_clock = dataclasses.replace(f.A100, sm_clocks_mhz=(f.A100.max_clock_mhz,))
    return dataclasses.replace(c, gpu_types={**c.gpu_types, f.A100.name: one_clock})


def test_integral_rack_splits_keep_a_gpu_whole_in_one_rack() -> None:
    # Two racks of one 4-GPU node, each with room above idle for 1.5 GPUs of the only
    # configuration (250 W above idle): split continuously, three jobs run (one half in each
    # rack); in whole GPUs, two.
    j = [f.job(f"j{i}", f.point(1, 10.0), min_gpus=1, max_gpus=1) for i in range(4)]
    p = f.problem(two_racks(room=375.0), *j)
    configs = build_config_set(p)
    assert {x.watts for x in configs.by_job["j0"]} == {300.0}, "one configuration per job"
    loose = solve_aggregate(p, configs, integer=True, time_limit=10)
    tight = solve_aggregate(p, configs, integer=True, time_limit=10, integral_racks=True)
    assert loose.best_bound is not None and tight.best_bound is not None
    assert len(loose.choice) == 3 and len(tight.choice) == 2
    assert tight.best_bound < loose.best_bound - 0.1


def test_integral_rack_splits_count_whole_tensor_groups() -> None:
    # Two racks of one 4-GPU node, each with room above idle for 3 GPUs. A job of 6 GPUs in
    # tensor groups of 2 fits 3 + 3 in whole GPUs, but a group never spans nodes: 2 + 2 is
    # all the racks hold in whole groups, so it cannot run.
    j = f.job("j", f.point(6, 60.0, tp=2), min_gpus=6, max_gpus=6)
    p = f.problem(two_racks(room=750.0), j)
    configs = build_config_set(p)
    assert [x.tensor_parallel for x in configs.by_job["j"]] == [2], "one configuration"
    loose = solve_aggregate(p, configs, integer=True, time_limit=10)
    tight = solve_aggregate(p, configs, integer=True, time_limit=10, integral_racks=True)
    assert loose.best_bound is not None and tight.best_bound is not None
    assert "j" in loose.choice and "j" not in tight.choice
    assert tight.best_bound < loose.best_bound - 0.1


def _kept_or_moved(rack_room: float) -> tuple[Problem, float]:
    """One job running on one GPU of rack r0, whose room above idle is `rack_room` W; rack r1
    has room for it (one configuration: 250 W above idle); the job's value when moved."""
    idle = 4 * f.A100.idle_watts
    c = f.cluster(
        f.node("n0", count=4, rack="r0"),
        f.node("n1", count=4, rack="r1"),
        rack_power={"r0": idle + rack_room, "r1": idle + 250.0},
    )
    one_clock = dataclasses.replace(f.A100, sm_clocks_mhz=(f.A100.max_clock_mhz,))
    c = dataclasses.replace(c, gpu_types={**c.gpu_types, f.A100.name: one_clock})
    j = f.job(
        "j", f.point(1, 10.0), min_gpus=1, max_gpus=1, current=f.running("A100", {"n0": (0,)})
    )
    p = f.problem(c, j)
    configs = build_config_set(p)
    [config] = configs.by_job["j"]
    best = configs.best_samples_per_second["j"]
    moved = queued_value(j, p.weights) - migration_cost(j, p.weights)
    moved += running_gain(j, config, best, p.weights, c.max_gpu_watts(), configs.least_joules("j"))
    return p, moved


@pytest.mark.parametrize("integer", [False, True])
def test_a_job_kept_on_its_gpus_draws_in_its_own_rack(integer: bool) -> None:
    # Rack r0 has no watts for the job: keeping it (no migration cost) is impossible, so the
    # bound is the moved job's value; the old model counted the kept job's watts in r1.
    p, moved = _kept_or_moved(rack_room=0.0)
    outcome = solve_aggregate(p, build_config_set(p), integer=integer, time_limit=10)
    assert outcome.best_bound is not None
    assert outcome.best_bound == pytest.approx(moved, abs=1e-5)
    # With the watts in r0, keeping it earns the migration back.
    p, moved = _kept_or_moved(rack_room=250.0)
    outcome = solve_aggregate(p, build_config_set(p), integer=integer, time_limit=10)
    assert outcome.best_bound is not None
    kept = moved + migration_cost(p.jobs[0], p.weights)
    assert outcome.best_bound == pytest.approx(kept, abs=1e-5)
    assert outcome.choice["j"].shape == p.jobs[0].current.shape  # type: ignore[union-attr]


@pytest.mark.parametrize("integer", [False, True])
def test_the_guide_splits_a_running_job_only_where_the_solution_moves_it(integer: bool) -> None:
    # Kept (its own column): no split, so the placement keeps it. Moved (r0 has no watts for
    # it): its split is where the solution counted its watts, r1.
    p, _ = _kept_or_moved(rack_room=250.0)
    assert "j" not in solve_aggregate(p, build_config_set(p), integer=integer).racks
    p, _ = _kept_or_moved(rack_room=0.0)
    outcome = solve_aggregate(p, build_config_set(p), integer=integer)
    assert outcome.racks["j"] == pytest.approx({"r1": 1.0})


@pytest.mark.parametrize("rack_watts", [500.0, 700.0])
@pytest.mark.parametrize("seed", range(24))
def test_kept_columns_still_bound_the_optimum(seed: int, rack_watts: float) -> None:
    # Random tiny problems whose first job runs on two GPUs in the budgeted rack r1 (idle
    # 280 W): the LP and the MIP (whole GPUs per rack) stay above the enumerated optimum. At
    # these budgets the kept columns lower the MIP's bound on 8-9 of the 24 seeds.
    p = f.random_tiny(seed)
    n1 = p.cluster.node("n1")
    current = f.running("A100", {"n1": n1.available_gpu_indices[:2]})
    jobs = (dataclasses.replace(p.jobs[0], current=current), *p.jobs[1:])
    c = dataclasses.replace(p.cluster, rack_power_budgets_watts={"r1": rack_watts})
    p = dataclasses.replace(p, cluster=c, jobs=jobs)
    configs = build_config_set(p)
    optimum = brute_force(p, configs)
    lp = solve_aggregate(p, configs)
    mip = solve_aggregate(p, configs, integer=True, time_limit=10, integral_racks=True)
    if optimum == float("-inf"):  # no plan at all (a non-preemptible job cannot stay)
        return
    assert lp.best_bound is not None and mip.best_bound is not None
    assert mip.best_bound >= optimum - 1e-9 * max(1.0, abs(optimum))
    assert lp.best_bound >= mip.best_bound - 1e-9 * max(1.0, abs(optimum))


def test_a_job_takes_the_tightest_rack_that_holds_it_whole() -> None:
    left = {"r0": 10.0, "r1": 4.0, "r2": 3.0}
    assert split_over_racks(4.0, 2, left) == {"r1": 4.0}
    assert left == {"r0": 10.0, "r1": 0.0, "r2": 3.0}


def test_a_job_no_rack_holds_takes_whole_tensor_groups_from_the_fullest_racks() -> None:
    # Before: 3 GPUs from r0 and 1 from r1, half a group in each, so the placement's rounding
    # put a group where the model had one GPU, and the rack's watts with it.
    left = {"r0": 3.0, "r1": 3.0, "r2": 1.0}
    assert split_over_racks(4.0, 2, left) == {"r0": 2.0, "r1": 2.0}
    assert left == {"r0": 1.0, "r1": 1.0, "r2": 1.0}


def test_what_whole_groups_cannot_cover_comes_from_what_is_left() -> None:
    left = {"r0": 3.0, "r1": 1.0}
    assert split_over_racks(4.0, 2, left) == {"r0": 3.0, "r1": 1.0}
    assert left == {"r0": 0.0, "r1": 0.0}
