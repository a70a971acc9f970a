"""Fuzzing benchmark of the gRPC service: a real server in its own process, N requests.

The server (``server.py``) runs in a separate process on a free loopback port, with room for
many solves at once and a short maximum time budget. Client threads send a reproducible mix
(``--seed``) to all four RPCs:

* structure-aware requests: valid requests (the bundled instances, ``tests/factories``, small
  generated snapshots) mutated by walking the message descriptors, with the new values drawn
  from hypothesis strategies (edge numbers, odd strings, out-of-range enums, emptied, duplicated
  or blown-up repeated fields, switched oneofs, cleared or foreign sub-messages), and messages
  generated from their descriptors alone;
* raw bytes: random bytes, bit flips, truncations, splices, unknown and nested fields, sent as
  they are.

Every OK Solve is checked twice: by EvaluatePlan on the same server, and locally with the
package's checker (``evaluate_allocations``). Requests answered INTERNAL/UNKNOWN, that crashed
the server or that came back with an invalid plan (or a non-finite objective) are saved to
``--failures`` (serialized bytes + JSON) and replay with ``--replay DIR``::

    .venv/bin/python scripts/fuzz_service.py --requests 1000 --seed 1
    .venv/bin/python scripts/fuzz_service.py --replay fuzz-failures
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import shlex
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast

import grpc
from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError, Message
from google.protobuf.message_factory import GetMessageClass
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import strategies as st
from hypothesis.errors import Frozen, StopTest
from hypothesis.internal.conjecture.data import ConjectureData

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.convert import allocations_from_proto, load_request_json, problem_from_proto
from solver.app.limits import Limits
from solver.app.validation import validate_request
from solver.scoring.evaluation import evaluate_allocations

ROOT = Path(__file__).resolve().parent.parent
SERVICE = "dsfro.v1.SchedulerService"
RPCS = ("Solve", "ValidateSnapshot", "EvaluatePlan", "GetServerInfo")
REQUEST_TYPES: dict[str, type[Message]] = {
    "Solve": pb.SolveRequest,
    "ValidateSnapshot": pb.ValidateSnapshotRequest,
    "EvaluatePlan": pb.EvaluatePlanRequest,
    "GetServerInfo": pb.GetServerInfoRequest,
}
CHANNEL_LIMIT = 512 << 20
FAILING_CODES = ("INTERNAL", "UNKNOWN")
SAVED_PER_REASON = 200
"""Failures saved per reason (all are counted)."""

T = TypeVar("T")

# ---------------------------------------------------------------- values drawn with hypothesis

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
FLOAT_EDGES = (
    0.0, -0.0, 1e-320, -1.0, 1.0, 0.5, 1e308, -1e308, 1.7976931348623157e308, math.inf, -math.inf,
    math.nan, 5e-324, 2.2250738585072014e-308, 1e-300, 1e-9, 1e300, 1e18, 1e15, 1e12, 1e10,
    1e10 * (1 + 1e-15), 1e8, 1e7, 1e6, 1e5, 1e3, 1000.0000001, 3.1536e8, 2.0**53, 2.0**63,
)  # fmt: skip
"""Special floats, and the validation maxima (settings.MAX_*) and just above."""
INT32_EDGES = (
    0, -1, 1, 2, 3, 4, 7, 8, 9, 63, 64, 65, 256, 257, 4096, 4097, 20000, 20001, 100_000, 100_001,
    2**20, 2**20 + 1, 2**24, 2**24 + 1, INT32_MAX, INT32_MAX - 1, INT32_MIN, INT32_MIN + 1,
)  # fmt: skip
INT64_EDGES = (
    *INT32_EDGES, INT64_MAX, INT64_MIN, 2**32, 2**31, 315_576_000_000, 315_576_000_001,
    999_999_999, 1_000_000_000, -1_000_000_000,
)  # fmt: skip
SPECIAL_STRINGS = (
    "", " ", "\x00", "a\x00b", "\n", "\t", "\r\n", "\x1b[31m", "\x7f", "\u200b", "\u202e",
    "\ufeff", "\u00a0", "\u2028", "é", "😀", "名前", "A100-80GB", "H100-SXM", "r1", "r2",
    "a100-0", "llm", "..", "../../etc/passwd", "%s%n%x", "{}", "null", " a ", "\U0010ffff",
    "\ufffd", "x" * 253, "x" * 254,
)  # fmt: skip

FLOATS = st.one_of(
    st.sampled_from(FLOAT_EDGES), st.floats(), st.floats(min_value=-10.0, max_value=1e5)
)
INT32S = st.one_of(
    st.sampled_from(INT32_EDGES),
    st.integers(INT32_MIN, INT32_MAX),
    st.integers(-2, 70),
)
INT64S = st.one_of(
    st.sampled_from(INT64_EDGES),
    st.integers(INT64_MIN, INT64_MAX),
    st.integers(-2, 70),
)
UINT32S = st.one_of(st.sampled_from((0, 1, 2**32 - 1)), st.integers(0, 2**32 - 1))
UINT64S = st.one_of(st.sampled_from((0, 1, 2**64 - 1)), st.integers(0, 2**64 - 1))
TEXTS = st.one_of(
    st.sampled_from(SPECIAL_STRINGS),
    st.text(max_size=12),
    st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=40),
    st.builds(
        lambda c, n: c * n,
        st.sampled_from(("x", "é", "\u200b", "😀", " ")),
        st.sampled_from((253, 254, 1000, 100_000)),
    ),
)
BUDGET_MS = st.integers(10, 200)
BACKENDS = st.sampled_from(
    (pb.BACKEND_HEURISTIC,) * 4
    + (pb.BACKEND_AUTO,) * 3
    + (pb.BACKEND_UNSPECIFIED, pb.BACKEND_AGGREGATE, pb.BACKEND_HIGHS)
    + (pb.BACKEND_CPSAT,) * 2
    + (pb.BACKEND_DECOMPOSED, pb.BACKEND_PYOMO)
)
BLOWUP_SIZES = st.sampled_from((2, 3, 5, 17, 65, 257, 1025, 4097, 20001))


class Draw:
    """Values drawn from hypothesis strategies with a seeded source: reproducible per request."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._data = self._fresh()

    def _fresh(self) -> ConjectureData:
        return ConjectureData(random=random.Random(self._rng.getrandbits(64)), prefix=())

    def __call__(self, strategy: st.SearchStrategy[T]) -> T:
        for _ in range(3):
            try:
                return self._data.draw(strategy)
            except (StopTest, Frozen):  # this source's choices are used up: a new one
                self._data = self._fresh()
        raise RuntimeError("hypothesis could not draw a value")


