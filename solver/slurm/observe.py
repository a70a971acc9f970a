"""Every decision and its reason, as one JSON object per line, and as Prometheus metrics.

Log events (``"event"`` key): ``round`` (one per round: outcome, phases' seconds, counts),
``decision`` (one per job and round: job, action, reason, detail, target, applied, error),
``solve_failed``, ``slurm_unreadable``. Metrics are listed in docs/integrations.md; all are
``dsfro_slurm_*``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

log = logging.getLogger("dsfro.slurm")

_RESERVED = frozenset(set(vars(logging.makeLogRecord({}))) | {"message", "asctime"})


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and the record's extra fields."""

    def format(self, record: logging.LogRecord) -> str:
        body: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        body.update({k: v for k, v in vars(record).items() if k not in _RESERVED})
        if record.exc_info:
            body["exception"] = self.formatException(record.exc_info)
        return json.dumps(body, default=str, separators=(",", ":"))


def setup_logging(fmt: str = "json", level: str = "INFO") -> None:
    """Logs to stderr, as JSON lines (``json``) or plain text (``text``)."""
    handler = logging.StreamHandler()
    text = logging.Formatter("%(asctime)s %(levelname)s %(message)s")
    handler.setFormatter(JsonFormatter() if fmt == "json" else text)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


def event(name: str, message: str, level: int = logging.INFO, **fields: Any) -> None:
    """One structured log line."""
    log.log(level, message, extra={"event": name, **fields})


class Metrics:
    """The adapter's Prometheus metrics, in their own registry (several adapters in one
    process, as in tests, don't collide)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.rounds = Counter(
            "dsfro_slurm_rounds",
            "Rounds by outcome: planned, fallback, no_plan, idle, slurm_error",
            ["outcome"],
            registry=r,
        )
        self.decisions = Counter(
            "dsfro_slurm_decisions",
            "Decisions by action and reason",
            ["action", "reason"],
            registry=r,
        )
        self.failures = Counter(
            "dsfro_slurm_apply_failures",
            "Decisions Slurm refused, by action",
            ["action"],
            registry=r,
        )
        self.solve_errors = Counter(
            "dsfro_slurm_solve_errors", "Failed Solve calls by gRPC code", ["code"], registry=r
        )
        self.seconds = Histogram(
            "dsfro_slurm_round_seconds",
            "Time per round phase: read, solve, apply, total, adapter (total minus solve)",
            ["phase"],
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120),
            registry=r,
        )
        self.jobs = Gauge(
            "dsfro_slurm_jobs",
            "DSFRO jobs in the last round, by kind: waiting, running, reserved, malformed, "
            "deferred (of waiting: held for cleaner hours)",
            ["kind"],
            registry=r,
        )
        self.site_reloads = Counter(
            "dsfro_slurm_site_reloads",
            "Site file re-reads on SIGHUP by outcome: loaded, rejected (the old one kept)",
            ["outcome"],
            registry=r,
        )
        self.unreachable = Gauge(
            "dsfro_slurm_dsfro_unreachable_seconds",
            "How long DSFRO has failed to answer (0: it answers)",
            registry=r,
        )
        self.last_plan = Gauge(
            "dsfro_slurm_last_plan_timestamp_seconds",
            "Unix time of the last plan received",
            registry=r,
        )
        self.queue_usage = Gauge(
            "dsfro_slurm_queue_usage",
            "The last plan's use of each declared queue's quota, per resource (a GPU type: GPUs; "
            "power: W), by kind: used, nominal, borrowed",
            ["queue", "resource", "kind"],
            registry=r,
        )

    def observe_phases(self, phases: Mapping[str, float]) -> None:
        for phase, seconds in phases.items():
            self.seconds.labels(phase).observe(seconds)

    def serve(self, port: int, host: str = "") -> None:
        """``/metrics`` over HTTP on `port`."""
        start_http_server(port, addr=host, registry=self.registry)
