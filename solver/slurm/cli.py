"""``dsfro-slurm``: the Slurm adapter's command (``python -m solver.slurm`` is the same).

    dsfro-slurm --server 127.0.0.1:50051 --plan-dir /nfs/dsfro/plans --metrics-port 9108
    dsfro-slurm --dry-run          # one round, the plan as a table; nothing in Slurm changes

Every flag can also be set as an environment variable, DSFRO_SLURM_<FLAG> (``--budget`` ->
DSFRO_SLURM_BUDGET); the flag wins. Exit codes: 0, 1 (``--once``/``--dry-run``: the round
could not read Slurm, or failed), 2 (bad flags or site file, missing extra).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from solver import __version__

EXTRA_HINT = "dsfro-slurm needs prometheus-client: pip install 'dsfro[slurm]'"


def _env(flag: str, default: Any) -> Any:
    return os.environ.get("DSFRO_SLURM_" + flag.upper().replace("-", "_"), default)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="dsfro-slurm",
        description="Schedule Slurm jobs that carry a DSFRO demand with plans from a DSFRO "
        "service (docs/integrations.md).",
    )
    a = p.add_argument
    a("--version", action="version", version=f"dsfro-slurm {__version__}")
    a(
        "--server",
        default=os.environ.get("DSFRO_SERVER", _env("server", "127.0.0.1:50051")),
        help="DSFRO service address (DSFRO_SERVER; %(default)s)",
    )
    a(
        "--partition",
        default=_env("partition", None),
        help="the partition whose jobs and nodes the adapter plans (default: all); run one "
        "adapter per partition",
    )
    a(
        "--site",
        type=Path,
        default=_env("site", None),
        help="site file (JSON): GPU types per GRES type, models, racks, power budgets",
    )
    a(
        "--budget",
        type=_seconds,
        default=_seconds(_env("budget", "5")),
        help="solve time budget per round, seconds (%(default)s)",
    )
    a(
        "--solve-timeout",
        type=_seconds,
        default=_env("solve_timeout", None),
        help="longest wait for DSFRO's answer (default: budget + 5 s)",
    )
    a(
        "--interval",
        type=_seconds,
        default=_seconds(_env("interval", "30")),
        help="seconds between rounds when nothing changes (%(default)s)",
    )
    a(
        "--poll",
        type=_seconds,
        default=_seconds(_env("poll", "2")),
        help="seconds between checks for a changed queue or node, which start a round at once "
        "(%(default)s)",
    )
    a(
        "--fallback-after",
        type=_seconds,
        default=_seconds(_env("fallback_after", "300")),
        help="after DSFRO fails for this long, held jobs go back to Slurm as submitted "
        "(%(default)s s)",
    )
    a(
        "--checkpoint-signal",
        default=_env("checkpoint_signal", "USR1"),
        help="signal asking a job to checkpoint before it is requeued (%(default)s)",
    )
    a(
        "--checkpoint-grace",
        type=_seconds,
        default=_seconds(_env("checkpoint_grace", "0")),
        help="seconds from that signal to the requeue; 0: no signal, requeue at once (Slurm "
        "then sends SIGTERM and, KillWait later, SIGKILL) (%(default)s)",
    )
    a(
        "--replan-after",
        type=_seconds,
        default=_seconds(_env("replan_after", "300")),
        help="a released job not started after this long is held and planned again (%(default)s s)",
    )
    a(
        "--evacuate-drained",
        action="store_true",
        default=bool(_env("evacuate_drained", "")),
        help="move requeue-able DSFRO jobs off drained nodes (default: they stay until done)",
    )
    a(
        "--plan-dir",
        type=Path,
        default=_env("plan_dir", None),
        help="write <job id>.json and <job id>.env here for each placed job's launcher",
    )
    a(
        "--metrics-port",
        type=int,
        default=_env("metrics_port", None),
        help="serve Prometheus /metrics on this port",
    )
    a("--metrics-host", default=_env("metrics_host", "127.0.0.1"), help="(%(default)s)")
    a("--log-format", choices=("json", "text"), default=_env("log_format", "json"))
    a("--log-level", default=_env("log_level", "INFO"))
    a(
        "--slurm-timeout",
        type=_seconds,
        default=_seconds(_env("slurm_timeout", "10")),
        help="longest any one Slurm command may take (%(default)s s)",
    )
    a(
        "--apply-workers",
        type=int,
        default=int(_env("apply_workers", "4")),
        help="Slurm commands run at once when applying a plan (%(default)s)",
    )
    a("--seed", type=int, default=0)
    a("--once", action="store_true", help="one round, then exit")
    a(
        "--dry-run",
        action="store_true",
        help="one round: print the decisions as a table, change nothing in Slurm",
    )
    a("--tls", action="store_true", help="TLS, checked against the system roots")
    a("--tls-ca", type=Path, help="CA bundle for the server's certificate")
    a("--tls-cert", type=Path, help="client certificate (mutual TLS)")
    a("--tls-key", type=Path, help="client key (mutual TLS)")
    a(
        "--token-file",
        type=Path,
        default=_env("token_file", None),
        help="bearer token file, re-read when it changes",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        from solver.slurm.observe import setup_logging
    except ImportError as e:
        if (e.name or "").startswith("prometheus_client"):
            print(EXTRA_HINT, file=sys.stderr)
            return 2
        raise
    from solver.client import Client, TlsConfig
    from solver.slurm.apply import Applier
    from solver.slurm.commands import Slurm
    from solver.slurm.loop import Adapter, Settings
    from solver.slurm.observe import Metrics, event
    from solver.slurm.site import SiteError, load_site
    from solver.slurm.table import decisions_table

    try:
        site = load_site(args.site)
    except SiteError as e:
        print(f"dsfro-slurm: {e}", file=sys.stderr)
        return 2
    setup_logging(args.log_format, args.log_level)
    if args.plan_dir is not None:
        try:
            args.plan_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            print(f"dsfro-slurm: --plan-dir {args.plan_dir}: {e.strerror}", file=sys.stderr)
            return 2
    tls: TlsConfig | bool | None = None
    if args.tls_ca or args.tls_cert or args.tls_key:
        tls = TlsConfig(ca_file=args.tls_ca, cert_file=args.tls_cert, key_file=args.tls_key)
    elif args.tls:
        tls = True
    settings = Settings(
        partition=args.partition,
        budget=args.budget,
        solve_timeout=None if args.solve_timeout is None else float(args.solve_timeout),
        interval=args.interval,
        poll=args.poll,
        fallback_after=args.fallback_after,
        checkpoint_grace=args.checkpoint_grace,
        replan_after=args.replan_after,
        evacuate_drained=args.evacuate_drained,
        dry_run=args.dry_run,
        seed=args.seed,
    )
    slurm = Slurm(timeout=args.slurm_timeout)
    applier = Applier(
        slurm,
        plan_dir=args.plan_dir,
        checkpoint_signal=args.checkpoint_signal,
        workers=args.apply_workers,
    )
    metrics = Metrics()
    if args.metrics_port is not None and not args.dry_run:
        try:
            metrics.serve(int(args.metrics_port), args.metrics_host)
        except OSError as e:  # held by another process, or a host this machine lacks
            where = f"{args.metrics_host or '*'}:{args.metrics_port}"
            print(
                f"dsfro-slurm: --metrics-port: cannot listen on {where}: {e.strerror}",
                file=sys.stderr,
            )
            return 2
    with Client(args.server, tls=tls, token_file=args.token_file) as client:
        adapter = Adapter(slurm, client, site, settings, applier, metrics)
        if args.dry_run or args.once:
            report = adapter.round()
            if args.dry_run:
                sys.stdout.write(decisions_table(report))
            return 1 if report.outcome in ("slurm_error", "error") else 0
        stop = threading.Event()

        def _stop(signum: int, frame: FrameType | None) -> None:
            stop.set()

        def _wake(signum: int, frame: FrameType | None) -> None:
            adapter.wake.set()

        signal.signal(signal.SIGTERM, _stop)
        signal.signal(signal.SIGINT, _stop)
        signal.signal(signal.SIGHUP, _wake)
        event(
            "started",
            f"dsfro-slurm {__version__} planning with {args.server}",
            partition=args.partition,
            budget=args.budget,
            interval=args.interval,
        )
        adapter.run(stop)
        event("stopped", f"dsfro-slurm stopped after {adapter.rounds} rounds")
    return 0
