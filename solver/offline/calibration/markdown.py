"""Markdown formatting shared by the report's sections: percentages, errors, tables."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence


def pct(x: float) -> str:
    """A share as a percentage with one decimal."""
    return f"{x:.1%}"


def err(e: Mapping[str, float]) -> str:
    """Median / worst of a ``numeric.stats`` error, as percentages."""
    return f"{pct(e['median'])} / {pct(e['worst'])}"


def table(header: Sequence[str], rows: Iterable[Sequence[object]], align: str = "") -> str:
    """A Markdown table; ``align`` holds "l" or "r" per column (default: first left, rest right)."""
    align = align or "l" + "r" * (len(header) - 1)
    lines = [
        "| " + " | ".join(header) + " |",
        "| " + " | ".join("---" if a == "l" else "---:" for a in align) + " |",
    ]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def opt_err(e: Mapping[str, float] | None) -> str:
    """``err``, or a dash where there is no error to give."""
    return "—" if e is None else err(e)
