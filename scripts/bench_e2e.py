"""End-to-end benchmark: solve the bundled instances in-process and over gRPC on loopback.

Prints markdown tables (time to first and final plan, status, gap; the service's response time
against the time budget). Nothing here is asserted: the machines are shared and noisy, so the
figures are recorded in docs/benchmarks.md with the command that made them:

    .venv/bin/python scripts/bench_e2e.py --budget 5 --repeat 3
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from pathlib import Path

import grpc

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver._proto.dsfro.v1 import scheduler_pb2_grpc
from solver.app.convert import enum_label, load_request_json, problem_from_proto
from solver.app.limits import Limits
from solver.core.solver import Solver
from solver.domain import Backend, Plan
from solver.scoring.checker import check_plan
from solver.service.config import ServerConfig
from solver.service.server import build_server

ROOT = Path(__file__).resolve().parent.parent
INSTANCES = ["tiny-1node", "tiny-power", "tiny-migration", "small", "pai", "modern-power", "medium"]


def solve_table(names: list[str], budget: float, repeat: int, backends: list[Backend]) -> str:
    rows = [
        "| instance | GPUs / jobs | backend | configs | first plan (s) | final plan (s) | "
        "status (plan from) | objective | bound | gap |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name in names:
        req = load_request_json(ROOT / "instances" / f"{name}.json")
        base = problem_from_proto(req, Limits())
        gpus = sum(n.available_gpus for n in base.cluster.nodes)
        for backend in backends:
            p = dataclasses.replace(
                base,
                options=dataclasses.replace(
                    base.options, time_budget_seconds=budget, backend=backend
                ),
            )
            runs = [Solver().solve(p) for _ in range(repeat)]
            for r in runs:
                if r.plan.assignments:
                    assert not check_plan(p, r.plan.assignments), "a plan failed the checker"
            s = runs[len(runs) // 2].stats
            first = statistics.median(r.stats.first_plan_seconds for r in runs)
            final = statistics.median(r.stats.wall_seconds for r in runs)
            bound = f"{s.best_bound:.4f}" if s.best_bound is not None else "-"
            gap = f"{100 * s.relative_gap:.3f} %" if s.relative_gap is not None else "-"
            rows.append(
                f"| {name} | {gpus} / {len(p.jobs)} | {backend.name} | {s.num_configurations} | "
                f"{first:.3f} | {final:.3f} | {s.termination.name} ({s.backend_used.name}) | "
                f"{s.objective:.4f} | {bound} | {gap} |"
            )
    return "\n".join(rows)


def service_table(name: str, budget: float, repeat: int, rpc_timeouts: list[float | None]) -> str:
    req = load_request_json(ROOT / "instances" / f"{name}.json")
    req.options.time_budget.FromTimedelta(__import__("datetime").timedelta(seconds=budget))
    server = build_server(ServerConfig(port=0))
    server.start()
    rows = [
        "| instance | time budget (s) | RPC timeout (s) | response (s), median / max | "
        "over the limit (s), max | status | same plan as in-process |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    try:
        direct = Solver().solve(problem_from_proto(req, Limits()))
        with grpc.insecure_channel(
            f"127.0.0.1:{server.port}",
            options=[("grpc.max_receive_message_length", 256 << 20)],
        ) as channel:
            stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)  # type: ignore[no-untyped-call]
            for timeout in rpc_timeouts:
                times: list[float] = []
                responses: list[pb.SolveResponse] = []
                for _ in range(repeat):
                    t = time.monotonic()
                    responses.append(stub.Solve(req, timeout=timeout))
                    times.append(time.monotonic() - t)
                limit = min(budget, timeout) if timeout is not None else budget
                same = all(
                    _plan_key(r.plan) == _plan_key_domain(direct.plan) for r in responses
                )
                status = enum_label(pb.Termination, responses[-1].stats.termination)
                rows.append(
                    f"| {name} | {budget:g} | {timeout if timeout is not None else '-'} | "
                    f"{statistics.median(times):.3f} / {max(times):.3f} | "
                    f"{max(t - limit for t in times):+.3f} | {status} | {same} |"
                )
    finally:
        server.stop(grace=1.0)
    return "\n".join(rows)


def _plan_key(plan: pb.Plan) -> list[tuple[str, str, int, tuple[tuple[str, tuple[int, ...]], ...]]]:
    return [
        (
            a.job,
            a.gpu_type,
            a.sm_clock_mhz,
            tuple((s.node, tuple(s.gpu_indices)) for s in a.placement),
        )
        for a in plan.assignments
    ]


def _plan_key_domain(
    plan: Plan,
) -> list[tuple[str, str, int, tuple[tuple[str, tuple[int, ...]], ...]]]:
    return [
        (
            a.job,
            a.config.gpu_type if a.config else "",
            a.config.sm_clock_mhz if a.config else 0,
            tuple((s.node, s.gpu_indices) for s in a.placement),
        )
        for a in plan.assignments
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=5.0, help="time budget, seconds")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--instances", nargs="*", default=INSTANCES)
    args = parser.parse_args()
    print(f"## Solves in-process (time budget {args.budget:g} s, median of {args.repeat})\n")
    print(solve_table(args.instances, args.budget, args.repeat,
                      [Backend.HEURISTIC, Backend.AUTO]))
    print(f"\n## Over gRPC on loopback (medium, median of {args.repeat})\n")
    print(service_table("medium", args.budget, args.repeat, [None, 2.0]))
    print(service_table("medium", 0.5, args.repeat, [None]).split("\n", 2)[2])


if __name__ == "__main__":
    main()
