"""The [carbon] table of an operator profile: how carbon-aware rounds trade carbon for time
(docs/carbon.md), for requests whose grid forecast leaves them unset.

    [carbon]
    min_saving = 0.1          # least share of a job's carbon that waiting must save
    saving_per_delay = 0.25   # the price of waiting, per run-length waited
    scale_energy = false      # scale the energy weight by the intensity now / next day's mean

Apart from ``solver.app.profile`` to keep that module's size. Nothing here applies to a request
without a grid: the forecast comes from the scheduler.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.validation.grid import MAX_SAVING_PER_DELAY
from solver.grid import DEFAULT_MIN_SAVING

TABLE = "carbon"
KEYS = ("min_saving", "saving_per_delay", "scale_energy")


@dataclass(frozen=True)
class ProfileCarbon:
    """What the profile sets; None: not in the file."""

    min_saving: float | None = None
    saving_per_delay: float | None = None
    scale_energy: bool | None = None


def read_carbon(table: Mapping[str, Any], bad: Callable[[str, str], None]) -> ProfileCarbon:
    """The table's values, each bad one reported through `bad` naming its key."""
    out: dict[str, Any] = {}
    for key, low, high, closed in (
        ("min_saving", 0.0, 1.0, False),
        ("saving_per_delay", 0.0, MAX_SAVING_PER_DELAY, True),
    ):
        if key not in table:
            continue
        value = table[key]
        number = isinstance(value, int | float) and not isinstance(value, bool)
        ok = number and math.isfinite(value) and low <= value <= high
        ok = ok and (closed or value < high)
        if ok:
            out[key] = float(value)
        else:
            bracket = "]" if closed else ")"
            bad(f"{TABLE}.{key}", f"must be a number in [{low:g}, {high:g}{bracket}, got {value!r}")
    if "scale_energy" in table:
        if isinstance(table["scale_energy"], bool):
            out["scale_energy"] = table["scale_energy"]
        else:
            bad(f"{TABLE}.scale_energy", f"must be true or false, got {table['scale_energy']!r}")
    return ProfileCarbon(**out)


def apply_carbon(request: pb.SolveRequest, carbon: ProfileCarbon) -> None:
    """Fill the request's grid forecast options it leaves unset (only where it has a grid)."""
    if not request.cluster.HasField("grid"):
        return
    g = request.cluster.grid
    if carbon.min_saving is not None and not g.HasField("min_saving"):
        g.min_saving = carbon.min_saving
    if carbon.saving_per_delay is not None and not g.HasField("saving_per_delay"):
        g.saving_per_delay = carbon.saving_per_delay
    if carbon.scale_energy is not None and not g.scale_energy:
        g.scale_energy = carbon.scale_energy


def format_carbon(carbon: ProfileCarbon) -> list[str]:
    """The table's TOML lines, defaults marked."""
    values = (
        ("min_saving", carbon.min_saving, DEFAULT_MIN_SAVING),
        ("saving_per_delay", carbon.saving_per_delay, 0.0),
    )
    lines = ["", f"[{TABLE}]"]
    for key, value, default in values:
        shown = value if value is not None else default
        lines.append(f"{key} = {shown!r}" + ("  # default" if value is None else ""))
    scale = carbon.scale_energy
    lines.append(
        f"scale_energy = {'true' if scale else 'false'}" + ("  # default" if scale is None else "")
    )
    return lines
