"""Values drawn with hypothesis: edge numbers, odd strings, budgets, backends; ``Draw``."""

from __future__ import annotations

import math
import random
from typing import TypeVar

from hypothesis import strategies as st
from hypothesis.errors import Frozen, StopTest
from hypothesis.internal.conjecture.data import ConjectureData

from solver._proto.dsfro.v1 import scheduler_pb2 as pb

T = TypeVar("T")

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
