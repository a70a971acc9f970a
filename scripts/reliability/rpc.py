"""Calls to the service: method paths, channel options, requests (benchmark snapshots with a
budget and a backend), status details, and one Solve blocking or in the background."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import grpc
from google.rpc import error_details_pb2, status_pb2

import solver
from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.offline.generate import generate, spec_from_args

SERVICE = "/dsfro.v1.SchedulerService/"
HEALTH_CHECK = "/grpc.health.v1.Health/Check"
MESSAGE_LIMIT = 512 << 20
CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", MESSAGE_LIMIT),
    ("grpc.max_receive_message_length", MESSAGE_LIMIT),
]


def retry_delay(error: Any) -> float | None:
    """The google.rpc.RetryInfo delay of a failed call, in seconds, or None."""
    for key, value in error.trailing_metadata() or ():
        if key != "grpc-status-details-bin":
            continue
        status = status_pb2.Status.FromString(value)
        for detail in status.details:
            if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
                info = error_details_pb2.RetryInfo()
                detail.Unpack(info)
                return float(info.retry_delay.ToTimedelta().total_seconds())
    return None


def code_name(error: Any) -> str:
    code = error.code()
    return str(code.name) if code is not None else "UNKNOWN"


def termination(response: pb.SolveResponse) -> str:
    return pb.Termination.Name(response.stats.termination).removeprefix("TERMINATION_")


def with_options(
    request: pb.SolveRequest, budget: float, backend: int = pb.BACKEND_AUTO
) -> pb.SolveRequest:
    out = pb.SolveRequest()
    out.CopyFrom(request)
    out.options.time_budget.FromMilliseconds(round(budget * 1000))
    out.options.backend = backend  # type: ignore[assignment]
    return out


def load_snapshot(family: str, seed: int, cache_dir: Path) -> pb.SolveRequest:
    """The benchmark family's snapshot, generated once and cached as binary protobuf."""
    path = cache_dir / f"{family}-seed{seed}-dsfro{solver.__version__}.binpb"
    if path.exists():
        return pb.SolveRequest.FromString(path.read_bytes())
    request = generate(spec_from_args(["--family", family, "--seed", str(seed)]))
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_bytes(request.SerializeToString())
    tmp.replace(path)
    return request


def solve_once(
    channel: Any, request: bytes, timeout: float
) -> tuple[float, pb.SolveResponse | None, str]:
    """(seconds, the response or None, the status code name) of one blocking Solve."""
    t = time.monotonic()
    try:
        raw = channel.unary_unary(SERVICE + "Solve")(request, timeout=timeout)
    except grpc.RpcError as e:
        return time.monotonic() - t, None, f"{code_name(e)}: {e.details()}"
    return time.monotonic() - t, pb.SolveResponse.FromString(raw), "OK"


class Background:
    """One Solve on a thread of its own: .result() waits for (seconds, response, code)."""

    def __init__(self, channel: Any, request: bytes, timeout: float) -> None:
        self.sent = time.monotonic()
        self.done_at = 0.0
        self._out: tuple[float, pb.SolveResponse | None, str] | None = None
        self._call = channel.unary_unary(SERVICE + "Solve").future(request, timeout=timeout)
        self._call.add_done_callback(self._done)

    def _done(self, _: Any) -> None:
        self.done_at = time.monotonic()

    def cancel(self) -> None:
        self._call.cancel()

    def result(self) -> tuple[float, pb.SolveResponse | None, str]:
        try:
            raw = self._call.result()
            out = pb.SolveResponse.FromString(raw)
            code = "OK"
        except grpc.FutureCancelledError:
            out, code = None, "CANCELLED"
        except grpc.RpcError as e:
            out, code = None, f"{code_name(e)}: {e.details()}"
        while not self.done_at:
            time.sleep(0.001)
        return self.done_at - self.sent, out, code
