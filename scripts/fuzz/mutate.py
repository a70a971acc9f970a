"""Structure-aware mutation: walking a message's descriptors, and messages generated from
their descriptors alone."""

from __future__ import annotations

import contextlib
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from hypothesis import strategies as st

from scripts.fuzz.values import (
    BLOWUP_SIZES,
    FLOAT_EDGES,
    FLOATS,
    INT32_EDGES,
    INT32_MAX,
    INT32_MIN,
    INT32S,
    INT64_EDGES,
    INT64S,
    SPECIAL_STRINGS,
    TEXTS,
    UINT32S,
    UINT64S,
    Draw,
)


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