# ---------------------------------------------------------------- structure-aware mutation


def names_in(msg: Message, out: list[str]) -> list[str]:
    """Every non-empty string of a message tree (names, racks, ...), for duplicates."""
    for fd, value in msg.ListFields():
        if fd.type == FieldDescriptor.TYPE_STRING:
            out.extend(v for v in ([value] if not fd.is_repeated else value) if v)
        elif fd.message_type is not None and not fd.message_type.GetOptions().map_entry:
            for m in value if fd.is_repeated else [value]:
                names_in(m, out)
    return out


@dataclass
class Site:
    """A place in a message tree: a field of ``parent`` (an element of it when ``index``)."""

    parent: Message
    fd: FieldDescriptor | None
    index: int | None
    path: str


class Mutator:
    """Mutations of a message tree, walking its descriptors; ``log`` says what was done."""

    def __init__(self, rng: random.Random, draw: Draw, pool: Sequence[Message]) -> None:
        self.rng = rng
        self.draw = draw
        self.pool = pool
        """Valid messages whose sub-messages are spliced in (crossover)."""
        self.log: list[str] = []
        self.names: list[str] = []

    # -- where

    def pick(self, msg: Message, path: str = "") -> Site:
        rng = self.rng
        while True:
            fields = msg.DESCRIPTOR.fields
            if not fields:
                return Site(msg, None, None, path or "<empty message>")
            present = [fd for fd, _ in msg.ListFields()]
            fd = rng.choice(present) if present and rng.random() < 0.8 else rng.choice(fields)
            p = f"{path}.{fd.name}" if path else fd.name
            if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
                return Site(msg, None, None, p)
            if fd.message_type is not None:
                if fd.is_repeated:
                    items = getattr(msg, fd.name)
                    if items and rng.random() < 0.75:
                        k = rng.randrange(len(items))
                        msg, path = items[k], f"{p}[{k}]"
                        continue
                    return Site(msg, fd, None, p)
                if msg.HasField(fd.name) and rng.random() < 0.75:
                    msg, path = getattr(msg, fd.name), p
                    continue
                return Site(msg, fd, None, p)
            if fd.is_repeated:
                items = getattr(msg, fd.name)
                if items and rng.random() < 0.5:
                    k = rng.randrange(len(items))
                    return Site(msg, fd, k, f"{p}[{k}]")
            return Site(msg, fd, None, p)

    # -- what

    def pick_message(self, msg: Message, path: str = "") -> tuple[Message, str]:
        """A message node of the tree: the root or a random descendant."""
        while self.rng.random() < 0.75:
            subs = [
                (fd, value)
                for fd, value in msg.ListFields()
                if fd.message_type is not None and not fd.message_type.GetOptions().map_entry
            ]
            if not subs:
                break
            fd, value = self.rng.choice(subs)
            p = f"{path}.{fd.name}" if path else fd.name
            if fd.is_repeated:
                k = self.rng.randrange(len(value))
                msg, path = value[k], f"{p}[{k}]"
            else:
                msg, path = value, p
        return msg, path

    def burst(self, root: Message) -> None:
        """Several scalar fields of one message at once (e.g. a ModelSpec's sizes), which one
        field at a time rarely reaches."""
        msg, path = self.pick_message(root)
        changed = []
        for fd in msg.DESCRIPTOR.fields:
            if fd.message_type is not None or fd.is_repeated or self.rng.random() < 0.4:
                continue
            with contextlib.suppress(TypeError, ValueError, OverflowError):
                setattr(msg, fd.name, self.scalar(fd, getattr(msg, fd.name)))
                changed.append(f"{fd.name}={_short(getattr(msg, fd.name))}")
        self.log.append(f"{path or '<root>'}: burst {', '.join(changed)}")

    def mutate(self, root: Message, times: int) -> None:
        self.names = names_in(root, [])
        for _ in range(times):
            if self.rng.random() < 0.2:
                self.burst(root)
                continue
            site = self.pick(root)
            try:
                self.apply(site)
            except (TypeError, ValueError, OverflowError) as e:  # a value the runtime refuses
                self.log.append(f"{site.path}: refused ({type(e).__name__})")

    def apply(self, s: Site) -> None:
        fd = s.fd
        if fd is None:
            self.log.append(f"{s.path}: nothing to mutate")
            return
        if fd.is_repeated and s.index is None:
            self.repeated(s.parent, fd, s.path)
        elif fd.message_type is not None:
            self.message(s.parent, fd, s.path)
        else:
            value = self.scalar(fd, self.current(s))
            if fd.has_presence and self.rng.random() < 0.15:
                s.parent.ClearField(fd.name)
                self.log.append(f"{s.path}: cleared")
                return
            if s.index is None:
                setattr(s.parent, fd.name, value)
            else:
                getattr(s.parent, fd.name)[s.index] = value
            self.log.append(f"{s.path} = {_short(value)}")

    def current(self, s: Site) -> Any:
        assert s.fd is not None
        value = getattr(s.parent, s.fd.name)
        return value if s.index is None else value[s.index]

    def scalar(self, fd: FieldDescriptor, current: Any) -> Any:
        t = fd.type
        rng, draw = self.rng, self.draw
        if t in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
            if rng.random() < 0.25 and isinstance(current, float) and math.isfinite(current):
                return rng.choice(
                    (-current, current * 10, current * 1e6, current + 1e-9, current * (1 + 1e-12))
                )
            return draw(FLOATS)
        if t in (FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_SINT32,
                 FieldDescriptor.TYPE_SFIXED32):  # fmt: skip
            if rng.random() < 0.25 and isinstance(current, int):
                v = rng.choice((current + 1, current - 1, current * 2, -current, current // 2))
                return max(INT32_MIN, min(INT32_MAX, v))
            return draw(INT32S)
        if t in (FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_SINT64,
                 FieldDescriptor.TYPE_SFIXED64):  # fmt: skip
            return draw(INT64S)
        if t in (FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_FIXED32):
            return draw(UINT32S)
        if t in (FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64):
            return draw(UINT64S)
        if t == FieldDescriptor.TYPE_BOOL:
            return not current if rng.random() < 0.7 else draw(st.booleans())
        if t == FieldDescriptor.TYPE_STRING:
            r = rng.random()
            if r < 0.3 and self.names:
                return rng.choice(self.names)  # a duplicate or a name of another kind
            if r < 0.4 and current:
                return rng.choice((current + " ", current.upper(), current * 2, current[:-1]))
            return draw(TEXTS)
        if t == FieldDescriptor.TYPE_BYTES:
            return draw(st.binary(max_size=64))
        if t == FieldDescriptor.TYPE_ENUM:
            numbers = [v.number for v in fd.enum_type.values]
            return draw(
                st.one_of(
                    st.sampled_from(numbers),
                    st.sampled_from((-1, max(numbers) + 1, 99, INT32_MAX, INT32_MIN)),
                    st.integers(INT32_MIN, INT32_MAX),
                )
            )
        raise TypeError(f"unhandled field type {t}")

    def foreign(self, desc: Descriptor) -> Message | None:
        """A sub-message of this type from a valid pool message (crossover), if any."""
        found: list[Message] = []
        for root in self.rng.sample(list(self.pool), min(3, len(self.pool))):
            _collect(root, desc.full_name, found)
        return self.rng.choice(found) if found else None

    def message(self, parent: Message, fd: FieldDescriptor, path: str) -> None:
        op = self.rng.choice(("clear", "generate", "foreign", "empty", "foreign"))
        if op == "clear":
            parent.ClearField(fd.name)
        elif op == "empty":
            getattr(parent, fd.name).SetInParent()  # present and empty; switches a oneof
        else:
            other = self.foreign(fd.message_type) if op == "foreign" else None
            if other is None:
                op = "generate"
                other = generate(fd.message_type, self.rng, self.draw, depth=1)
            getattr(parent, fd.name).CopyFrom(other)
        self.log.append(f"{path}: {op}")

    def repeated(self, parent: Message, fd: FieldDescriptor, path: str) -> None:
        rng = self.rng
        items = getattr(parent, fd.name)
        n = len(items)
        is_msg = fd.message_type is not None
        ops = ["clear", "truncate", "duplicate", "remove", "reverse", "shuffle", "blow-up", "add"]
        if is_msg:
            ops += ["add-foreign", "uniquify-blow-up"]
        op = rng.choice(ops)
        values = list(items)
        if op == "clear":
            values = []
        elif op == "truncate" and n:
            values = values[: rng.randrange(n)]
        elif op == "duplicate" and n:
            k = rng.randrange(n)
            values.insert(rng.randrange(n + 1), values[k])
        elif op == "remove" and n:
            del values[rng.randrange(n)]
        elif op == "reverse":
            values.reverse()
        elif op == "shuffle":
            rng.shuffle(values)
        elif op in ("blow-up", "uniquify-blow-up") and n:
            size = self.draw(BLOWUP_SIZES)
            one = max(1, values[0].ByteSize() if is_msg else 8)
            size = min(size, max(2, (1 << 20) // one))  # about 1 MiB at most
            values = [values[k % n] for k in range(size)]
            op = f"{op} x{size}"
        elif op == "add-foreign":
            other = self.foreign(fd.message_type)
            values.append(
                other if other is not None else generate(fd.message_type, rng, self.draw, 1)
            )
        else:  # add
            if is_msg:
                values.append(generate(fd.message_type, rng, self.draw, depth=1))
            else:
                values.append(self.scalar(fd, values[0] if values else 0))
        parent.ClearField(fd.name)
        target = getattr(parent, fd.name)
        if is_msg:
            for v in values:
                target.add().CopyFrom(v)
            if op.startswith("uniquify") and "name" in fd.message_type.fields_by_name:
                for k, m in enumerate(target):
                    m.name = f"{m.name}~{k}"
        else:
            target.extend(values)
        self.log.append(f"{path}: {op} ({n} -> {len(values)})")


def leaves(msg: Message, path: str, out: list[Site]) -> list[Site]:
    """Every scalar field of a message tree (set or not) and every repeated scalar element."""
    for fd in msg.DESCRIPTOR.fields:
        p = f"{path}.{fd.name}" if path else fd.name
        if fd.message_type is not None:
            if fd.message_type.GetOptions().map_entry:
                continue
            if fd.is_repeated:
                for k, m in enumerate(getattr(msg, fd.name)):
                    leaves(m, f"{p}[{k}]", out)
            elif msg.HasField(fd.name):
                leaves(getattr(msg, fd.name), p, out)
        elif fd.is_repeated:
            out.extend(Site(msg, fd, k, f"{p}[{k}]") for k in range(len(getattr(msg, fd.name))))
        else:
            out.append(Site(msg, fd, None, p))
    return out


def edge_value(fd: FieldDescriptor, rng: random.Random) -> Any:
    """One of the edge values of a scalar field's type, uniformly."""
    t = fd.type
    if t in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return rng.choice(FLOAT_EDGES)
    if t in (FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_SINT64,
             FieldDescriptor.TYPE_SFIXED64):  # fmt: skip
        return rng.choice(INT64_EDGES)
    if t == FieldDescriptor.TYPE_STRING:
        return rng.choice(SPECIAL_STRINGS)
    if t == FieldDescriptor.TYPE_BOOL:
        return rng.random() < 0.5
    if t == FieldDescriptor.TYPE_ENUM:
        return rng.choice((-1, len(fd.enum_type.values), 99, INT32_MAX, INT32_MIN))
    return rng.choice(INT32_EDGES)


def edge_sweep(root: Message, rng: random.Random) -> list[str]:
    """One scalar leaf, chosen uniformly, set to one edge value of its type, chosen uniformly:
    one field at a time, as a table-driven test would."""
    sites = leaves(root, "", [])
    if not sites:
        return ["<no scalar field>"]
    s = rng.choice(sites)
    assert s.fd is not None
    value = edge_value(s.fd, rng)
    try:
        if s.index is None:
            setattr(s.parent, s.fd.name, value)
        else:
            getattr(s.parent, s.fd.name)[s.index] = value
    except (TypeError, ValueError, OverflowError) as e:
        return [f"{s.path}: refused {_short(value)} ({type(e).__name__})"]
    return [f"{s.path} = {_short(value)}"]


def _collect(msg: Message, full_name: str, out: list[Message]) -> None:
    for fd, value in msg.ListFields():
        if fd.message_type is None or fd.message_type.GetOptions().map_entry:
            continue
        for m in value if fd.is_repeated else [value]:
            if fd.message_type.full_name == full_name:
                out.append(m)
            _collect(m, full_name, out)


def generate(desc: Descriptor, rng: random.Random, draw: Draw, depth: int = 0) -> Message:
    """A message built from its descriptor alone: each field set or not, values drawn."""
    msg = GetMessageClass(desc)()
    m = Mutator(rng, draw, ())
    for fd in desc.fields:
        if rng.random() < 0.4:
            continue
        if fd.message_type is not None:
            if fd.message_type.GetOptions().map_entry or depth >= 4:
                continue
            if fd.is_repeated:
                for _ in range(rng.choice((0, 1, 1, 2, 3))):
                    getattr(msg, fd.name).add().CopyFrom(
                        generate(fd.message_type, rng, draw, depth + 1)
                    )
            else:
                getattr(msg, fd.name).CopyFrom(generate(fd.message_type, rng, draw, depth + 1))
            continue
        with contextlib.suppress(TypeError, ValueError, OverflowError):
            if fd.is_repeated:
                getattr(msg, fd.name).extend(
                    m.scalar(fd, 0) for _ in range(rng.choice((0, 1, 2, 4)))
                )
            else:
                setattr(msg, fd.name, m.scalar(fd, None))
    return msg


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:60]}... ({len(text)} chars)"


# ---------------------------------------------------------------- raw bytes


def _varint(n: int) -> bytes:
    out = bytearray()
    n &= (1 << 64) - 1
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def raw_mutation(data: bytes, other: bytes, rng: random.Random, draw: Draw) -> tuple[str, bytes]:
    """A byte-level mutation of a valid serialized request; ``other`` is for splices."""
    ops = (
        "random", "bitflip", "bitflip", "truncate", "splice", "insert", "duplicate-chunk",
        "unknown-field", "varint-bomb", "group-nesting", "valid",
    )  # fmt: skip
    op = rng.choice(ops)
    n = len(data)
    if op == "random":
        return op, draw(st.binary(max_size=rng.choice((8, 64, 512, 4096))))
    if op == "bitflip":
        buf = bytearray(data or b"\x00")
        for _ in range(rng.choice((1, 1, 2, 4, 8, 32))):
            k = rng.randrange(len(buf))
            buf[k] ^= 1 << rng.randrange(8)
        return op, bytes(buf)
    if op == "truncate":
        return op, data[: rng.randrange(n + 1)]
    if op == "splice":
        return op, data[: rng.randrange(n + 1)] + other[rng.randrange(len(other) + 1) :]
    if op == "insert":
        k = rng.randrange(n + 1)
        return op, data[:k] + draw(st.binary(min_size=1, max_size=32)) + data[k:]
    if op == "duplicate-chunk" and n:
        a = rng.randrange(n)
        b = min(n, a + rng.randrange(1, 256))
        return op, data[:b] + data[a:b] + data[b:]
    if op == "unknown-field":
        number = rng.choice((15, 99, 1000, 2**29 - 1, 19000, rng.randrange(1, 2**29)))
        wire = rng.choice((0, 1, 2, 3, 4, 5, 6, 7))
        tag = _varint(number << 3 | wire)
        payload = {
            0: _varint(rng.getrandbits(64)),
            1: rng.randbytes(8),
            2: _varint(16) + rng.randbytes(16),
            3: b"",
            4: b"",
            5: rng.randbytes(4),
        }.get(wire, rng.randbytes(4))
        return op, data + tag + payload
    if op == "varint-bomb":
        bomb = rng.choice(
            (
                b"\x0a" + b"\xff" * 9 + b"\x01",  # length 2**64-1
                b"\x0a" + b"\xff" * 11,  # an over-long varint
                b"\x0a\xff\xff\xff\xff\x07",  # length 2**31-1, nothing follows
                b"\x08" + b"\x80" * 10 + b"\x00",
            )
        )
        return op, (data + bomb) if rng.random() < 0.5 else bomb
    if op == "group-nesting":
        depth = rng.choice((50, 99, 100, 101, 1000, 100_000))
        field_no = rng.choice((15, 1, 2))
        start, end = _varint(field_no << 3 | 3), _varint(field_no << 3 | 4)
        return op, start * depth + end * depth  # depth: see the note
    return "valid", data


# ---------------------------------------------------------------- corpus


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


# ---------------------------------------------------------------- cases


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


# ---------------------------------------------------------------- the server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Server:
    """``server.py`` in its own process; restarted if it dies."""

    def __init__(self, args: argparse.Namespace, log_path: Path) -> None:
        self.args = args
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.lock = threading.Lock()
        self.generation = 0
        self.crashes: list[str] = []
        self.rss_kib: list[int] = []
        self.channel: grpc.Channel | None = None
        self.calls: dict[str, Callable[..., bytes]] = {}

    def command(self) -> list[str]:
        a = self.args
        return [
            sys.executable, str(ROOT / "server.py"), "--host", "127.0.0.1",
            "--port", str(self.port),
            "--max-concurrent-solves", str(a.max_concurrent_solves),
            "--max-time-budget-seconds", str(a.max_time_budget_seconds),
            "--workers", str(a.max_concurrent_solves + 48),
            "--log-level", a.server_log_level,
            "--grace-period-seconds", "5",
        ]  # fmt: skip

    def start(self) -> None:
        self.port = free_port()
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            self.command(), stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True
        )
        log.close()
        options = [
            ("grpc.max_send_message_length", CHANNEL_LIMIT),
            ("grpc.max_receive_message_length", CHANNEL_LIMIT),
        ]
        channel = grpc.insecure_channel(f"127.0.0.1:{self.port}", options=options)
        health = health_pb2_grpc.HealthStub(channel)
        deadline = time.monotonic() + 180
        while True:
            if self.proc.poll() is not None:
                raise SystemExit(
                    f"the server exited with {self.proc.returncode}; see {self.log_path}"
                )
            try:
                r = health.Check(health_pb2.HealthCheckRequest(service=SERVICE), timeout=2)
                if r.status == health_pb2.HealthCheckResponse.SERVING:
                    break
            except grpc.RpcError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit(f"the server did not become SERVING; see {self.log_path}")
            time.sleep(0.2)
        old = self.channel
        self.channel = channel
        self.calls = {m: channel.unary_unary(f"/{SERVICE}/{m}") for m in RPCS}
        self.generation += 1
        if old is not None:
            old.close()
        self.sample_rss()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def sample_rss(self) -> int | None:
        if self.proc is None:
            return None
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    kib = int(line.split()[1])
                    self.rss_kib.append(kib)
                    return kib
        except OSError:
            return None
        return None

    def restart_if_dead(self) -> bool:
        """Restart a dead server (once per death); True if it had died."""
        with self.lock:
            if self.alive():
                return False
            assert self.proc is not None
            self.crashes.append(f"exit code {self.proc.returncode}")
            self.start()
            return True

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        if self.channel is not None:
            self.channel.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode


# ---------------------------------------------------------------- checking answers


def finite_message(msg: Message, path: str = "") -> list[str]:
    """Paths of the non-finite floats of a message tree."""
    out: list[str] = []
    for fd, value in msg.ListFields():
        p = f"{path}.{fd.name}" if path else fd.name
        if fd.type in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
            for k, v in enumerate(value if fd.is_repeated else [value]):
                if not math.isfinite(v):
                    out.append(f"{p}[{k}]" if fd.is_repeated else p)
        elif fd.message_type is not None and not fd.message_type.GetOptions().map_entry:
            for k, m in enumerate(value if fd.is_repeated else [value]):
                out.extend(finite_message(m, f"{p}[{k}]" if fd.is_repeated else p))
    return out


@dataclass
class Outcome:
    code: str
    details: str = ""
    seconds: float = 0.0
    problems: list[tuple[str, str]] = field(default_factory=list)
    """(reason, detail) of what is wrong with an OK answer."""
    checked_plan: bool = False
    infeasible: bool = False


class Checker:
    def __init__(self, server: Server, limits: Limits, timeout: float) -> None:
        self.server = server
        self.limits = limits
        self.timeout = timeout

    def call(self, rpc: str, data: bytes) -> tuple[str, bytes | None, str]:
        for attempt in range(20):
            try:
                out: bytes = self.server.calls[rpc](data, timeout=self.timeout)
                return "OK", out, ""
            except grpc.RpcError as e:
                code = e.code().name
                if (
                    code == "RESOURCE_EXHAUSTED"
                    and attempt < 19
                    and "retry later" in (e.details() or "")
                ):
                    time.sleep(0.05 * (attempt + 1))
                    continue
                return code, None, e.details() or ""
        raise AssertionError("unreachable")

    def run(self, case: Case) -> Outcome:
        t = time.monotonic()
        code, out, details = self.call(case.rpc, case.data)
        o = Outcome(code, details, time.monotonic() - t)
        if out is not None:
            try:
                self.check_ok(case, out, o)
            except Exception as e:  # the check itself failing is a finding too
                o.problems.append(("check-error", f"{type(e).__name__}: {e}"))
        return o

    def check_ok(self, case: Case, out: bytes, o: Outcome) -> None:
        response_type = {
            "Solve": pb.SolveResponse,
            "ValidateSnapshot": pb.ValidateSnapshotResponse,
            "EvaluatePlan": pb.EvaluatePlanResponse,
            "GetServerInfo": pb.GetServerInfoResponse,
        }[case.rpc]
        response = response_type()
        try:
            response.ParseFromString(out)
        except DecodeError as e:
            o.problems.append(("bad-response", str(e)))
            return
        bad = finite_message(response)
        if bad:
            o.problems.append(("non-finite", ", ".join(bad[:5])))
        if isinstance(response, pb.SolveResponse):
            self.check_solve(case, response, o)

    def check_solve(self, case: Case, response: pb.SolveResponse, o: Outcome) -> None:
        try:
            req = pb.SolveRequest.FromString(case.data)
        except DecodeError as e:
            o.problems.append(("accepted-undecodable", str(e)))
            return
        if not response.HasField("stats"):
            o.problems.append(("empty-response", "OK Solve without stats (abandoned solve?)"))
            return
        if response.stats.termination == pb.TERMINATION_INFEASIBLE:
            o.infeasible = True
            if not response.plan.assignments:
                return
        o.checked_plan = True
        # 1. EvaluatePlan on the same server.
        ev_req = pb.EvaluatePlanRequest(request=req, plan=response.plan)
        code, out, details = self.call("EvaluatePlan", ev_req.SerializeToString())
        if out is None:
            o.problems.append(("invalid-plan-server", f"EvaluatePlan answered {code}: {details}"))
        else:
            ev = pb.EvaluatePlanResponse.FromString(out)
            if not ev.valid:
                text = "; ".join(f"{v.constraint}: {v.message}" for v in ev.violations[:3])
                o.problems.append(("invalid-plan-server", text))
            elif not _close(ev.objective.total, response.plan.objective.total):
                o.problems.append(
                    (
                        "objective-mismatch",
                        f"Solve {response.plan.objective.total!r} vs EvaluatePlan "
                        f"{ev.objective.total!r}",
                    )
                )
        # 2. The package's checker, here.
        violations = validate_request(req, self.limits)
        if violations:
            v = violations[0]
            o.problems.append(("local-validation-disagrees", f"{v.field}: {v.description}"))
            return
        problem = problem_from_proto(req, self.limits)
        local = evaluate_allocations(problem, allocations_from_proto(response.plan))
        if local.violations:
            text = "; ".join(f"{v.constraint}: {v.message}" for v in local.violations[:3])
            o.problems.append(("invalid-plan-local", text))
        elif local.plan is not None and not math.isfinite(local.plan.objective.total):
            o.problems.append(("non-finite", "local objective"))


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-6 * max(1.0, abs(a), abs(b))


# ---------------------------------------------------------------- the run


SAVED_REASONS = (
    "INTERNAL", "UNKNOWN", "crash", "invalid-plan-server", "invalid-plan-local", "non-finite",
    "objective-mismatch", "empty-response", "accepted-undecodable", "bad-response",
    "local-validation-disagrees", "check-error", "DEADLINE_EXCEEDED",
)  # fmt: skip


class Stats:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_kind: Counter[tuple[str, str]] = Counter()
        self.by_code: Counter[tuple[str, str]] = Counter()
        self.problems: Counter[str] = Counter()
        self.saved: Counter[str] = Counter()
        self.plans_checked = 0
        self.infeasible = 0
        self.done = 0
        self.seconds: dict[str, list[float]] = {r: [] for r in RPCS}


def save_failure(
    directory: Path, case: Case, reason: str, outcome: Outcome | None, seed: int
) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    stem = f"{case.index:07d}-{reason}-{case.rpc}"
    (directory / f"{stem}.bin").write_bytes(case.data)
    desc: dict[str, Any] = {
        "index": case.index,
        "seed": seed,
        "rpc": case.rpc,
        "method": f"/{SERVICE}/{case.rpc}",
        "family": case.family,
        "kind": case.kind,
        "base": case.base,
        "reason": reason,
        "mutations": case.notes,
        "status": outcome.code if outcome else None,
        "details": outcome.details if outcome else None,
        "problems": outcome.problems if outcome else [],
        "bytes": len(case.data),
    }
    if len(case.data) < 64_000:
        try:
            msg = REQUEST_TYPES[case.rpc]()
            msg.ParseFromString(case.data)
            desc["request_json"] = json.loads(json_format.MessageToJson(msg))
        except Exception:  # raw bytes that don't decode
            desc["request_json"] = None
    (directory / f"{stem}.json").write_text(json.dumps(desc, indent=2, ensure_ascii=True))


def make_plans(server: Server, corpus: list[Seed], timeout: float) -> None:
    """A plan for each small seed, made by the server, for EvaluatePlan requests."""
    for s in corpus:
        if s.request.ByteSize() > 60_000:
            continue
        req = pb.SolveRequest()
        req.CopyFrom(s.request)
        short(req, 500, pb.BACKEND_HEURISTIC)
        try:
            out = server.calls["Solve"](req.SerializeToString(), timeout=timeout)
        except grpc.RpcError as e:
            print(f"seed {s.name}: Solve failed {e.code().name}", file=sys.stderr)
            continue
        s.plan = pb.SolveResponse.FromString(out).plan


def run(args: argparse.Namespace, command: str) -> int:
    failures = Path(args.failures)
    failures.mkdir(parents=True, exist_ok=True)
    server = Server(args, failures / "server.log")
    server.start()
    limits = Limits(
        max_time_budget_seconds=args.max_time_budget_seconds,
        default_time_budget_seconds=min(5.0, args.max_time_budget_seconds),
    )
    corpus = load_corpus(args.seed)
    make_plans(server, corpus, args.timeout)
    maker = CaseMaker(args.seed, corpus, args.raw_share)
    checker = Checker(server, limits, args.timeout)
    stats = Stats()
    next_index = iter(range(args.requests))
    index_lock = threading.Lock()
    in_flight: dict[int, Case] = {}
    stop = threading.Event()
    start = time.monotonic()

    def record(case: Case, reason: str, outcome: Outcome | None) -> None:
        with stats.lock:
            stats.problems[reason] += 1
            keep = stats.saved[reason] < SAVED_PER_REASON
            stats.saved[reason] += keep
        if keep:
            save_failure(failures, case, reason, outcome, args.seed)

    def worker() -> None:
        while not stop.is_set():
            with index_lock:
                i = next(next_index, None)
            if i is None:
                return
            case = maker.make(i)
            in_flight[threading.get_ident()] = case
            generation = server.generation
            outcome = checker.run(case)
            in_flight.pop(threading.get_ident(), None)
            if outcome.code == "UNAVAILABLE" and not server.alive():
                record(case, "crash", outcome)
                server.restart_if_dead()
            elif outcome.code == "UNAVAILABLE" and server.generation != generation:
                outcome.code = "UNAVAILABLE (restart)"
            with stats.lock:
                stats.by_kind[(case.label, case.rpc)] += 1
                stats.by_code[(outcome.code, case.rpc)] += 1
                stats.seconds[case.rpc].append(outcome.seconds)
                stats.plans_checked += outcome.checked_plan
                stats.infeasible += outcome.infeasible
                stats.done += 1
            if outcome.code in FAILING_CODES or outcome.code == "DEADLINE_EXCEEDED":
                record(case, outcome.code, outcome)
            for reason in {r for r, _ in outcome.problems}:
                record(case, reason, outcome)

    def monitor() -> None:
        last = time.monotonic()
        while not stop.wait(1.0):
            server.sample_rss()
            if not server.alive():
                for case in list(in_flight.values()):
                    record(case, "crash", None)
                server.restart_if_dead()
            if time.monotonic() - last >= args.progress_seconds:
                last = time.monotonic()
                rate = stats.done / (last - start)
                print(
                    f"[{last - start:7.0f}s] {stats.done}/{args.requests} ({rate:.1f}/s) "
                    f"problems {dict(stats.problems)} rss {server.rss_kib[-1] // 1024} MiB",
                    file=sys.stderr,
                    flush=True,
                )

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(args.threads)]
    mon = threading.Thread(target=monitor, daemon=True)
    mon.start()
    for t in threads:
        t.start()
    try:
        for t in threads:
            while t.is_alive():
                t.join(1.0)
                if args.max_minutes and time.monotonic() - start > args.max_minutes * 60:
                    stop.set()
    except KeyboardInterrupt:
        stop.set()
        for t in threads:
            t.join(args.timeout + 5)
    elapsed = time.monotonic() - start
    stop.set()
    mon.join(5)
    alive = server.alive()
    rss_end = server.sample_rss()
    exit_code = server.stop()
    print(report(args, command, stats, server, elapsed, alive, rss_end, exit_code))
    bad = sum(stats.problems[r] for r in SAVED_REASONS if r != "DEADLINE_EXCEEDED")
    return 1 if bad or not alive or server.crashes else 0


