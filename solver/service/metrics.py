"""Prometheus metrics of one server: solves by backend and termination, latency and gap,
rejections by reason, solves in flight, and replaced worker processes.

Each server has its own registry (tests run several in one process); ``serve_metrics`` exposes
it over HTTP for a scraper.
"""

from __future__ import annotations

from collections.abc import Iterator
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from solver.runtime import crashes

LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
"""Seconds: from a small snapshot's answer to the longest budget a server accepts."""
GAP_BUCKETS = (0.0, 1e-6, 1e-4, 1e-3, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5)
"""Relative gap between the plan and its proven bound."""


class _Restarts(Collector):
    """Worker processes replaced after they died or were killed (process-wide counts)."""

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "dsfro_worker_restarts",
            "Solver worker processes replaced after they died or were killed",
            labels=["kind"],
        )
        for kind, count in crashes.totals().items():
            family.add_metric([kind], count)
        yield family


class Metrics:
    """The series a server updates as it answers calls."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.solves = Counter(
            "dsfro_solves",
            "Solves answered, by where the plan came from and how it ended",
            ["backend", "termination"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "dsfro_solve_seconds",
            "Wall time of answered solves",
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.gap = Histogram(
            "dsfro_solve_relative_gap",
            "Proven relative gap of answered solves (solves without a bound are not counted)",
            buckets=GAP_BUCKETS,
            registry=self.registry,
        )
        self.rejections = Counter(
            "dsfro_rejections",
            "Calls refused, by reason",
            ["reason"],
            registry=self.registry,
        )
        self.in_flight = Gauge(
            "dsfro_solves_in_flight", "Solves running now", registry=self.registry
        )
        self.checks_in_flight = Gauge(
            "dsfro_checks_in_flight",
            "ValidateSnapshot and EvaluatePlan calls running now (calls over the limits are "
            "refused, never queued: these gauges and the rejections are the queue's depth)",
            registry=self.registry,
        )
        self.fallbacks = Counter(
            "dsfro_worker_fallbacks",
            "Solves answered without their worker's result (it died or was killed): the first "
            "plan it sent ahead, or the quick plan",
            registry=self.registry,
        )
        self.registry.register(_Restarts())

    def solved(
        self, backend: str, termination: str, wall_seconds: float, gap: float | None
    ) -> None:
        self.solves.labels(backend, termination).inc()
        self.latency.observe(wall_seconds)
        if gap is not None:
            self.gap.observe(gap)

    def rejected(self, reason: str) -> None:
        self.rejections.labels(reason).inc()


def serve_metrics(metrics: Metrics, host: str, port: int) -> tuple[WSGIServer, int]:
    """Expose `metrics` at http://host:port/metrics (port 0: any free one); the server and
    its port."""
    server, _ = start_http_server(port, addr=host, registry=metrics.registry)
    return server, int(server.server_port)
