"""Best-fit placement (solver.search.placement.Placer) against a plain statement of its rule."""

from __future__ import annotations

import random

import numpy as np
import pytest

from solver.domain import Cluster, Node
from solver.search.placement import Placer
from tests.factories import A100, V100, cluster, node


def reference_place(
    cluster: Cluster, free: dict[str, int], gpu_type: str, num_gpus: int, tp: int
) -> dict[str, int] | None:
    """The tightest node that holds the job (first in cluster order among equals); else of the
    racks that do, the one whose roomiest nodes hold it in the fewest nodes (unless a rack of
    the type has a power budget), the tightest of those (first by name among equals), from
    its roomiest nodes; else racks from the roomiest."""
    nodes = [n for n in cluster.nodes if n.gpu_type == gpu_type]
    if not nodes:
        return None
    room = {n.name: free[n.name] // tp * tp for n in nodes}
    fitting = [n.name for n in nodes if room[n.name] >= num_gpus]
    if fitting:
        return {min(fitting, key=lambda name: room[name]): num_gpus}
    racks = sorted({n.rack for n in nodes})
    rack_room = {r: sum(room[n.name] for n in nodes if n.rack == r) for r in racks}
    if sum(rack_room.values()) < num_gpus:
        return None
    holding = [r for r in racks if rack_room[r] >= num_gpus]

    def nodes_needed(rack: str) -> int:
        if any(r in cluster.rack_power_budgets_watts for r in racks):
            return 0
        rooms = sorted((room[n.name] for n in nodes if n.rack == rack), reverse=True)
        return next(k for k in range(1, len(rooms) + 1) if sum(rooms[:k]) >= num_gpus)

    order = (
        [min(holding, key=lambda r: (nodes_needed(r), rack_room[r]))]
        if holding
        else sorted(racks, key=lambda r: -rack_room[r])
    )
    counts: dict[str, int] = {}
    need = num_gpus
    for r in order:
        members = [n.name for n in nodes if n.rack == r and room[n.name] > 0]
        for name in sorted(members, key=lambda name: -room[name]):
            counts[name] = min(room[name], need)
            need -= counts[name]
            if need == 0:
                return counts
    return None


def random_nodes(rng: random.Random, racks: int) -> list[Node]:
    """40 nodes of 4 or 8 A100s or V100s over `racks` racks."""
    return [
        node(f"n{i}", rng.choice([A100, V100]), rng.choice([4, 8]), f"r{rng.randrange(racks)}")
        for i in range(40)
    ]


@pytest.mark.parametrize("rack_power", [None, {"r1": 10_000.0}])
def test_place_follows_the_best_fit_rule_through_takes_and_gives(
    rack_power: dict[str, float] | None,
) -> None:
    rng = random.Random(3)
    nodes = random_nodes(rng, 5)
    c = cluster(*nodes, rack_power=rack_power)
    placer = Placer(c)
    taken: list[dict[str, int]] = []
    for _ in range(3000):
        if taken and rng.random() < 0.4:
            placer.give(taken.pop(rng.randrange(len(taken))))
            continue
        tp = rng.choice([1, 1, 2, 4, 8])
        gpus = tp * rng.choice([1, 1, 2, 3, 4, 8])
        gpu = rng.choice([A100, V100]).name
        free = {n.name: placer.free(n.name) for n in nodes}
        got = placer.place(gpu, gpus, tp)
        assert got == reference_place(c, free, gpu, gpus, tp)
        if got is not None:
            assert placer.fits(got)
            placer.take(got)
            taken.append(got)


def test_a_job_over_nodes_goes_where_it_spans_the_fewest() -> None:
    """Rack r1 is the tightest that holds 16 GPUs (7 + 1 + 8 free), but r2's two empty nodes
    hold them on two nodes: r2, and r1's fragments stay for smaller jobs."""
    c = cluster(
        node("a", count=8, rack="r1"),
        node("b", count=8, rack="r1"),
        node("c", count=8, rack="r1"),
        node("d", count=8, rack="r2"),
        node("e", count=8, rack="r2"),
        node("f", count=8, rack="r2"),
    )
    placer = Placer(c, free={"a": 7, "b": 1, "c": 8, "d": 8, "e": 8, "f": 4})
    assert placer.place(A100.name, 16, 1) == {"d": 8, "e": 8}
    # Where no rack does better, the tightest as before.
    placer = Placer(c, free={"a": 7, "b": 1, "c": 8, "d": 8, "e": 7, "f": 4})
    assert placer.place(A100.name, 16, 1) == {"c": 8, "a": 7, "b": 1}
    # Where racks of the type have power budgets, the tightest rack.
    budgeted = cluster(*c.nodes, rack_power={"r2": 5000.0})
    placer = Placer(budgeted, free={"a": 7, "b": 1, "c": 8, "d": 8, "e": 8, "f": 4})
    assert placer.place(A100.name, 16, 1) == {"c": 8, "a": 7, "b": 1}


def test_unknown_type_and_full_cluster() -> None:
    placer = Placer(cluster(node("a", count=4)))
    assert placer.place("H100", 1, 1) is None
    assert placer.place(A100.name, 4, 2) == {"a": 4}
    placer.take({"a": 4})
    assert placer.place(A100.name, 1, 1) is None


def test_place_outside_hidden_racks_is_best_fit_over_the_others() -> None:
    rng = random.Random(5)
    nodes = random_nodes(rng, 6)
    c = cluster(*nodes)
    placer = Placer(c)
    for _ in range(50):  # some GPUs taken, so racks differ in room
        got = placer.place(rng.choice([A100, V100]).name, rng.choice([1, 2, 4]), 1)
        if got is not None:
            placer.take(got)
    for _ in range(1000):
        gpu = rng.choice([A100, V100]).name
        tp = rng.choice([1, 2, 4])
        gpus = tp * rng.choice([1, 2, 3, 4])
        racks = placer.rack_names(gpu)
        hidden = np.array([rng.random() < 0.4 for _ in racks], dtype=bool)
        hidden_names = {r for r, h in zip(racks, hidden, strict=True) if h}
        free = {n.name: 0 if n.rack in hidden_names else placer.free(n.name) for n in nodes}
        assert placer.place(gpu, gpus, tp, hidden) == reference_place(c, free, gpu, gpus, tp)
        room = placer.rack_room(gpu, tp)
        for r, got_room in zip(racks, room, strict=True):
            members = [n for n in nodes if n.gpu_type == gpu and n.rack == r]
            assert got_room == sum(placer.free(n.name) // tp * tp for n in members)
