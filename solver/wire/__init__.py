"""The DSFRO wire contract (``dsfro.v1``, ``proto/dsfro/v1/scheduler.proto``) for its callers:
the messages, the service stub, requests read from JSON text, JSON files or plain Python data,
and a grid schedule (hourly carbon intensity and price, CSV) turned into the snapshot's
``GridForecast``.

    from solver.wire import SolveRequest, request_from_dict

It needs only protobuf and gRPC: a scheduler with the client install (``pip install dsfro``)
imports it without the solver. The generated modules behind it (``solver._proto``) are private:
their path may change, this one does not.
"""

from __future__ import annotations

import codecs
import csv
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from google.protobuf import json_format
from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import Message

from solver._proto.dsfro.v1 import scheduler_pb2, scheduler_pb2_grpc
from solver._proto.dsfro.v1.scheduler_pb2 import (
    Allocation,
    AttainedService,
    Backend,
    ClusterSnapshot,
    EnergyBasis,
    EnergyBudget,
    EvaluatePlanRequest,
    EvaluatePlanResponse,
    Fairness,
    FairnessMode,
    FairnessScope,
    FieldViolation,
    GetServerInfoRequest,
    GetServerInfoResponse,
    GpuSlice,
    GpuType,
    GpuTypeSummary,
    GridForecast,
    GridPoint,
    Job,
    JobAssignment,
    JobState,
    JobSummary,
    LabelOperator,
    LabelRequirement,
    MigGeometry,
    MigInstance,
    MigLayout,
    MigLayoutChange,
    MigProfile,
    ModelSpec,
    Node,
    NodePowerAction,
    NodePowerState,
    NodeSelectorTerm,
    ObjectiveBreakdown,
    ObjectiveWeights,
    Plan,
    PlanViolation,
    PowerActionKind,
    PowerMargin,
    PowerSaving,
    PreferredSchedulingTerm,
    ProfilePoint,
    QueueReason,
    QueueUsage,
    RackPowerBudget,
    ResourceQuota,
    ResourceUsage,
    SliceRequest,
    SolveOptions,
    SolveRequest,
    SolveResponse,
    SolveStats,
    Taint,
    TaintEffect,
    TenantQueue,
    Termination,
    ThroughputProfile,
    Toleration,
    TolerationOperator,
    ValidateSnapshotRequest,
    ValidateSnapshotResponse,
)
from solver._proto.dsfro.v1.scheduler_pb2_grpc import SchedulerServiceStub

M = TypeVar("M", bound=Message)

SERVICE_NAME = "dsfro.v1.SchedulerService"
"""The full name of the service, as health checks and reflection name it."""


class RequestFileError(ValueError):
    """A request that can't be read: an unreadable file, malformed JSON, JSON that is not an
    object, or an object that is not the expected message (an unknown field, a wrong type)."""


def message_from_dict(data: Mapping[str, Any], message: type[M], where: str = "request") -> M:
    """A message of type `message` from its protobuf JSON form as Python data (field names in
    lowerCamelCase or as in the proto; durations as "5s"); RequestFileError names the field."""
    if not isinstance(data, Mapping):
        raise RequestFileError(
            f"{where}: expected a JSON object (a {message.DESCRIPTOR.name}), "
            f"got {type(data).__name__}"
        )
    out = message()
    try:
        json_format.ParseDict(data, out)
    except json_format.ParseError as e:
        raise RequestFileError(f"{where}: not a valid {message.DESCRIPTOR.name}: {e}") from e
    return out


def message_from_json(text: str | bytes, message: type[M], where: str = "request") -> M:
    """A message from protobuf JSON text; duplicate keys are refused, as a typo would be."""
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except json.JSONDecodeError as e:
        raise RequestFileError(f"{where}:{e.lineno}:{e.colno}: malformed JSON: {e.msg}") from e
    except (ValueError, UnicodeDecodeError) as e:
        raise RequestFileError(f"{where}: malformed JSON: {e}") from e
    if not isinstance(data, dict):
        raise RequestFileError(f"{where}: expected a JSON object (a {message.DESCRIPTOR.name})")
    return message_from_dict(data, message, where)


def request_from_dict(data: Mapping[str, Any], where: str = "request") -> SolveRequest:
    """A SolveRequest from Python data in its protobuf JSON form."""
    return message_from_dict(data, SolveRequest, where)


def request_from_json(text: str | bytes, where: str = "request") -> SolveRequest:
    """A SolveRequest from protobuf JSON text."""
    return message_from_json(text, SolveRequest, where)


