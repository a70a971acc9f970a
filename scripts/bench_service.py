"""A benchmark family solved end to end through the gRPC service on loopback.

The server runs in this process with its sub-problems on local worker processes, or on Ray
(`--ray-address local` starts a Ray on this machine; or give a cluster's address). The plan
that comes back is checked again through EvaluatePlan. Figures go to docs/benchmarks.md:

    .venv/bin/python scripts/bench_service.py --family xl --seed 1
    .venv/bin/python scripts/bench_service.py --family xl --seed 1 --ray-address local
"""

from __future__ import annotations

import argparse
import time

import grpc

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver._proto.dsfro.v1 import scheduler_pb2_grpc
from solver.app.convert import enum_label
from solver.app.limits import Limits
from solver.offline.generate import FAMILIES, generate, spec_from_args
from solver.service.config import ServerConfig
from solver.service.server import build_server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", choices=list(FAMILIES), default="xl")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--ray-address", default=None)
    args = parser.parse_args()
    request = generate(spec_from_args(["--family", args.family, "--seed", str(args.seed)]))
    budget = FAMILIES[args.family][2]
    request.options.time_budget.FromMilliseconds(int(budget * 1000))
    server = build_server(
        ServerConfig(port=0, ray_address=args.ray_address,
                     limits=Limits(max_time_budget_seconds=600))
    )
    server.start()
    limit = 512 << 20
    options = [("grpc.max_send_message_length", limit), ("grpc.max_receive_message_length", limit)]
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}", options=options) as channel:
            stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)  # type: ignore[no-untyped-call]
            t = time.monotonic()
            response = stub.Solve(request, timeout=budget + 60)
            elapsed = time.monotonic() - t
            check = stub.EvaluatePlan(
                pb.EvaluatePlanRequest(request=request, plan=response.plan), timeout=600
            )
    finally:
        server.stop(grace=5.0)
    s = response.stats
    running = sum(a.state == pb.JOB_STATE_RUNNING for a in response.plan.assignments)
    print("| family | seed | executor | request (MiB) | response (s) | first plan (s) | status "
          "(plan from) | objective | gap | jobs running | EvaluatePlan |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    print(
        f"| {args.family} | {args.seed} | {'ray' if args.ray_address else 'local'} | "
        f"{request.ByteSize() / 2**20:.1f} | {elapsed:.2f} | "
        f"{s.time_to_first_plan.ToTimedelta().total_seconds():.2f} | "
        f"{enum_label(pb.Termination, s.termination)} ({enum_label(pb.Backend, s.backend_used)}) | "
        f"{s.objective:.2f} | {100 * s.relative_gap:.3f} % | {running:,} / "
        f"{len(response.plan.assignments):,} | {'valid' if check.valid else 'INVALID'} |"
    )
    print(f"\ndetail: {s.detail}")


if __name__ == "__main__":
    main()
