"""``dsfro-slurm``: the Slurm adapter's command (``python -m solver.slurm`` is the same).

    dsfro-slurm --server 127.0.0.1:50051 --plan-dir /nfs/dsfro/plans --metrics-port 9108
    dsfro-slurm --dry-run          # one round, the plan as a table; nothing in Slurm changes

Every flag but ``--once`` and ``--dry-run`` can also be set as an environment variable,
DSFRO_SLURM_<FLAG> (``--budget`` -> DSFRO_SLURM_BUDGET, ``--tls`` -> DSFRO_SLURM_TLS=1), read
with the flag's own checks (a bad one: exit 2 naming it); the flag wins. Exit codes: 0, 1
(``--once``/``--dry-run``: the round could not read Slurm, or failed), 2 (bad flags or
variables, a bad site file, a missing extra).
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from solver import __version__

EXTRA_HINT = "dsfro-slurm needs prometheus-client: pip install 'dsfro[slurm]'"


ENV_PREFIX = "DSFRO_SLURM_"
LOCAL = "127.0.0.1:50051"
MIN_POLL_S = 1.0
"""The shortest --poll: each check is two calls to slurmctld (squeue, sinfo), and squeue's
manual asks programs not to call it in loops, which can deny the controller's service."""
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")
_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _seconds(minimum: float = 0.0, *, above: bool = False) -> Callable[[str], float]:
    """A parser of a finite number of seconds at least (`above`: more than) `minimum`."""
    bound = f"> {minimum:g}" if above else f">= {minimum:g}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
        if not math.isfinite(value) or value < minimum or (above and value == minimum):
            raise argparse.ArgumentTypeError(f"must be a number of seconds {bound}, got {text!r}")
        return value

    return parse


def _whole(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum or (maximum is not None and value > maximum):
            top = "" if maximum is None else f" and <= {maximum}"
            raise argparse.ArgumentTypeError(f"must be >= {minimum}{top}, got {text!r}")
        return value

    return parse


def _switch(text: str) -> bool:
    if text.strip().lower() in _TRUE:
        return True
    if text.strip().lower() in _FALSE:
        return False
    raise argparse.ArgumentTypeError(f"expected one of {', '.join(_TRUE + _FALSE[:-1])}")


def _log_level(text: str) -> str:
    if text.upper() not in _LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"expected one of {', '.join(_LOG_LEVELS)}")
    return text.upper()


class _Flags:
    """Adds flags whose default is their environment variable, DSFRO_SLURM_<FLAG>, read with
    the flag's own parser; a bad variable is kept as a problem naming it."""

    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser
        self.problems: list[str] = []

    def __call__(self, *names: str, env: bool = True, **kw: Any) -> None:
        action = self.parser.add_argument(*names, **kw)
        variable = ENV_PREFIX + action.dest.upper()
        raw = os.environ.get(variable) if env else None
        if raw is None:
            return
        given = action.type if callable(action.type) else str
        parse: Callable[[str], Any] = _switch if action.nargs == 0 else given
        try:
            value = parse(raw)
        except (argparse.ArgumentTypeError, ValueError) as e:
            self.problems.append(f"{variable}: {e}")
            return
        if action.choices is not None and value not in action.choices:
            choices = ", ".join(map(str, action.choices))
            self.problems.append(f"{variable}: expected one of {choices}, got {raw!r}")
            return
        action.default = value


