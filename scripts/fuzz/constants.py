"""What the fuzzer knows of the service, and where the repository is."""

from __future__ import annotations

from pathlib import Path

from google.protobuf.message import Message

from solver._proto.dsfro.v1 import scheduler_pb2 as pb

ROOT = Path(__file__).resolve().parent.parent.parent
SERVICE = "dsfro.v1.SchedulerService"
RPCS = ("Solve", "ValidateSnapshot", "EvaluatePlan", "GetServerInfo")
REQUEST_TYPES: dict[str, type[Message]] = {
    "Solve": pb.SolveRequest,
    "ValidateSnapshot": pb.ValidateSnapshotRequest,
    "EvaluatePlan": pb.EvaluatePlanRequest,
    "GetServerInfo": pb.GetServerInfoRequest,
}
CHANNEL_LIMIT = 512 << 20
FAILING_CODES = ("INTERNAL", "UNKNOWN")
SAVED_PER_REASON = 200
"""Failures saved per reason (all are counted)."""

SAVED_REASONS = (
    "INTERNAL", "UNKNOWN", "crash", "invalid-plan-server", "invalid-plan-local", "non-finite",
    "objective-mismatch", "empty-response", "accepted-undecodable", "bad-response",
    "local-validation-disagrees", "check-error", "DEADLINE_EXCEEDED",
)  # fmt: skip
