"""Slurm host lists (``node[1-3,7],gpu-a[01-02]``) and index lists (``0-3,6``), both ways.

Slurm prints node sets and GPU indices in these compressed forms; the adapter expands them to
plain names and numbers and writes node lists back as plain comma-separated names (which
``scontrol`` accepts)."""

from __future__ import annotations

import re

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


class HostlistError(ValueError):
    """A host or index list that is not in Slurm's syntax."""


def _split_top(text: str) -> list[str]:
    """`text` split at the commas outside brackets."""
    parts: list[str] = []
    depth, start = 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise HostlistError(f"unbalanced ']' in {text!r}")
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise HostlistError(f"unbalanced '[' in {text!r}")
    parts.append(text[start:])
    return [p for p in (s.strip() for s in parts) if p]


def expand_ranges(text: str) -> list[str]:
    """``01-03,7`` -> ["01", "02", "03", "7"], keeping each range's zero padding."""
    out: list[str] = []
    for part in text.split(","):
        m = _RANGE.match(part.strip())
        if m is None:
            raise HostlistError(f"not a range: {part!r} in {text!r}")
        lo, hi = m.group(1), m.group(2)
        if hi is None:
            out.append(lo)
            continue
        if int(hi) < int(lo):
            raise HostlistError(f"descending range {part!r} in {text!r}")
        width = len(lo) if lo.startswith("0") else 0
        out.extend(str(i).zfill(width) for i in range(int(lo), int(hi) + 1))
    return out


def _expand_one(name: str) -> list[str]:
    open_ = name.find("[")
    if open_ < 0:
        if "]" in name:
            raise HostlistError(f"unbalanced ']' in {name!r}")
        return [name]
    close = name.find("]", open_)
    if close < 0:
        raise HostlistError(f"unbalanced '[' in {name!r}")
    head, ranges, tail = name[:open_], name[open_ + 1 : close], name[close + 1 :]
    return [head + mid + rest for mid in expand_ranges(ranges) for rest in _expand_one(tail)]


def expand(hostlist: str) -> list[str]:
    """The host names of a Slurm host list, in order (``""`` and ``"(null)"`` -> [])."""
    text = hostlist.strip()
    if text in ("", "(null)", "None"):
        return []
    return [host for part in _split_top(text) for host in _expand_one(part)]


def indices(text: str) -> list[int]:
    """GPU indices of an ``IDX:`` list: ``0-2,5`` -> [0, 1, 2, 5]; ``N/A`` -> []."""
    text = text.strip()
    if text in ("", "N/A"):
        return []
    return [int(i) for i in expand_ranges(text)]


def join(hosts: list[str] | tuple[str, ...]) -> str:
    """A node list for ``scontrol`` (plain names, comma-separated)."""
    return ",".join(hosts)
