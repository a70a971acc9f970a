"""GPU families by name: which family of the catalog a site's GPU type name belongs to.

Schedulers name GPU types their own way: the catalog's "A100-80GB", Kubernetes' GPU feature
discovery "NVIDIA-A100-SXM4-80GB", a Slurm GRES type "a100". A name belongs to a family when
one of its tokens (split at anything but letters and digits) starts with the family's name and
does not go on with a digit: "NVIDIA-A100-SXM4-80GB", "A100X" and "h100sxm" are of A100 and
H100; "A10G" is of A10; "T400" is not of T4, "GH200" not of H200.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_TOKEN = re.compile(r"[A-Z0-9]+")


def tokens(name: str) -> list[str]:
    """The name's tokens, upper case."""
    return _TOKEN.findall(name.upper())


def family_of(name: str, families: Iterable[str]) -> str | None:
    """The longest of ``families`` the name belongs to; None when it belongs to none."""
    parts = tokens(name)
    best: str | None = None
    for family in families:
        f = family.upper()
        if any(t.startswith(f) and not t[len(f) : len(f) + 1].isdigit() for t in parts) and (
            best is None or len(family) > len(best)
        ):
            best = family
    return best
