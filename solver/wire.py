"""The DSFRO wire contract (``dsfro.v1``, ``proto/dsfro/v1/scheduler.proto``) for its callers:
the messages, the service stub, and requests read from JSON text, JSON files or plain Python
data.

    from solver.wire import SolveRequest, request_from_dict

It needs only protobuf and gRPC: a scheduler with the client install (``pip install dsfro``)
imports it without the solver. The generated modules behind it (``solver._proto``) are private:
their path may change, this one does not.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
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
    GridForecast,
    GridPoint,
    Job,
    JobAssignment,
    JobState,
    JobSummary,
    MigInstance,
    MigLayout,
    MigLayoutChange,
    ModelSpec,
    Node,
    NodePowerAction,
    NodePowerState,
    ObjectiveBreakdown,
    ObjectiveWeights,
    Plan,
    PlanViolation,
    PowerActionKind,
    PowerMargin,
    PowerSaving,
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
    TenantQueue,
    Termination,
    ThroughputProfile,
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


def load_request_json(path: str | Path) -> SolveRequest:
    """A SolveRequest from a protobuf JSON file; RequestFileError says what is wrong and where."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
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


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f'duplicate key "{key}"')
        out[key] = value
    return out


__all__ = [
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
    "GridForecast",
    "GridPoint",
    "Job",
    "JobAssignment",
    "JobState",
    "JobSummary",
    "MigInstance",
    "MigLayout",
    "MigLayoutChange",
    "ModelSpec",
    "Node",
    "NodePowerAction",
    "NodePowerState",
    "ObjectiveBreakdown",
    "ObjectiveWeights",
    "Plan",
    "PlanViolation",
    "PowerActionKind",
    "PowerMargin",
    "PowerSaving",
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
    "TenantQueue",
    "Termination",
    "ThroughputProfile",
    "ValidateSnapshotRequest",
    "ValidateSnapshotResponse",
    "duration_to_proto",
    "load_request_json",
    "message_from_dict",
    "message_from_json",
    "message_to_json",
    "request_from_dict",
    "request_from_json",
    "scheduler_pb2",
    "scheduler_pb2_grpc",
]