def report(
    args: argparse.Namespace,
    command: str,
    stats: Stats,
    server: Server,
    elapsed: float,
    alive: bool,
    rss_end: int | None,
    exit_code: int | None,
) -> str:
    lines = [f"## Fuzzing the service: {stats.done} requests", "", f"Command: `{command}`", ""]
    lines += [
        f"Seed {args.seed}, {args.threads} client threads, server with "
        f"--max-concurrent-solves {args.max_concurrent_solves} "
        f"--max-time-budget-seconds {args.max_time_budget_seconds}; Solve budgets 10-200 ms "
        f"(mutations may set others, capped by the server). "
        f"{stats.done} of {args.requests} requests in {elapsed:.0f} s: "
        f"**{stats.done / max(elapsed, 1e-9):.1f} requests/s**.",
        "",
        "### Requests by kind and RPC",
        "",
        "| kind | " + " | ".join(RPCS) + " | total |",
        "| --- | " + " | ".join("---:" for _ in RPCS) + " | ---: |",
    ]
    kinds = sorted({k for k, _ in stats.by_kind})
    for k in kinds:
        row = [stats.by_kind[(k, r)] for r in RPCS]
        lines.append(f"| {k} | " + " | ".join(map(str, row)) + f" | {sum(row)} |")
    totals = [sum(stats.by_kind[(k, r)] for k in kinds) for r in RPCS]
    lines.append("| **total** | " + " | ".join(map(str, totals)) + f" | {sum(totals)} |")
    lines += [
        "",
        "### Answers by status code",
        "",
        "| status | " + " | ".join(RPCS) + " | total |",
        "| --- | " + " | ".join("---:" for _ in RPCS) + " | ---: |",
    ]
    for code in sorted({c for c, _ in stats.by_code}):
        row = [stats.by_code[(code, r)] for r in RPCS]
        lines.append(f"| {code} | " + " | ".join(map(str, row)) + f" | {sum(row)} |")
    lines += ["", "Median / max seconds per answer: " + ", ".join(
        f"{r} {_median(stats.seconds[r]):.3f} / {max(stats.seconds[r], default=0):.2f}"
        for r in RPCS
    ) + ".", ""]  # fmt: skip
    rss = server.rss_kib
    p = stats.problems
    checks = [
        ("INTERNAL answers", p["INTERNAL"], "0"),
        ("UNKNOWN answers", p["UNKNOWN"], "0"),
        (f"DEADLINE_EXCEEDED (client timeout {args.timeout:g} s)", p["DEADLINE_EXCEEDED"], "0"),
        ("OK Solves whose plan was checked", stats.plans_checked, "-"),
        ("OK Solves TERMINATION_INFEASIBLE", stats.infeasible, "-"),
        ("invalid plans: EvaluatePlan on the server", p["invalid-plan-server"], "0"),
        ("invalid plans: local checker (evaluate_allocations)", p["invalid-plan-local"], "0"),
        ("OK answers with a non-finite number (objective, ...)", p["non-finite"], "0"),
        ("Solve vs EvaluatePlan objective mismatches", p["objective-mismatch"], "0"),
        ("OK answers that are empty / undecodable", p["empty-response"] + p["bad-response"], "0"),
        ("server accepted, local validation refuses", p["local-validation-disagrees"], "0"),
        ("bytes the server accepted but that don't decode", p["accepted-undecodable"], "0"),
        ("errors in the checks themselves", p["check-error"], "0"),
        ("server crashes / restarts", f"{p['crash']} / {len(server.crashes)}", "0 / 0"),
        ("server alive at the end", "yes" if alive else "NO", "yes"),
        (
            "server RSS start / peak / end (MiB)",
            f"{rss[0] // 1024 if rss else '?'} / {max(rss) // 1024 if rss else '?'} / "
            f"{rss_end // 1024 if rss_end else '?'}",
            "-",
        ),
        ("server exit code after SIGTERM", exit_code, "0"),
        ("requests per second", f"{stats.done / max(elapsed, 1e-9):.1f}", "-"),
    ]
    lines += ["### Checks", "", "| check | count | expected |", "| --- | ---: | ---: |"]
    lines += [f"| {name} | {value} | {want} |" for name, value, want in checks]
    saved = sum(stats.saved.values())
    lines += ["", f"Failing requests saved to `{args.failures}`: {saved}."]
    return "\n".join(lines)


