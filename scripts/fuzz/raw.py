"""Raw byte mutations of serialized requests, sent as they are."""

from __future__ import annotations

import random

from hypothesis import strategies as st

from scripts.fuzz.values import Draw


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
