"""Best-fit placement of whole tensor groups, over free-GPU counts kept as numpy arrays.

One node if any can hold the job (the tightest such node), else the tightest rack that can,
filled from its emptiest nodes; else the racks with the most room. Arrays per GPU type keep a
placement query at a few vectorised operations, so the heuristic scales to tens of thousands
of nodes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from solver.domain import Cluster, Job, Problem

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]
_NO_ROOM = np.iinfo(np.int64).max
"""Stands for the room of a node that cannot hold the job, in the best-fit argmin."""


class _TypePool:
    """The nodes of one GPU type: names, racks and free GPUs, in cluster order."""

    def __init__(
        self,
        names: list[str],
        racks: list[str],
        free: list[int],
        power_bound: bool,
        wanted: list[float] | None = None,
    ) -> None:
        self.names = names
        self.power_bound = power_bound
        """Some rack of the type has a power budget: its watts, not its GPUs, are its room."""
        rack_names = sorted(set(racks))
        self.rack_names = rack_names
        index = {r: i for i, r in enumerate(rack_names)}
        self.rack_of: IntArray = np.array([index[r] for r in racks], dtype=np.int64)
        self.free: IntArray = np.array(free, dtype=np.int64)
        self.position = {n: i for i, n in enumerate(names)}
        self.rack_index = index
        self.tie: FloatArray | None = None
        """Per node, in [0, 0.5): how much jobs barred elsewhere want it (``Placer``'s
        `wanted`, scaled): among equally tight nodes, the least wanted is taken first."""
        if wanted is not None and any(wanted):
            top = max(wanted)
            self.tie = np.array([0.5 * w / top for w in wanted], dtype=np.float64)

    def room(
        self,
        tensor_parallel: int,
        hidden: BoolArray | None = None,
        barred: IntArray | None = None,
    ) -> IntArray:
        """GPUs per node usable by whole tensor groups; none in the racks `hidden` marks or
        on the nodes at the positions `barred`."""
        room = _room(self.free, tensor_parallel)
        if hidden is not None:
            room[hidden[self.rack_of]] = 0
        if barred is not None:
            room[barred] = 0
        return room


class Placer:
    """Free GPUs per node, with best-fit queries; `take`/`give` keep it current."""

    def __init__(
        self,
        cluster: Cluster,
        free: Mapping[str, int] | None = None,
        wanted: Mapping[str, float] | None = None,
    ) -> None:
        """`wanted`: per node, how much jobs barred from other nodes want it (``wanted_nodes``);
        ties of best fit go to the least wanted node."""
        by_type: dict[str, tuple[list[str], list[str], list[int], list[float]]] = {}
        for n in cluster.nodes:
            names, racks, counts, want = by_type.setdefault(n.gpu_type, ([], [], [], []))
            names.append(n.name)
            racks.append(n.rack)
            counts.append(free[n.name] if free is not None else n.available_gpus)
            want.append(wanted.get(n.name, 0.0) if wanted else 0.0)
        budgeted = cluster.rack_power_budgets_watts
        self.pools = {
            t: _TypePool(*v[:3], power_bound=any(r in budgeted for r in v[1]), wanted=v[3])
            for t, v in by_type.items()
        }
        self.type_of = {n.name: n.gpu_type for n in cluster.nodes}
        self._barred: dict[frozenset[str], dict[str, IntArray]] = cluster.__dict__.setdefault(
            "_barred_positions", {}
        )
        """Per barred set, its nodes' positions in each type's pool: made once per set and
        cluster (every search state of a solve asks), in one pass over the set."""

    def barred_at(self, nodes: frozenset[str], gpu_type: str) -> IntArray | None:
        """Positions in the type's pool of the nodes `nodes` names (None: none)."""
        if not nodes:
            return None
        found = self._barred.get(nodes)
        if found is None:
            per: dict[str, list[int]] = {}
            for n in nodes:
                t = self.type_of.get(n)
                if t is not None:
                    per.setdefault(t, []).append(self.pools[t].position[n])
            found = {t: np.array(sorted(v), dtype=np.int64) for t, v in per.items()}
            self._barred[nodes] = found
        return found.get(gpu_type)

    def free(self, node: str) -> int:
        pool = self.pools[self.type_of[node]]
        return int(pool.free[pool.position[node]])

    def take(self, counts: Mapping[str, int]) -> None:
        for node, k in counts.items():
            pool = self.pools[self.type_of[node]]
            pool.free[pool.position[node]] -= k

    def give(self, counts: Mapping[str, int]) -> None:
        for node, k in counts.items():
            pool = self.pools[self.type_of[node]]
            pool.free[pool.position[node]] += k

    def fits(self, counts: Mapping[str, int]) -> bool:
        return all(self.free(node) >= k for node, k in counts.items())

    def place(
        self,
        gpu_type: str,
        num_gpus: int,
        tensor_parallel: int,
        hidden: BoolArray | None = None,
        barred: frozenset[str] = frozenset(),
    ) -> dict[str, int] | None:
        """GPUs per node for a job of `num_gpus` in groups of `tensor_parallel`, outside the
        racks `hidden` marks (in the order of ``rack_names``) and the nodes `barred` names;
        None if none."""
        pool = self.pools.get(gpu_type)
        if pool is None:
            return None
        at = self.barred_at(barred, gpu_type)
        if hidden is None and tensor_parallel == 1 and at is None:
            return _place(pool, pool.free, num_gpus)
        return _place(pool, pool.room(tensor_parallel, hidden, at), num_gpus)

    def rack_names(self, gpu_type: str) -> list[str]:
        """The racks with nodes of the type, in the order rack arrays of the type use."""
        pool = self.pools.get(gpu_type)
        return [] if pool is None else pool.rack_names

    def rack_position(self, gpu_type: str) -> Mapping[str, int]:
        """Each rack's position in ``rack_names``."""
        pool = self.pools.get(gpu_type)
        return {} if pool is None else pool.rack_index

    def rack_room(
        self, gpu_type: str, tensor_parallel: int, barred: frozenset[str] = frozenset()
    ) -> npt.NDArray[np.float64]:
        """GPUs per rack (``rack_names``) usable by whole tensor groups of the type, off the
        nodes `barred` names."""
        pool = self.pools[gpu_type]
        room = pool.room(tensor_parallel, barred=self.barred_at(barred, gpu_type))
        racks = np.bincount(pool.rack_of, weights=room, minlength=len(pool.rack_names))
        return racks.astype(np.float64, copy=False)

    def place_split(
        self,
        gpu_type: str,
        tensor_parallel: int,
        quotas: Mapping[frozenset[str], int],
        barred: frozenset[str] = frozenset(),
    ) -> dict[str, int] | None:
        """GPUs per node for a job whose GPUs go `quotas[racks]` into each set of racks (a
        set: the racks of a type without a power budget share one quota), best-fit within
        each, off the nodes `barred` names; None if some set cannot hold its share."""
        pool = self.pools.get(gpu_type)
        if pool is None:
            return None
        room = pool.room(tensor_parallel, barred=self.barred_at(barred, gpu_type))
        counts: dict[str, int] = {}
        for racks, need in sorted(quotas.items(), key=lambda q: (-q[1], sorted(q[0]))):
            if need <= 0:
                continue
            index = [i for i, r in enumerate(pool.rack_names) if r in racks]
            masked = np.where(np.isin(pool.rack_of, index), room, 0)
            got = _place(pool, masked, need)
            if got is None:
                return None
            for node, k in got.items():
                counts[node] = counts.get(node, 0) + k
                room[pool.position[node]] -= k
        return counts