_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),  # before UTF-16's: it begins with the same two bytes
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def decode_text(data: bytes) -> str:
    """Text as editors save it: UTF-8 with or without a byte-order mark, or UTF-16 or UTF-32
    with one (Windows Notepad and PowerShell's redirection write those); UnicodeDecodeError
    for other bytes."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            return data.decode(codec)
    return data.decode("utf-8-sig")


def read_text(path: str | Path) -> str:
    """A text file (``decode_text``); OSError, or UnicodeDecodeError."""
    return decode_text(Path(path).read_bytes())


def load_request_json(path: str | Path) -> SolveRequest:
    """A SolveRequest from a protobuf JSON file; RequestFileError says what is wrong and where."""
    path = Path(path)
    try:
        text = read_text(path)
    except (OSError, UnicodeDecodeError) as e:
        raise RequestFileError(f"{path}: cannot read: {e}") from e
    return message_from_json(text, SolveRequest, str(path))


def message_to_json(message: Message) -> str:
    """Protobuf JSON of a message, with fields at their default values shown too."""
    return json_format.MessageToJson(message, indent=2, always_print_fields_with_no_presence=True)


def duration_to_proto(seconds: float) -> Duration:
    """A Duration of `seconds`, to the nanosecond."""
    d = Duration()
    d.FromNanoseconds(round(seconds * 1e9))
    return d


MAX_JOB_WEIGHT = 1e3
"""A job's or a tenant queue's weight (unset: 1). CP-SAT scales the objective to integers
(x1e6), so objective weight x job weight x 1e6 must stay well inside int64."""
MIN_JOB_WEIGHT = 1e-3
"""The least job or queue weight: weights are relative, and max-min fairness divides by them,
so 1e-3 to 1e3 keeps the model's coefficients within a ratio of 1e6, which LP and MIP solvers
resolve (a queue weight of 1e-200 made HiGHS refuse the model and CP-SAT overflow; 1e-320 gave
an infinite coefficient)."""


def weight_problem(value: float) -> str | None:
    """What is wrong with a job's or a queue's weight, or None."""
    if not (math.isfinite(value) and MIN_JOB_WEIGHT <= value <= MAX_JOB_WEIGHT):
        return f"must be a number from {MIN_JOB_WEIGHT:g} to {MAX_JOB_WEIGHT:g}, got {value:g}"
    return None


MAX_CARBON_G_PER_KWH = 5000.0
"""Above any grid: lignite, the dirtiest source, is about 1,000 gCO2/kWh (IPCC AR5)."""
MAX_PRICE_PER_KWH = 1e6
"""A bound on a price (any currency): keeps cost sums finite."""
MAX_GRID_POINTS = 24 * 31
"""A month of hourly periods: more than any deferral needs, and a bound on the request's size."""


class GridScheduleError(ValueError):
    """A grid schedule that cannot be read; the message names the file, row and column."""


@dataclass(frozen=True)
class GridHour:
    """One row of a grid schedule: the hour's start (UTC), gCO2/kWh, price per kWh (or None)."""

    start: datetime
    carbon_g_per_kwh: float
    price_per_kwh: float | None = None