def _median(xs: list[float]) -> float:
    return sorted(xs)[len(xs) // 2] if xs else 0.0


# ---------------------------------------------------------------- replay


def replay(args: argparse.Namespace) -> int:
    directory = Path(args.replay)
    files = sorted(directory.glob("*.json"))
    if not files:
        print(f"no saved requests in {directory}", file=sys.stderr)
        return 2
    log = Path(args.failures) / "server-replay.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    server = Server(args, log)
    server.start()
    limits = Limits(max_time_budget_seconds=args.max_time_budget_seconds)
    checker = Checker(server, limits, args.timeout)
    still = 0
    print("| file | rpc | recorded | now | problems now |")
    print("| --- | --- | --- | --- | --- |")
    for path in files:
        desc = json.loads(path.read_text())
        data = path.with_suffix(".bin").read_bytes()
        case = Case(desc["index"], desc["rpc"], desc["family"], desc["kind"], desc["base"], data)
        outcome = checker.run(case)
        died = not server.alive()
        problems = sorted({r for r, _ in outcome.problems})
        failing = died or outcome.code in FAILING_CODES or bool(set(problems) & set(SAVED_REASONS))
        still += failing
        now = "CRASH" if died else outcome.code
        print(
            f"| {path.stem} | {case.rpc} | {desc['reason']} ({desc['status']}) | {now} | "
            f"{', '.join(problems) or '-'} |"
        )
        if died:
            server.restart_if_dead()
    server.stop()
    print(f"\n{still} of {len(files)} saved requests still fail.")
    return 1 if still else 0


# ---------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--requests", type=int, default=100_000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=6, help="client threads (6)")
    p.add_argument("--raw-share", type=float, default=0.3, help="share of raw-bytes requests")
    p.add_argument("--failures", default="fuzz-failures", help="where failing requests go")
    p.add_argument("--replay", metavar="DIR", help="send the requests saved in DIR again")
    p.add_argument("--max-concurrent-solves", type=int, default=16)
    p.add_argument("--max-time-budget-seconds", type=float, default=1.0)
    p.add_argument("--timeout", type=float, default=60.0, help="RPC deadline in seconds (60)")
    p.add_argument("--server-log-level", default="WARNING")
    p.add_argument("--max-minutes", type=float, default=0.0, help="stop after this long (0: never)")
    p.add_argument("--progress-seconds", type=float, default=30.0)
    return p.parse_args(argv)


@contextlib.contextmanager
def _on_path(path: Path) -> Iterator[None]:
    sys.path.insert(0, str(path))
    try:
        yield
    finally:
        sys.path.remove(str(path))


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    command = shlex.join([".venv/bin/python", os.path.relpath(__file__, ROOT), *sys.argv[1:]])
    with _on_path(ROOT):
        if args.replay:
            return replay(args)
        return run(args, command)


if __name__ == "__main__":
    sys.exit(main())
