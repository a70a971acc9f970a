"""The A/B load scenario's bookkeeping (scripts.reliability.ab): its environment pairs and the
per-round comparison it prints."""

from __future__ import annotations

from collections import Counter

import pytest

from scripts.reliability.ab import Block, parse_env, summary


def test_environment_pairs_are_read_and_a_bad_one_names_its_flag() -> None:
    assert parse_env(["A=1", "B=x=y"], "--b-env") == {"A": "1", "B": "x=y"}
    with pytest.raises(SystemExit, match="--b-env: expected KEY=VALUE, got 'oops'"):
        parse_env(["oops"], "--b-env")


def _block(r: int, side: str, optimal: int, fallback: int) -> Block:
    terminations = Counter({"OPTIMAL": optimal, "FEASIBLE": 10, "FALLBACK": fallback})
    return Block(r, side, optimal + 10 + fallback, terminations, [0.4, 0.5], 3)


def test_the_summary_compares_the_sides_round_by_round() -> None:
    blocks = [
        _block(1, "A", optimal=5, fallback=0),
        _block(1, "B", optimal=2, fallback=1),
        _block(2, "A", optimal=1, fallback=4),
        _block(2, "B", optimal=3, fallback=0),
    ]
    text = summary(blocks, ("A", "B"))
    assert "| A | 15.0 | 3.0 | 10.0 | 2.0 |" in text
    assert "| B | 13.0 | 2.5 | 10.0 | 0.5 |" in text
    assert "answers in 2 of 2 rounds, in OPTIMAL answers in 1, with fewer FALLBACK" in text
    assert text.endswith("answers in 1.")
    assert _block(1, "A", 5, 0).cells() == [1, "A", 15, 5, 10, 0, 0, "400 / 500", 3]
