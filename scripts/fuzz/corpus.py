"""The corpus of valid requests, and the cases (one request each) made from it."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import cast

from google.protobuf.descriptor import Descriptor
from google.protobuf.message import Message

from scripts.fuzz.constants import REQUEST_TYPES, ROOT, RPCS
from scripts.fuzz.mutate import Mutator, edge_sweep, generate
from scripts.fuzz.raw import raw_mutation
from scripts.fuzz.values import BACKENDS, BUDGET_MS, Draw
from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.convert import load_request_json


@dataclass
class Seed:
    name: str
    request: pb.SolveRequest
    weight: float
    plan: pb.Plan | None = None
    """A plan the server made for it (for EvaluatePlan requests)."""


def load_corpus(seed: int) -> list[Seed]:
    from solver.offline.generate import generate as generate_instance
    from solver.offline.generate import spec_from_args
    from tests.factories import make_request  # the repository root is on sys.path

    seeds = [Seed("factories.make_request", make_request(), 6.0)]
    weights = {"tiny": 3.0, "small": 0.6, "modern-power": 0.4, "pai": 0.3, "medium": 0.1}
    for path in sorted((ROOT / "instances").glob("*.json")):
        w = next((v for k, v in weights.items() if path.stem.startswith(k)), 0.2)
        seeds.append(Seed(path.stem, load_request_json(path), w))
    for path in sorted((ROOT / "instances" / "hetero-power").glob("hetero-power-*.json")):
        seeds.append(Seed(path.stem, load_request_json(path), 0.1))
    for path in sorted((ROOT / "examples").glob("*.json")):  # each feature's fields set
        seeds.append(Seed(f"examples/{path.stem}", load_request_json(path), 0.5))
    for k in range(12):
        nodes, jobs = (2, 3, 4, 6)[k % 4], (1, 3, 5, 8)[k % 4]
        spec = spec_from_args(
            ["--nodes", str(nodes), "--jobs", str(jobs), "--seed", str(seed * 100 + k)]
        )
        seeds.append(Seed(f"generated-{nodes}n{jobs}j-{k}", generate_instance(spec), 1.0))
    for s in seeds:
        short(s.request, 200)
    return seeds


def short(req: pb.SolveRequest, budget_ms: int, backend: int | None = None) -> None:
    """A short budget and one thread, so that many requests fit in the run."""
    req.options.time_budget.FromMilliseconds(budget_ms)
    req.options.threads = 1
    if backend is not None:
        req.options.backend = backend  # type: ignore[assignment]


@dataclass
class Case:
    index: int
    rpc: str
    family: str
    """structured or raw."""
    kind: str
    base: str
    data: bytes
    notes: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.family}/{self.kind}"


class CaseMaker:
    def __init__(self, seed: int, corpus: list[Seed], raw_share: float) -> None:
        self.seed = seed
        self.corpus = corpus
        self.weights = [s.weight for s in corpus]
        self.with_plan = [s for s in corpus if s.plan is not None]
        self.pool: list[Message] = [s.request for s in corpus if s.request.ByteSize() < 50_000]
        self.raw_share = raw_share

    def make(self, index: int) -> Case:
        rng = random.Random(f"dsfro-fuzz:{self.seed}:{index}")
        draw = Draw(rng)
        if rng.random() < self.raw_share:
            return self._raw(index, rng, draw)
        return self._structured(index, rng, draw)

    def _base(self, rng: random.Random, draw: Draw) -> tuple[Seed, pb.SolveRequest]:
        s = rng.choices(self.corpus, self.weights)[0]
        req = pb.SolveRequest()
        req.CopyFrom(s.request)
        short(req, draw(BUDGET_MS), draw(BACKENDS))
        req.options.seed = rng.randrange(1000)
        return s, req

    def _valid(self, rpc: str, rng: random.Random, draw: Draw) -> tuple[str, Message]:
        if rpc == "GetServerInfo":
            return "-", pb.GetServerInfoRequest()
        if rpc == "EvaluatePlan" and self.with_plan:
            s = rng.choice(self.with_plan)
            assert s.plan is not None
            req = pb.SolveRequest()
            req.CopyFrom(s.request)
            short(req, draw(BUDGET_MS))
            return s.name, pb.EvaluatePlanRequest(request=req, plan=s.plan)
        s, req = self._base(rng, draw)
        if rpc == "ValidateSnapshot":
            return s.name, pb.ValidateSnapshotRequest(request=req)
        if rpc == "EvaluatePlan":
            return s.name, pb.EvaluatePlanRequest(request=req)
        return s.name, req

    def _structured(self, index: int, rng: random.Random, draw: Draw) -> Case:
        rpc = rng.choices(RPCS, (0.45, 0.25, 0.25, 0.05))[0]
        mode = rng.choices(("valid", "mutated", "edge", "generated"), (0.1, 0.6, 0.18, 0.12))[0]
        if mode == "generated":
            msg = generate(cast(Descriptor, REQUEST_TYPES[rpc]().DESCRIPTOR), rng, draw)
            return Case(index, rpc, "structured", mode, "-", msg.SerializeToString())
        base, msg = self._valid(rpc, rng, draw)
        notes: list[str] = []
        if mode == "edge":
            notes = edge_sweep(msg, rng)
        elif mode == "mutated":
            m = Mutator(rng, draw, self.pool)
            times = 1 + min(7, int(rng.expovariate(0.7)))
            root: Message = msg
            if isinstance(msg, pb.EvaluatePlanRequest) and rng.random() < 0.6:
                root = msg.plan  # mostly the plan: the request part is ValidateSnapshot's too
            m.mutate(root, times)
            notes = m.log
        return Case(index, rpc, "structured", mode, base, msg.SerializeToString(), notes)

    def _raw(self, index: int, rng: random.Random, draw: Draw) -> Case:
        rpc = rng.choices(RPCS, (0.35, 0.25, 0.25, 0.15))[0]
        base, msg = self._valid(rpc, rng, draw)
        _, other = self._valid(rng.choice(RPCS), rng, draw)
        kind, data = raw_mutation(msg.SerializeToString(), other.SerializeToString(), rng, draw)
        return Case(index, rpc, "raw", kind, base, data, [f"{len(data)} bytes"])
