"""The search state's placement under rack power budgets (solver.search.state.SearchState),
against a plain statement of its rule."""

from __future__ import annotations

import random

from solver.domain import Config, Problem
from solver.perfmodel.budgets import extra_watts_per_gpu, rack_floor_watts
from solver.perfmodel.configs import build_config_set
from solver.search.state import POWER_SLACK, SearchState
from tests.factories import A100, V100, cluster, job, node, point, problem
from tests.test_placement import reference_place


def reference_fit_anew(state: SearchState, config: Config) -> dict[str, int] | None:
    """Best fit; while a rack it touches lacks the watts, the same with every such rack's free
    GPUs hidden; the first placement whose racks all have the watts, else the first one."""
    p = state.problem
    budgets = p.cluster.rack_power_budgets_watts
    per_gpu = extra_watts_per_gpu(p.cluster, config)
    free = {n.name: state.placer.free(n.name) for n in p.cluster.nodes}
    args = (config.gpu_type, config.num_gpus, config.tensor_parallel)
    first = reference_place(p.cluster, free, *args)
    placed = first
    while placed is not None:
        delta: dict[str, float] = {}
        for name, k in placed.items():
            rack = next(n.rack for n in p.cluster.nodes if n.name == name)
            delta[rack] = delta.get(rack, 0.0) + per_gpu * k
        short = {
            r
            for r, d in delta.items()
            if r in budgets
            and state.idle_rack[r] + state.rack_watts.get(r, 0.0) + d - budgets[r] > POWER_SLACK
        }
        if not short:
            return placed
        for n in p.cluster.nodes:
            if n.rack in short:
                free[n.name] = 0
        placed = reference_place(p.cluster, free, *args)
    return first


def _problem(rng: random.Random) -> Problem:
    """Racks of A100 and V100 nodes, most with a power budget a few jobs fill."""
    nodes = [
        node(f"n{i}", rng.choice([A100, V100]), rng.choice([4, 8]), f"r{rng.randrange(8)}")
        for i in range(36)
    ]
    floors = rack_floor_watts(cluster(*nodes))
    rack_power = {
        r: f + rng.uniform(200.0, 2500.0) for r, f in floors.items() if rng.random() < 0.8
    }
    jobs = [
        job(
            f"j{i}",
            *(
                point(g, 10.0 * g, w * g, gpu=gpu)
                for gpu, w in ((A100, 300.0), (V100, 220.0))
                for g in (1, 2, 4, 8, 16)
            ),
            max_gpus=16,
        )
        for i in range(6)
    ]
    return problem(cluster(*nodes, rack_power=rack_power), *jobs)


def test_fit_anew_is_best_fit_away_from_racks_short_of_watts() -> None:
    rng = random.Random(11)
    for _ in range(6):
        p = _problem(rng)
        configs = [c for cs in build_config_set(p).by_job.values() for c in cs]
        state = SearchState(p)
        short_skipped = 0
        for step in range(400):
            c = rng.choice(configs)
            got = state.fit_anew(c)
            assert got == reference_fit_anew(state, c), f"step {step}: {c}"
            if got is not None and state.within_budgets(c, got) and rng.random() < 0.3:
                state.take(f"x{step}", c, got)
            plain = state.placer.place(c.gpu_type, c.num_gpus, c.tensor_parallel)
            short_skipped += got is not None and got != plain
        assert short_skipped > 0  # the racks short of watts were met and passed over