def _room(free: IntArray, tensor_parallel: int) -> IntArray:
    """GPUs per node usable by whole tensor groups."""
    return free.copy() if tensor_parallel == 1 else (free // tensor_parallel) * tensor_parallel


def _place(pool: _TypePool, room: IntArray, num_gpus: int) -> dict[str, int] | None:
    """Best-fit of `num_gpus` over the nodes' `room`: the tightest node that holds them, else
    the tightest rack that does (where no rack of the type has a power budget: of the racks
    that do, the one whose emptiest nodes hold them in the fewest nodes, the tightest of
    those), its emptiest nodes first; else the racks with most room."""
    need = num_gpus
    # The tightest node that holds the job; argmin keeps the first of equals: cluster order,
    # or the least wanted by jobs barred elsewhere (``Placer``'s `wanted`).
    if pool.tie is None:
        best = int(np.argmin(np.where(room >= need, room, _NO_ROOM)))
    else:
        best = int(np.argmin(np.where(room >= need, room + pool.tie, np.inf)))
    if room[best] >= need:
        return {pool.names[best]: need}
    rack_room = np.bincount(pool.rack_of, weights=room, minlength=len(pool.rack_names))
    if rack_room.sum() < need:
        return None
    fitting = np.flatnonzero(rack_room >= need)
    if fitting.size and pool.power_bound:
        racks = [int(fitting[np.argmin(rack_room[fitting])])]
    elif fitting.size:
        racks = [_fewest_nodes_rack(pool, room, need, fitting, rack_room)]
    else:
        racks = [int(r) for r in np.argsort(-rack_room, kind="stable")]
    counts: dict[str, int] = {}
    order = -room if pool.tie is None else pool.tie - room  # emptiest (least wanted) first
    for r in racks:
        members = np.flatnonzero((pool.rack_of == r) & (room > 0))
        for i in members[np.argsort(order[members], kind="stable")]:
            k = int(min(room[i], need))
            counts[pool.names[int(i)]] = k
            need -= k
            if need == 0:
                return counts
    return None


def _fewest_nodes_rack(
    pool: _TypePool,
    room: IntArray,
    need: int,
    fitting: IntArray,
    rack_room: npt.NDArray[Any],
) -> int:
    """Of the racks `fitting` (each with room for `need`), the one whose emptiest nodes hold
    `need` in the fewest nodes, the tightest of equals. The tightest rack alone split a
    16-GPU job 7 + 1 + 8 over three nodes where another rack had two empty ones: a node more
    to span (the locality term) and fragments left where whole nodes were. Not where racks
    have power budgets: there the watts decide where a job can go, and on the power-capped
    snapshots this rule placed worse than the tightest rack (docs/benchmarks.md)."""
    tightest = int(fitting[np.argmin(rack_room[fitting])])
    least = -(-need // int(room.max()))  # no rack can do with fewer nodes
    if _nodes_needed(np.sort(room[pool.rack_of == tightest])[::-1], need) == least:
        return tightest
    order = np.lexsort((-room, pool.rack_of))
    racks_sorted = pool.rack_of[order]
    first = np.searchsorted(racks_sorted, np.arange(len(pool.rack_names)))
    total = np.cumsum(room[order])
    before = np.concatenate(([0], total))[first]
    position = np.arange(order.size)
    reached = np.where(total - before[racks_sorted] >= need, position, order.size)
    nodes = np.minimum.reduceat(reached, first) - first + 1
    return int(fitting[np.lexsort((rack_room[fitting], nodes[fitting]))[0]])


def _nodes_needed(descending: IntArray, need: int) -> int:
    """Nodes of rooms `descending` (emptiest first) that hold `need`."""
    return int(np.searchsorted(np.cumsum(descending), need)) + 1


def wanted_nodes(problem: Problem) -> dict[str, float]:
    """Per node, what waiting jobs with barred nodes want of it: each job's most GPUs spread
    over the nodes it may use, so a node few such jobs can do without is wanted most. Empty
    without such jobs: best fit is then exactly as before. Made once a problem (every search
    state of a solve asks)."""
    memo: dict[str, float] | None = problem.__dict__.get("_wanted_nodes")
    if memo is None:
        memo = problem.__dict__["_wanted_nodes"] = _wanted(problem.cluster, problem.jobs)
    return memo


def _wanted(cluster: Cluster, jobs: Iterable[Job]) -> dict[str, float]:
    groups: dict[tuple[frozenset[str], frozenset[str]], int] = {}
    for j in jobs:
        if j.barred_nodes and j.current is None:
            key = (j.barred_nodes, j.allowed_gpu_types)
            groups[key] = groups.get(key, 0) + j.max_gpus
    if not groups:
        return {}
    names = [n.name for n in cluster.nodes]
    types = np.array([n.gpu_type for n in cluster.nodes])
    wanted = np.zeros(len(names))
    for (barred, allowed), gpus in groups.items():
        may = np.ones(len(names), dtype=bool) if not allowed else np.isin(types, list(allowed))
        may[list(cluster.positions(barred))] = False
        count = int(may.sum())
        if count:
            wanted[may] += gpus / count
    return {name: float(w) for name, w in zip(names, wanted, strict=True) if w}
