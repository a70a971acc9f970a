"""Checking answers: every OK answer decoded and finite, every OK Solve's plan checked by
EvaluatePlan on the server and by the package's checker here."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import grpc
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import DecodeError, Message

from scripts.fuzz.corpus import Case
from scripts.fuzz.server import Server
from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.convert import allocations_from_proto, problem_from_proto
from solver.app.convert_mig import changes_from_proto
from solver.app.convert_power import actions_from_proto
from solver.app.limits import Limits
from solver.app.validation import validate_request
from solver.scoring.evaluation import evaluate_allocations


def finite_message(msg: Message, path: str = "") -> list[str]:
    """Paths of the non-finite floats of a message tree."""
    out: list[str] = []
    for fd, value in msg.ListFields():
        p = f"{path}.{fd.name}" if path else fd.name
        if fd.type in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
            for k, v in enumerate(value if fd.is_repeated else [value]):
                if not math.isfinite(v):
                    out.append(f"{p}[{k}]" if fd.is_repeated else p)
        elif fd.message_type is not None and not fd.message_type.GetOptions().map_entry:
            for k, m in enumerate(value if fd.is_repeated else [value]):
                out.extend(finite_message(m, f"{p}[{k}]" if fd.is_repeated else p))
    return out


@dataclass
class Outcome:
    code: str
    details: str = ""
    seconds: float = 0.0
    problems: list[tuple[str, str]] = field(default_factory=list)
    """(reason, detail) of what is wrong with an OK answer."""
    checked_plan: bool = False
    infeasible: bool = False


class Checker:
    def __init__(self, server: Server, limits: Limits, timeout: float) -> None:
        self.server = server
        self.limits = limits
        self.timeout = timeout

    def call(self, rpc: str, data: bytes) -> tuple[str, bytes | None, str]:
        for attempt in range(20):
            try:
                out: bytes = self.server.calls[rpc](data, timeout=self.timeout)
                return "OK", out, ""
            except grpc.RpcError as e:
                code = e.code().name
                if (
                    code == "RESOURCE_EXHAUSTED"
                    and attempt < 19
                    and "retry later" in (e.details() or "")
                ):
                    time.sleep(0.05 * (attempt + 1))
                    continue
                return code, None, e.details() or ""
        raise AssertionError("unreachable")

    def run(self, case: Case) -> Outcome:
        t = time.monotonic()
        code, out, details = self.call(case.rpc, case.data)
        o = Outcome(code, details, time.monotonic() - t)
        if out is not None:
            try:
                self.check_ok(case, out, o)
            except Exception as e:  # the check itself failing is a finding too
                o.problems.append(("check-error", f"{type(e).__name__}: {e}"))
        return o

    def check_ok(self, case: Case, out: bytes, o: Outcome) -> None:
        response_type = {
            "Solve": pb.SolveResponse,
            "ValidateSnapshot": pb.ValidateSnapshotResponse,
            "EvaluatePlan": pb.EvaluatePlanResponse,
            "GetServerInfo": pb.GetServerInfoResponse,
        }[case.rpc]
        response = response_type()
        try:
            response.ParseFromString(out)
        except DecodeError as e:
            o.problems.append(("bad-response", str(e)))
            return
        bad = finite_message(response)
        if bad:
            o.problems.append(("non-finite", ", ".join(bad[:5])))
        if isinstance(response, pb.SolveResponse):
            self.check_solve(case, response, o)

    def check_solve(self, case: Case, response: pb.SolveResponse, o: Outcome) -> None:
        try:
            req = pb.SolveRequest.FromString(case.data)
        except DecodeError as e:
            o.problems.append(("accepted-undecodable", str(e)))
            return
        if not response.HasField("stats"):
            o.problems.append(("empty-response", "OK Solve without stats (abandoned solve?)"))
            return
        if response.stats.termination == pb.TERMINATION_INFEASIBLE:
            o.infeasible = True
            if not response.plan.assignments:
                return
        o.checked_plan = True
        # 1. EvaluatePlan on the same server.
        ev_req = pb.EvaluatePlanRequest(request=req, plan=response.plan)
        code, out, details = self.call("EvaluatePlan", ev_req.SerializeToString())
        if out is None:
            o.problems.append(("invalid-plan-server", f"EvaluatePlan answered {code}: {details}"))
        else:
            ev = pb.EvaluatePlanResponse.FromString(out)
            if not ev.valid:
                text = "; ".join(f"{v.constraint}: {v.message}" for v in ev.violations[:3])
                o.problems.append(("invalid-plan-server", text))
            elif not _close(ev.objective.total, response.plan.objective.total):
                o.problems.append(
                    (
                        "objective-mismatch",
                        f"Solve {response.plan.objective.total!r} vs EvaluatePlan "
                        f"{ev.objective.total!r}",
                    )
                )
        # 2. The package's checker, here.
        violations = validate_request(req, self.limits)
        if violations:
            v = violations[0]
            o.problems.append(("local-validation-disagrees", f"{v.field}: {v.description}"))
            return
        problem = problem_from_proto(req, self.limits)
        local = evaluate_allocations(
            problem,
            allocations_from_proto(response.plan),
            changes_from_proto(response.plan),
            actions_from_proto(response.plan),
        )
        if local.violations:
            text = "; ".join(f"{v.constraint}: {v.message}" for v in local.violations[:3])
            o.problems.append(("invalid-plan-local", text))
        elif local.plan is not None and not math.isfinite(local.plan.objective.total):
            o.problems.append(("non-finite", "local objective"))


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-6 * max(1.0, abs(a), abs(b))