def read_grid_schedule(path: str | Path) -> list[GridHour]:
    """The rows of a grid schedule CSV (``time`` an ISO time, UTC unless it gives an offset;
    ``carbon_g_per_kwh``; optional ``price_per_kwh``, which may be negative), in file order,
    times increasing; a UTF-8 byte-order mark is allowed."""
    where = str(path)
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            rows = list(csv.DictReader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise GridScheduleError(f"{where}: cannot read: {e}") from e
    if not rows:
        raise GridScheduleError(f"{where}: no rows (columns: time, carbon_g_per_kwh)")
    for column in ("time", "carbon_g_per_kwh"):
        if column not in rows[0]:
            raise GridScheduleError(f"{where}: column {column!r} missing")
    priced = "price_per_kwh" in rows[0]
    out: list[GridHour] = []
    for i, r in enumerate(rows):
        at = f"{where}:{i + 2}"
        start = _schedule_time(r["time"] or "", f"{at}: time")
        if out and start <= out[-1].start:
            raise GridScheduleError(f"{at}: time {r['time']} is not after the row before")
        carbon = _schedule_number(r, "carbon_g_per_kwh", at, 0.0, MAX_CARBON_G_PER_KWH)
        price = (
            _schedule_number(r, "price_per_kwh", at, -MAX_PRICE_PER_KWH, MAX_PRICE_PER_KWH)
            if priced
            else None
        )
        out.append(GridHour(start, carbon, price))
    return out


def grid_forecast_at(
    schedule: Sequence[GridHour], now: datetime, hours: int = 48
) -> GridForecast | None:
    """The snapshot's forecast at `now` (UTC): the schedule's row in force now, from now, and
    the rows that start in the next `hours` hours; None when no row is in force now (a row
    lasts until the next one; the last as long as the one before it, or an hour). More rows
    than a request holds (MAX_GRID_POINTS: a schedule of minutes) are sent as hourly means."""
    current = [h for h in schedule if h.start <= now]
    if not current:
        return None
    first = current[-1]
    if first is schedule[-1]:
        last = first.start - schedule[-2].start if len(schedule) > 1 else timedelta(hours=1)
        if now >= first.start + last:
            return None
    rows = [first, *(h for h in schedule if now < h.start <= now + timedelta(hours=hours))]
    if len(rows) > MAX_GRID_POINTS:  # a schedule of minutes: its hours, as a request holds
        rows = hourly_periods(rows, now, hours + 1)
    out = GridForecast()
    for k, h in enumerate(rows):
        point = out.points.add(carbon_g_per_kwh=h.carbon_g_per_kwh)
        point.start.CopyFrom(duration_to_proto(0.0 if k == 0 else (h.start - now).total_seconds()))
        if h.price_per_kwh is not None:
            point.price_per_kwh = h.price_per_kwh
    return out


def hourly_periods(rows: Sequence[GridHour], start: datetime, hours: int) -> list[GridHour]:
    """`rows` hour by hour from `start`, for at most `hours` hours: each hour the time-weighted
    mean of the rows in force in it. A row lasts until the next one starts, the last as long as
    the one before it (an hour if it is alone), as on the wire: half-hourly, five-minute or
    irregular schedules (grid operators publish each) read as the hours they cover."""
    at = [(r.start - start).total_seconds() for r in rows]
    ends = [*at[1:], at[-1] + (at[-1] - at[-2] if len(at) > 1 else 3600.0)]
    cover = min(ends[-1], hours * 3600.0)
    priced = rows[0].price_per_kwh is not None
    out: list[GridHour] = []
    i = 0
    for k in range(max(1, math.ceil(cover / 3600.0 - 1e-9))):
        lo, hi = k * 3600.0, min((k + 1) * 3600.0, cover)
        while ends[i] <= lo:
            i += 1
        carbon = price = weight = 0.0
        j = i
        while j < len(at) and at[j] < hi:
            overlap = min(ends[j], hi) - max(at[j], lo)
            carbon += rows[j].carbon_g_per_kwh * overlap
            price += (rows[j].price_per_kwh or 0.0) * overlap
            weight += overlap
            j += 1
        hour = start + timedelta(hours=k)
        out.append(GridHour(hour, carbon / weight, price / weight if priced else None))
    return out


def _schedule_time(text: str, where: str) -> datetime:
    """The time in UTC, naive: a time with an offset is converted (before, ``10:00+09:00`` was
    read as 10:00 UTC), one without is taken as UTC."""
    try:
        at = datetime.fromisoformat(text.strip())
    except ValueError as e:
        raise GridScheduleError(f"{where} {text!r} is not an ISO time") from e
    if at.tzinfo is not None:
        at = at.astimezone(UTC)
    return at.replace(tzinfo=None)


def _schedule_number(
    row: Mapping[str, str], column: str, where: str, least: float, most: float
) -> float:
    text = (row.get(column) or "").strip()
    try:
        value = float(text)
    except ValueError as e:
        raise GridScheduleError(f"{where}: {column} {text!r} is not a number") from e
    if not (math.isfinite(value) and least <= value <= most):
        raise GridScheduleError(f"{where}: {column} must be in [{least:g}, {most:g}], got {text}")
    return value


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f'duplicate key "{key}"')
        out[key] = value
    return out


__all__ = [
    "MAX_JOB_WEIGHT",
    "MIN_JOB_WEIGHT",
    "SERVICE_NAME",
    "Allocation",
    "AttainedService",
    "Backend",
    "ClusterSnapshot",
    "EnergyBasis",
    "EnergyBudget",
    "EvaluatePlanRequest",
    "EvaluatePlanResponse",
    "Fairness",
    "FairnessMode",
    "FairnessScope",
    "FieldViolation",
    "GetServerInfoRequest",
    "GetServerInfoResponse",
    "GpuSlice",
    "GpuType",
    "GpuTypeSummary",
    "GridForecast",
    "GridHour",
    "GridPoint",
    "GridScheduleError",
    "Job",
    "JobAssignment",
    "JobState",
    "JobSummary",
    "LabelOperator",
    "LabelRequirement",
    "MigGeometry",
    "MigInstance",
    "MigLayout",
    "MigLayoutChange",
    "MigProfile",
    "ModelSpec",
    "Node",
    "NodePowerAction",
    "NodePowerState",
    "NodeSelectorTerm",
    "ObjectiveBreakdown",
    "ObjectiveWeights",
    "Plan",
    "PlanViolation",
    "PowerActionKind",
    "PowerMargin",
    "PowerSaving",
    "PreferredSchedulingTerm",
    "ProfilePoint",
    "QueueReason",
    "QueueUsage",
    "RackPowerBudget",
    "RequestFileError",
    "ResourceQuota",
    "ResourceUsage",
    "SchedulerServiceStub",
    "SliceRequest",
    "SolveOptions",
    "SolveRequest",
    "SolveResponse",
    "SolveStats",
    "Taint",
    "TaintEffect",
    "TenantQueue",
    "Termination",
    "ThroughputProfile",
    "Toleration",
    "TolerationOperator",
    "ValidateSnapshotRequest",
    "ValidateSnapshotResponse",
    "duration_to_proto",
    "grid_forecast_at",
    "hourly_periods",
    "load_request_json",
    "message_from_dict",
    "message_from_json",
    "message_to_json",
    "read_grid_schedule",
    "request_from_dict",
    "request_from_json",
    "scheduler_pb2",
    "scheduler_pb2_grpc",
    "weight_problem",
]
