"""The ``dsfro`` command: solve, validate or export an instance file, or run the server.

Instance files are SolveRequests in protobuf JSON, the same schema as the wire. Exit codes:
0 success, 2 bad input (unreadable file, malformed JSON, unknown field, invalid request),
1 internal error. Errors go to stderr as one line, never as a traceback (``-v`` logs it).
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from solver import orchestrator
from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver._proto.dsfro.v1 import scheduler_pb2_grpc
from solver.api.convert import (
    RequestFileError,
    duration_to_proto,
    load_request_json,
    message_to_json,
    problem_from_proto,
    result_to_proto,
)
from solver.api.profile import apply_profile
from solver.api.service import add_server_arguments, run_server
from solver.api.validation import Limits, duration_seconds, validate_request
from solver.exact import formulation
from solver.model import configs
from solver.offline import calibration, generate
from solver.offline.commands import add_commands, add_profile_option
from solver.search.executor import make_executor

log = logging.getLogger("dsfro")

_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|h)?\s*$")
_UNIT_SECONDS = {"ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_INT32_MAX = 2**31 - 1
_REMOTE_SLACK_SECONDS = 5.0
"""RPC timeout beyond the time budget: the service answers within the budget plus a margin."""
_BACKENDS = {
    "auto": pb.AUTO,
    "cpsat": pb.CPSAT,
    "heuristic": pb.HEURISTIC,
    "aggregate": pb.AGGREGATE,
    "highs": pb.HIGHS,
    "decomposed": pb.DECOMPOSED,
    "pyomo": pb.PYOMO,
}
EXPORT_FORMATS = ("mps", "lp")


def parse_duration(text: str) -> float:
    """Seconds of ``5s``, ``500ms``, ``1.5s``, ``2m``, ``1h`` (a bare number is seconds)."""
    m = _DURATION.match(text)
    if m is None:
        raise argparse.ArgumentTypeError(
            f"invalid duration {text!r}: use e.g. 5s, 500ms, 1.5s or 2m"
        )
    return float(m.group(1)) * _UNIT_SECONDS[m.group(2) or "s"]


def _int32(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid integer {text!r}") from None
    if not -_INT32_MAX - 1 <= n <= _INT32_MAX:
        raise argparse.ArgumentTypeError(f"{text} is out of range")
    return n


class InputError(Exception):
    """Bad input that is already explained on stderr: exit 2."""


class RemoteError(Exception):
    """The service failed the call, already explained on stderr: exit 1."""


# ---------------------------------------------------------------- output


def compact_indices(indices: Iterable[int]) -> str:
    """``0,1,2,3,6`` as ``0-3,6``."""
    out: list[str] = []
    run: list[int] = []
    for i in sorted(indices):
        if run and i == run[-1] + 1:
            run.append(i)
            continue
        if run:
            out.append(_run(run))
        run = [i]
    if run:
        out.append(_run(run))
    return ",".join(out)


def _run(run: list[int]) -> str:
    return str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}"


def format_placement(placement: Iterable[pb.GpuSlice]) -> str:
    """``node:indices`` per node, e.g. ``a100-0:0-3 a100-1:0,2``."""
    per_node: dict[str, list[int]] = {}
    for s in placement:
        per_node.setdefault(s.node, []).extend(s.gpu_indices)
    return " ".join(f"{node}:{compact_indices(idx)}" for node, idx in per_node.items())


def format_plan(plan: pb.Plan) -> str:
    """One line per job: where and how it runs, or why it waits."""
    header = [
        "JOB",
        "STATE",
        "GPU",
        "DPxTPxPP",
        "CLOCK",
        "GPUS",
        "SAMPLES/S",
        "WATTS",
        "MIGRATED",
        "NOTE",
    ]
    rows = [header]
    for a in plan.assignments:
        migrated = "yes" if a.migrated else "no"
        if a.state == pb.RUNNING:
            rows.append(
                [
                    a.job,
                    "RUNNING",
                    a.gpu_type,
                    f"{a.data_parallel}x{a.tensor_parallel}x{a.pipeline_parallel}",
                    f"{a.sm_clock_mhz} MHz",
                    format_placement(a.placement),
                    f"{a.samples_per_second:.1f}",
                    f"{a.watts:.0f}",
                    migrated,
                    "",
                ]
            )
        else:
            note = pb.QueueReason.Name(a.queue_reason)
            if a.queue_detail:
                note += f": {a.queue_detail}"
            rows.append(
                [a.job, pb.JobState.Name(a.state), "-", "-", "-", "-", "-", "-", migrated, note]
            )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows
    )


def format_stats(stats: pb.SolveStats, objective: pb.ObjectiveBreakdown) -> str:
    lines = [
        f"termination     {pb.Termination.Name(stats.termination)} "
        f"(backend {pb.Backend.Name(stats.backend_used)})",
        f"objective       {stats.objective:.6g}  (throughput {objective.throughput:.6g}, "
        f"energy {objective.energy:.6g}, migration {objective.migration:.6g}, "
        f"locality {objective.locality:.6g}, deadline {objective.deadline:.6g})",
    ]
    if stats.HasField("best_bound"):
        bound = f"best bound      {stats.best_bound:.6g}"
        if stats.HasField("relative_gap"):
            bound += f"  (gap {stats.relative_gap:.2%})"
        lines.append(bound)
    lines += [
        f"time            first plan {duration_seconds(stats.time_to_first_plan):.3f}s, "
        f"wall {duration_seconds(stats.wall_time):.3f}s",
        f"configurations  {stats.num_configurations} "
        f"(of {stats.num_configurations_enumerated} enumerated)",
    ]
    if stats.detail:
        lines.append(f"detail          {stats.detail}")
    return "\n".join(lines)


def format_response(resp: pb.SolveResponse) -> str:
    return format_plan(resp.plan) + "\n\n" + format_stats(resp.stats, resp.plan.objective)


# ---------------------------------------------------------------- commands


def _load_valid(path: str, limits: Limits, req: pb.SolveRequest | None = None) -> pb.SolveRequest:
    """The request of a file, validated; violations are printed to stderr."""
    if req is None:
        req = load_request_json(path)
    violations = validate_request(req, limits)
    if violations:
        for v in violations:
            print(f"{v.field}: {v.description}", file=sys.stderr)
        print(f"dsfro: {path}: {len(violations)} problem(s)", file=sys.stderr)
        raise InputError
    return req


def cmd_solve(args: argparse.Namespace) -> int:
    limits = Limits()
    req = load_request_json(args.file)
    if args.profile is not None:
        apply_profile(req, args.profile)
    o = req.options
    if args.time_budget is not None:
        o.time_budget.CopyFrom(duration_to_proto(args.time_budget))
    if args.backend is not None:
        o.backend = _BACKENDS[args.backend]
    if args.seed is not None:
        o.seed = args.seed
    if args.threads is not None:
        o.threads = args.threads
    if args.pyomo_solver is not None:
        o.pyomo_solver = args.pyomo_solver
    if args.server:
        resp = _solve_remote(args.server, req)
    else:
        _load_valid(args.file, limits, req)
        problem = problem_from_proto(req, limits)
        executor = (
            make_executor(args.ray_address) if orchestrator.decomposes(problem) else None
        )
        try:
            resp = result_to_proto(orchestrator.solve(problem, executor=executor))
        finally:
            if executor is not None:
                executor.close()
    print(message_to_json(resp) if args.json else format_response(resp))
    return 0


def _solve_remote(address: str, req: pb.SolveRequest) -> pb.SolveResponse:
    """Send the request to a running service; its field violations print as the local ones."""
    budget = duration_seconds(req.options.time_budget) or Limits().default_time_budget_seconds
    options = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
    with grpc.insecure_channel(address, options=options) as channel:
        stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)  # type: ignore[no-untyped-call]
        try:
            response: pb.SolveResponse = stub.Solve(req, timeout=budget + _REMOTE_SLACK_SECONDS)
            return response
        except grpc.RpcError as e:
            code = e.code()
            status = rpc_status.from_call(e)
            for detail in status.details if status is not None else ():
                bad = error_details_pb2.BadRequest()
                if detail.Unpack(bad):
                    for v in bad.field_violations:
                        print(f"{v.field}: {v.description}", file=sys.stderr)
            print(f"dsfro: {address}: {code.name}: {e.details()}", file=sys.stderr)
            if code is grpc.StatusCode.INVALID_ARGUMENT:
                raise InputError from e
            raise RemoteError(f"{address}: {code.name}") from e


def cmd_validate(args: argparse.Namespace) -> int:
    limits = Limits()
    req = _load_valid(args.file, limits)
    problem = problem_from_proto(req, limits)
    config_set = configs.build_config_set(problem)
    print(
        f"OK: {len(problem.jobs)} jobs, {len(problem.cluster.nodes)} nodes, "
        f"{len(problem.cluster.gpu_types)} GPU types"
    )
    width = max((len(j.name) for j in problem.jobs), default=0)
    for j in problem.jobs:
        n = len(config_set.by_job.get(j.name, ()))
        best = config_set.best_samples_per_second.get(j.name, 0.0)
        print(f"  {j.name.ljust(width)}  {n} configurations, best {best:.1f} samples/s")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """Write the full model of an instance (configurations enumerated as for a solve)."""
    limits = Limits()
    req = _load_valid(args.file, limits)
    problem = problem_from_proto(req, limits)
    model = formulation.build(problem, configs.build_config_set(problem))
    out = Path(args.out) if args.out else Path(Path(args.file).stem + "." + args.format)
    # Imported here: Pyomo, which writes the files, takes ~0.5 s to load.
    from solver.exact.backends.pyomo_backend import export_model

    try:
        export_model(model, out, args.format)
    except OSError as e:
        print(f"dsfro: error: cannot write {out}: {e.strerror or e}", file=sys.stderr)
        return 2
    rows = sum(1 for _ in model.linear_rows())
    print(
        f"wrote {out}: {model.num_variables} variables, {rows} rows, maximise "
        f"(objective constant {model.offset:.6g} included)"
    )
    if any(c.name.startswith("contradiction[") for c in model.constraints):
        print(
            "dsfro: note: the model is infeasible: a non-preemptible job cannot keep its "
            "running shape",
            file=sys.stderr,
        )
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    return run_server(args, os.environ)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dsfro", description="Place training jobs: GPU type, parallelism, nodes, SM clock."
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="log progress (-v) and debug detail with tracebacks (-vv)",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    solve = sub.add_parser("solve", help="solve an instance file and print the plan")
    solve.add_argument("file", help="SolveRequest in protobuf JSON")
    solve.add_argument(
        "--time-budget",
        type=parse_duration,
        metavar="DURATION",
        help="e.g. 5s, 500ms, 2m (overrides the file)",
    )
    solve.add_argument("--backend", choices=list(_BACKENDS))
    solve.add_argument("--seed", type=_int32)
    solve.add_argument("--threads", type=_int32)
    solve.add_argument(
        "--pyomo-solver",
        metavar="NAME",
        help="Pyomo solver for --backend pyomo (default appsi_highs)",
    )
    solve.add_argument("--json", action="store_true", help="print the SolveResponse as JSON")
    solve.add_argument(
        "--server",
        metavar="HOST:PORT",
        help="send the request to a running service instead of solving here",
    )
    solve.add_argument("--ray-address", metavar="ADDRESS",
                       help="run a decomposed solve's parts on this Ray cluster "
                       "(DSFRO_RAY_ADDRESS; default: local processes)")
    add_profile_option(solve)
    solve.set_defaults(func=cmd_solve)

    # Listed for --help; main() hands `dsfro generate ...` to solver.offline.generate whole.
    sub.add_parser("generate", add_help=False,
                   help="generate a benchmark snapshot from public data (--help for more)")

    validate = sub.add_parser("validate", help="check an instance file without solving it")
    validate.add_argument("file")
    validate.set_defaults(func=cmd_validate)

    export = sub.add_parser(
        "export", help="write the full model of an instance as MPS or LP for another solver"
    )
    export.add_argument("file", help="SolveRequest in protobuf JSON")
    export.add_argument("--format", choices=EXPORT_FORMATS, default="mps")
    export.add_argument(
        "--out",
        metavar="PATH",
        help="output file (default: the instance's name with the format's "
        "extension, in the current directory)",
    )
    export.set_defaults(func=cmd_export)

    serve = sub.add_parser("serve", help="run the gRPC service (as server.py)")
    add_server_arguments(serve)
    serve.set_defaults(func=cmd_serve)
    calibration.add_commands(sub)
    add_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    if args_in[:1] == ["generate"]:
        return generate.main(args_in[1:])
    argv = args_in
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, or a usage error already printed
        return e.code if isinstance(e.code, int) else 2
    if args.command != "serve":
        level = {0: logging.WARNING, 1: logging.INFO}.get(args.verbose, logging.DEBUG)
        logging.basicConfig(
            level=level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
        )
    try:
        code: int = args.func(args)
    except InputError:
        return 2
    except RemoteError:
        return 1
    except RequestFileError as e:
        print(f"dsfro: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("dsfro: interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        log.debug("internal error", exc_info=True)
        print(f"dsfro: internal error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
