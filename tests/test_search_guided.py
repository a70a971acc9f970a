"""Guided placement of an aggregated choice in the racks of its split (Heuristic.guided)."""

from __future__ import annotations

import dataclasses

import pytest

from solver.perfmodel.configs import build_config_set
from solver.search import heuristic
from solver.search.heuristic import Heuristic
from tests import factories as f


def test_a_job_whose_racks_cannot_hold_it_waits_for_the_jobs_whose_racks_can() -> None:
    # Three racks of one 4-GPU node; 250 W above idle per GPU. r0 has no watts, r1 has them
    # for 4 GPUs, r2 for 2. The guide puts A (2 GPUs, the densest) in r0, wrongly, and B (4)
    # in r1. Placed anywhere at once, A took r1 and B fitted nowhere; waiting, A goes to r2.
    idle = 4 * f.A100.idle_watts
    c = f.cluster(
        f.node("n0", count=4, rack="r0"),
        f.node("n1", count=4, rack="r1"),
        f.node("n2", count=4, rack="r2"),
        rack_power={"r0": idle, "r1": idle + 1000.0, "r2": idle + 500.0},
    )
    one_clock = dataclasses.replace(f.A100, sm_clocks_mhz=(f.A100.max_clock_mhz,))
    c = dataclasses.replace(c, gpu_types={**c.gpu_types, f.A100.name: one_clock})
    a = f.job("A", f.point(2, 100.0), min_gpus=2, max_gpus=2)
    b = f.job("B", f.point(4, 40.0), min_gpus=4, max_gpus=4)
    p = f.problem(c, a, b)
    configs = build_config_set(p)
    choice = {j: configs.by_job[j][0] for j in ("A", "B")}
    assert all(len(configs.by_job[j]) == 1 for j in choice), "one configuration each"
    state = Heuristic(p, configs).guided(choice, {"A": {"r0": 2.0}, "B": {"r1": 4.0}})
    assert set(state.choices) == {"A", "B"}
    assert state.choices["B"][1] == {"n1": 4}
    assert state.choices["A"][1] == {"n2": 2}


def test_larger_tensor_groups_are_placed_first_so_small_jobs_do_not_break_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # One rack: a node with 3 free GPUs and one with 2; A needs 1 GPU (the densest), B two
    # groups of 2 (tensor parallel 2). A first, best fit, takes a GPU of the 2-GPU node and
    # leaves B one group's room; B's groups first, both start (5 GPUs for 5). The repack of
    # the type, which rescues this small case, is left out: at 1,024 nodes it did not.
    monkeypatch.setattr(heuristic, "repack_unplaced", lambda *args: None)
    c = f.cluster(f.node("n0", count=3, rack="r0"), f.node("n1", count=2, rack="r0"))
    a = f.job("A", f.point(1, 100.0), min_gpus=1, max_gpus=1)
    b = f.job("B", f.point(4, 40.0, tp=2), min_gpus=4, max_gpus=4)
    p = f.problem(c, a, b)
    configs = build_config_set(p)
    top = f.A100.max_clock_mhz
    [ca] = [x for x in configs.by_job["A"] if x.sm_clock_mhz == top]
    [cb] = [x for x in configs.by_job["B"] if x.sm_clock_mhz == top and x.tensor_parallel == 2]
    state = Heuristic(p, configs).guided({"A": ca, "B": cb}, {"A": {"r0": 1.0}, "B": {"r0": 4.0}})
    assert state.choices["B"] == (cb, {"n0": 2, "n1": 2})
    assert state.choices["A"] == (ca, {"n0": 1})