def build_parser() -> argparse.ArgumentParser:
    """The parser, its defaults read from the environment (bad variables ignored: see
    parse_args)."""
    return _build()[0]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The flags, their environment variables for defaults; exit 2 naming the first bad one."""
    p, flags = _build()
    if flags.problems:
        p.error(flags.problems[0])
    return p.parse_args(argv)


def _build() -> tuple[argparse.ArgumentParser, _Flags]:
    p = argparse.ArgumentParser(
        prog="dsfro-slurm",
        description="Schedule Slurm jobs that carry a DSFRO demand with plans from a DSFRO "
        "service (docs/integrations.md). Every flag but --once and --dry-run can be set as "
        "DSFRO_SLURM_<FLAG> (DSFRO_SERVER for --server); the flag wins.",
    )
    a = _Flags(p)
    p.add_argument("--version", action="version", version=f"dsfro-slurm {__version__}")
    a(
        "--server",
        env=False,
        default=os.environ.get("DSFRO_SERVER", os.environ.get(ENV_PREFIX + "SERVER", LOCAL)),
        help="DSFRO service address (DSFRO_SERVER; %(default)s)",
    )
    a(
        "--partition",
        help="the partition whose jobs and nodes the adapter plans (default: all); run one "
        "adapter per partition",
    )
    a(
        "--site",
        type=Path,
        help="site file (JSON): GPU types per GRES type, models, racks, power budgets",
    )
    a(
        "--budget",
        type=_seconds(0.0, above=True),
        default=5.0,
        help="solve time budget per round, seconds (%(default)s)",
    )
    a(
        "--solve-timeout",
        type=_seconds(0.0, above=True),
        help="longest wait for DSFRO's answer (default: budget + 5 s)",
    )
    a(
        "--interval",
        type=_seconds(),
        default=30.0,
        help="seconds between rounds when nothing changes (%(default)s)",
    )
    a(
        "--poll",
        type=_seconds(MIN_POLL_S),
        default=2.0,
        help="seconds between checks for a changed queue or node, which start a round at once "
        f"(%(default)s; at least {MIN_POLL_S:g}: each check calls slurmctld)",
    )
    a(
        "--fallback-after",
        type=_seconds(),
        default=300.0,
        help="after DSFRO fails for this long, held jobs go back to Slurm as submitted "
        "(%(default)s s)",
    )
    a(
        "--checkpoint-signal",
        default="USR1",
        help="signal asking a job to checkpoint before it is requeued (%(default)s)",
    )
    a(
        "--checkpoint-grace",
        type=_seconds(),
        default=0.0,
        help="seconds from that signal to the requeue; 0: no signal, requeue at once (Slurm "
        "then sends SIGTERM and, KillWait later, SIGKILL) (%(default)s)",
    )
    a(
        "--replan-after",
        type=_seconds(),
        default=300.0,
        help="a released job not started after this long is held and planned again (%(default)s s)",
    )
    a(
        "--max-stale-placements",
        type=_whole(1),
        default=2,
        help="a job placed this many times that Slurm never started (memory or CPUs no "
        "planned node has) goes back to Slurm as submitted (%(default)s)",
    )
    a(
        "--evacuate-drained",
        action="store_true",
        help="move requeue-able DSFRO jobs off drained nodes (default: they stay until done)",
    )
    a(
        "--plan-dir",
        type=Path,
        help="write <job id>.json and <job id>.env here for each placed job's launcher",
    )
    a("--metrics-port", type=_whole(1, 65535), help="serve Prometheus /metrics on this port")
    a("--metrics-host", default="127.0.0.1", help="(%(default)s)")
    a("--log-format", choices=("json", "text"), default="json")
    a("--log-level", type=_log_level, default="INFO", help="(%(default)s)")
    a(
        "--slurm-timeout",
        type=_seconds(0.0, above=True),
        default=10.0,
        help="longest any one Slurm command may take (%(default)s s)",
    )
    a(
        "--apply-workers",
        type=_whole(1),
        default=4,
        help="Slurm commands run at once when applying a plan (%(default)s)",
    )
    a("--seed", type=int, default=0)
    a("--once", env=False, action="store_true", help="one round, then exit")
    a(
        "--dry-run",
        env=False,
        action="store_true",
        help="one round: print the decisions as a table, change nothing in Slurm",
    )
    a("--tls", action="store_true", help="TLS, checked against the system roots")
    a("--tls-ca", type=Path, help="CA bundle for the server's certificate")
    a("--tls-cert", type=Path, help="client certificate (mutual TLS)")
    a("--tls-key", type=Path, help="client key (mutual TLS)")
    a("--token-file", type=Path, help="bearer token file, re-read when it changes")
    return p, a


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
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
        max_stale_placements=args.max_stale_placements,
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
        adapter = Adapter(
            slurm,
            client,
            site,
            settings,
            applier,
            metrics,
            site_source=lambda: load_site(args.site),
        )
        if args.dry_run or args.once:
            report = adapter.round()
            if args.dry_run:
                sys.stdout.write(decisions_table(report))
            return 1 if report.outcome in ("slurm_error", "error") else 0
        stop = threading.Event()

        def _stop(signum: int, frame: FrameType | None) -> None:
            stop.set()

        def _reload(signum: int, frame: FrameType | None) -> None:
            adapter.reload.set()
            adapter.wake.set()

        signal.signal(signal.SIGTERM, _stop)
        signal.signal(signal.SIGINT, _stop)
        signal.signal(signal.SIGHUP, _reload)
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
