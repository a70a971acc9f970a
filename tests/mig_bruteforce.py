"""Exhaustive enumeration of tiny MIG snapshots (tests/test_exact_mig.py): every job queued,
whole on one GPU, or on any instance place of any GPU; each GPU's layout then the snapshot's
when it holds the jobs' places, else exactly those places (or whole), judged by the checker."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import random

from solver.domain import Config, GpuSlice, JobAssignment, JobState, Problem, SolveOptions
from solver.mig import GpuLayout, LayoutChange, MigInstance, SliceRequest, layout_problems
from solver.perfmodel.configs import ConfigSet, build_config_set
from solver.scoring.checker import check_plan
from solver.scoring.objective import is_migrated, score_plan
from solver.scoring.plans import materialize
from tests.mig_cases import GEOMETRY, on_instance, problem, small

Option = tuple[str, Config, int, tuple[str, int] | None] | None
"""None queued; ("whole", config, gpu count, None) or ("slice", config, gpu, place)."""


def random_mig(seed: int) -> Problem:
    """One node of 2 A100-80GB GPUs, 3 jobs of 1g.10gb (or 2g.20gb) slices, one maybe running
    on an instance of GPU 0, maybe a power budget."""
    rng = random.Random(seed)
    jobs = []
    layouts: tuple[GpuLayout, ...] = ()
    for k in range(3):
        largest = rng.choice(["1g.10gb", "2g.20gb"])
        bound = SliceRequest(largest, largest)
        measured = rng.choice([None, 20.0, 45.0])
        jobs.append(small(f"j{k}", measured=measured, slices=bound))
    if rng.random() < 0.6:
        prof = jobs[0].slices.largest_profile if jobs[0].slices else "1g.10gb"
        cur = on_instance("n0", 0, prof, 0)
        jobs[0] = dataclasses.replace(jobs[0], current=cur, preemptible=rng.random() < 0.5)
        extra = (MigInstance("1g.10gb", 6),) if rng.random() < 0.5 else ()
        layouts = (GpuLayout(0, (MigInstance(prof, 0, "j0"), *extra)),)
    power = rng.choice([None, 900.0])
    p = problem(*jobs, gpus=2, layouts=layouts, power=power)
    return dataclasses.replace(p, options=SolveOptions(threads=1))


def top_clock(configs: ConfigSet) -> ConfigSet:
    """Only the configurations at 1410 MHz (a small enumeration)."""
    by_job = {j: tuple(c for c in cs if c.sm_clock_mhz == 1410) for j, cs in configs.by_job.items()}
    slices = {j: tuple(c for c in cs if c.sm_clock_mhz == 1410) for j, cs in configs.slices.items()}
    return ConfigSet(by_job, configs.best_samples_per_second, configs.num_enumerated, slices)


def brute_force_mig(p: Problem, configs: ConfigSet) -> float:
    """The best checked objective over every plan of the enumeration (module docstring)."""
    node = p.cluster.nodes[0]
    now = {x.gpu_index: frozenset(i.place for i in x.instances) for x in node.mig_layouts}
    places = [(q.name, s) for q in GEOMETRY.plannable() for s in q.starts]
    options: list[list[Option]] = []
    for j in p.jobs:
        opts: list[Option] = [None]
        opts += [("whole", c, c.num_gpus, None) for c in configs.by_job.get(j.name, ())]
        for c in configs.slices.get(j.name, ()):
            for g in node.available_gpu_indices:
                opts += [("slice", c, g, pl) for pl in places if pl[0] == c.mig_profile]
        options.append(opts)
    best = float("-inf")
    for combo in itertools.product(*options):
        used: dict[int, set[tuple[str, int]]] = {}
        whole = 0
        for o in combo:
            if o is not None and o[0] == "slice":
                assert o[3] is not None
                used.setdefault(o[2], set()).add(o[3])
            elif o is not None:
                whole += o[2]
        if any(layout_problems(GEOMETRY, [MigInstance(*x) for x in u]) for u in used.values()):
            continue
        for free_whole in itertools.product([False, True], repeat=node.gpu_count):
            value = _score(p, configs, combo, used, now, free_whole, whole)
            best = max(best, value)
    return best


def _score(p: Problem, configs: ConfigSet, combo: tuple[Option, ...],
           used: dict[int, set[tuple[str, int]]], now: dict[int, frozenset[tuple[str, int]]],
           to_whole: tuple[bool, ...], whole: int) -> float:  # fmt: skip
    node = p.cluster.nodes[0]
    layouts: dict[int, frozenset[tuple[str, int]]] = {}
    for g in range(node.gpu_count):
        u = frozenset(used.get(g, set()))
        if u:
            layouts[g] = now.get(g, frozenset()) if u <= now.get(g, frozenset()) else u
        else:
            layouts[g] = frozenset() if to_whole[g] else now.get(g, frozenset())
    split = {g for g, x in layouts.items() if x}
    if whole > node.gpu_count - len(split):
        return float("-inf")
    bare = dataclasses.replace(node, unavailable_gpu_indices=frozenset(split), mig_layouts=())
    q = dataclasses.replace(p, cluster=dataclasses.replace(p.cluster, nodes=(bare,)))
    choices = {j.name: (o[1], {node.name: o[2]}) for j, o in zip(p.jobs, combo, strict=True)
               if o is not None and o[0] == "whole"}  # fmt: skip
    assignments = []
    for j, a, o in zip(p.jobs, materialize(q, configs, choices).assignments, combo, strict=True):
        if o is not None and o[0] == "slice":
            assert o[3] is not None
            run = JobAssignment(j.name, JobState.RUNNING, o[1], (GpuSlice(node.name, (o[2],)),),
                                mig=MigInstance(*o[3]))  # fmt: skip
            a = dataclasses.replace(run, migrated=is_migrated(j, run))
        assignments.append(a)
    changes = tuple(
        LayoutChange(node.name, GpuLayout(g, tuple(MigInstance(*x) for x in sorted(layouts[g]))))
        for g in range(node.gpu_count)
        if layouts[g] != now.get(g, frozenset())
    )
    if check_plan(p, assignments, changes):
        return float("-inf")
    return score_plan(p, assignments, configs.best_samples_per_second, changes).total


@functools.cache
def enumerated_mig(seed: int) -> tuple[Problem, ConfigSet, float]:
    p = random_mig(seed)
    configs = top_clock(build_config_set(p))
    return p, configs, brute_force_mig(p, configs)
