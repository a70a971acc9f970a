"""The adapter's loop: each round reads Slurm, asks DSFRO for a plan, applies it.

A round never raises. Slurm unreadable: the round does nothing. DSFRO unreachable, late, or
refusing the request: held jobs stay held, and once DSFRO has failed for ``fallback_after``
seconds they are given back to Slurm as submitted. A job DSFRO rejects (INVALID_ARGUMENT
naming ``jobs[i]``) is reported and left out, and the rest is solved again at once. Every
piece of state is in Slurm (solver.slurm.record), so a restarted adapter carries on; only the
time of the first failure of an outage is in memory (a restart delays a fallback, never
hastens it).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol

from solver.client import DsfroError, InvalidRequest
from solver.slurm.apply import Applier, Outcome
from solver.slurm.commands import Slurm, SlurmError
from solver.slurm.decide import Action, Decision, Rules, decide, fallback, reserved
from solver.slurm.observe import Metrics, event
from solver.slurm.site import Site, SiteError
from solver.slurm.snapshot import Snapshot, build_snapshot
from solver.wire import Plan, QueueReason, SolveRequest, SolveResponse, Termination

_JOB_FIELD = re.compile(r"^jobs\[(\d+)\](?:\.(.*))?$")


class SolveClient(Protocol):
    """What the adapter needs of solver.client.Client."""

    def solve(
        self, request: SolveRequest, *, timeout: float | None = None, request_id: str | None = None
    ) -> SolveResponse: ...


@dataclass(frozen=True)
class Settings:
    """How the loop runs (the command's flags)."""

    partition: str | None = None
    budget: float = 5.0
    """The solve's time budget, seconds."""
    solve_timeout: float | None = None
    """Longest wait for DSFRO's answer; default: the budget + 5 s."""
    interval: float = 30.0
    """Seconds between rounds when nothing happens."""
    poll: float = 2.0
    """Seconds between the cheap checks for events (a job submitted, started or ended, a node
    changing state) that start a round early."""
    fallback_after: float = 300.0
    checkpoint_grace: float = 0.0
    replan_after: float = 300.0
    max_stale_placements: int = 2
    evacuate_drained: bool = False
    dry_run: bool = False
    seed: int = 0


@dataclass
class Report:
    """What one round did."""

    round: int
    outcome: str
    """planned, fallback, no_plan, idle, slurm_error or error."""
    decisions: list[Decision] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)
    response: SolveResponse | None = None
    snapshot: Snapshot | None = None
    error: str = ""
    warnings: list[str] = field(default_factory=list)
    """What the round went on without (reservations unread)."""


class Adapter:
    """Rounds of read, solve, decide, apply."""

    def __init__(
        self,
        slurm: Slurm,
        client: SolveClient,
        site: Site,
        settings: Settings,
        applier: Applier,
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        site_source: Callable[[], Site] | None = None,
    ) -> None:
        self.slurm, self.client, self.site, self.settings = slurm, client, site, settings
        self.site_source = site_source
        """Reads the site file again (``reload``); None: the site is fixed."""
        self.applier = applier
        self.metrics = metrics or Metrics()
        self.clock, self.monotonic = clock, monotonic
        self.rounds = 0
        self.failing_since: float | None = None
        self.wake = threading.Event()
        self.reload = threading.Event()
        """Set (SIGHUP): the site file is read again before the next round."""

    # ------------------------------------------------------------ one round

    def round(self) -> Report:
        """One round; never raises (a bug is logged as outcome ``error``)."""
        self.rounds += 1
        start = self.monotonic()
        try:
            report = self._round(start)
        except Exception as e:  # the loop must outlive any one round
            logging.getLogger("dsfro.slurm").exception("round %d failed", self.rounds)
            report = Report(self.rounds, "error", error=f"{type(e).__name__}: {e}")
        report.phases["total"] = self.monotonic() - start
        report.phases["adapter"] = report.phases["total"] - report.phases.get("solve", 0.0)
        self._observe(report)
        return report

    def _round(self, start: float) -> Report:
        now = self.clock()
        report = Report(self.rounds, "idle")
        try:
            nodes, jobs = self.slurm.nodes(), self.slurm.jobs()
        except SlurmError as e:
            report.outcome, report.error = "slurm_error", str(e)
            return report
        try:
            reservations = self.slurm.reservations()
        except SlurmError as e:  # planned without: a job sent into one pends until replanned
            reservations = []
            report.warnings.append(f"reservations unread: {e}")
        snap = build_snapshot(
            nodes,
            jobs,
            self.site,
            now=now,
            budget_seconds=self.settings.budget,
            partition=self.settings.partition,
            evacuate_drained=self.settings.evacuate_drained,
            seed=self.settings.seed,
            reservations=reservations,
        )
        report.snapshot = snap
        report.phases["read"] = self.monotonic() - start
        s = self.settings
        rules = Rules(s.checkpoint_grace, s.replan_after, s.max_stale_placements)
        rejected: list[Decision] = []
        response: SolveResponse | None = None
        if snap.tracked:
            t = self.monotonic()
            response, report.error, rejected = self._solve(snap)
            report.phases["solve"] = self.monotonic() - t
            if response is None:
                self.failing_since = self.failing_since or now
            elif response.stats.termination == Termination.TERMINATION_INFEASIBLE:
                # DSFRO is up, but the snapshot contradicts itself (running non-preemptible jobs
                # over a budget): no plan, what runs keeps running, held jobs wait; DSFRO's
                # reason is the round's error. Not counted as a plan, nor as DSFRO failing.
                self.failing_since = None
                report.outcome, report.response = "infeasible", response
                report.error = f"DSFRO: INFEASIBLE: {response.stats.detail}"
            else:
                self.failing_since = None
                report.outcome, report.response = "planned", response
                self.metrics.last_plan.set(now)
        t = self.monotonic()
        try:
            fresh = {n.name: n for n in self.slurm.nodes()}  # a node may have drained
        except SlurmError as e:
            report.outcome, report.error = "slurm_error", str(e)
            return report
        report.phases["read"] += self.monotonic() - t
        if snap.tracked and response is None:
            assert self.failing_since is not None
            release = now - self.failing_since >= self.settings.fallback_after
            report.outcome = "fallback" if release else "no_plan"
            report.decisions = fallback(snap, report.error, release)
            report.decisions += reserved(snap, fresh, rules, now)
        else:
            plan = response.plan if response is not None else Plan()
            report.decisions = decide(snap, plan, fresh, rules, now)
            if report.outcome == "infeasible":  # held jobs wait, saying why
                report.decisions = [
                    replace(d, reason="infeasible", detail=report.error)
                    if d.reason == "not_in_plan"
                    else d
                    for d in report.decisions
                ]
        report.decisions = rejected + report.decisions
        if not self.settings.dry_run:
            t = self.monotonic()
            report.outcomes = self.applier.apply(report.decisions)
            report.phases["apply"] = self.monotonic() - t
        return report

    def _solve(self, snap: Snapshot) -> tuple[SolveResponse | None, str, list[Decision]]:
        """(response, error, decisions of rejected jobs): on INVALID_ARGUMENT naming jobs,
        those jobs are left out and the rest solved once more."""
        request = snap.request
        rejected: list[Decision] = []
        for attempt in (1, 2):
            try:
                return self.client.solve(request, timeout=self._timeout()), "", rejected
            except InvalidRequest as e:
                self.metrics.solve_errors.labels(e.code.name).inc()
                bad = self._bad_jobs(request, e)
                if attempt == 2 or not bad:
                    event(
                        "solve_failed",
                        f"DSFRO refused the request: {e}",
                        logging.WARNING,
                        code=e.code.name,
                        violations=[list(v) for v in e.violations],
                    )
                    return None, f"INVALID_ARGUMENT: {e.message}", rejected
                for name, why in bad.items():
                    t = snap.tracked.pop(name)
                    rejected.append(
                        Decision(t.job, Action.SKIP, "rejected_by_dsfro", why, record=t.record)
                    )
                kept = [j for j in request.jobs if j.name not in bad]
                request = SolveRequest()
                request.CopyFrom(snap.request)
                del request.jobs[:]
                request.jobs.extend(kept)
                if not kept:
                    return SolveResponse(), "", rejected
            except DsfroError as e:
                self.metrics.solve_errors.labels(e.code.name).inc()
                event(
                    "solve_failed",
                    f"no plan from DSFRO: {e}",
                    logging.WARNING,
                    code=e.code.name,
                    attempts=e.attempts,
                )
                return None, str(e), rejected
            except Exception as e:  # a broken client must not stop the loop either
                self.metrics.solve_errors.labels("CLIENT").inc()
                event("solve_failed", f"no plan from DSFRO: {e!r}", logging.WARNING)
                return None, f"{type(e).__name__}: {e}", rejected
        raise AssertionError("unreachable")

    @staticmethod
    def _bad_jobs(request: SolveRequest, e: InvalidRequest) -> dict[str, str]:
        """Job name -> its violations, if every violation is a job's (else {})."""
        out: dict[str, str] = {}
        for v in e.violations:
            m = _JOB_FIELD.match(v.field)
            if m is None or int(m.group(1)) >= len(request.jobs):
                return {}
            name = request.jobs[int(m.group(1))].name
            where = m.group(2) or "job"
            out[name] = "; ".join(filter(None, [out.get(name), f"{where}: {v.description}"]))
        return out

    def _timeout(self) -> float:
        s = self.settings
        return s.solve_timeout if s.solve_timeout is not None else s.budget + 5.0

    # ------------------------------------------------------------ reporting

    def _observe(self, report: Report) -> None:
        m = self.metrics
        m.rounds.labels(report.outcome).inc()
        m.observe_phases(report.phases)
        m.unreachable.set(0 if self.failing_since is None else self.clock() - self.failing_since)
        snap = report.snapshot
        if snap is not None:
            m.jobs.labels("waiting").set(len(snap.waiting))
            m.jobs.labels("running").set(len(snap.tracked) - len(snap.waiting))
            m.jobs.labels("reserved").set(len(snap.reserved))
            m.jobs.labels("malformed").set(len(snap.malformed))
            m.jobs.labels("deferred").set(_deferred(report, snap))
        if report.response is not None:  # a plan: its queues' usage (none declared: none)
            m.queue_usage.clear()
            for q in report.response.plan.queues:
                for u in q.resources:
                    for kind in ("used", "nominal", "borrowed"):
                        m.queue_usage.labels(q.queue, u.resource, kind).set(getattr(u, kind))
        results = {o.decision.job_id: o for o in report.outcomes}
        for d in report.decisions:
            m.decisions.labels(d.action.value, d.reason).inc()
            o = results.get(d.job_id)
            if o is not None and not o.applied:
                m.failures.labels(d.action.value).inc()
            level = logging.WARNING if (o is not None and not o.applied) else logging.INFO
            event(
                "decision",
                f"job {d.job_id}: {d.action.value} ({d.reason})",
                level,
                round=report.round,
                job=d.job_id,
                job_name=d.job.name,
                action=d.action.value,
                reason=d.reason,
                detail=d.detail,
                target=None if d.target is None else d.target.describe(),
                applied=None if o is None else o.applied,
                error=None if o is None else o.error,
                dry_run=self.settings.dry_run,
            )
        stats = report.response.stats if report.response is not None else None
        event(
            "round",
            f"round {report.round}: {report.outcome}",
            logging.WARNING if report.error or report.warnings else logging.INFO,
            round=report.round,
            outcome=report.outcome,
            error=report.error,
            warnings=report.warnings,
            seconds={k: round(v, 4) for k, v in report.phases.items()},
            jobs=0 if snap is None else len(snap.request.jobs),
            nodes=0 if snap is None else len(snap.nodes),
            ignored_nodes={} if snap is None else snap.ignored_nodes,
            termination=None if stats is None else Termination.Name(stats.termination),
            failing_for=0 if self.failing_since is None else self.clock() - self.failing_since,
        )

    def reload_site(self) -> None:
        """Read the site file again; a file that can't be read or is wrong is logged and the
        site in use kept, so that an operator's typo never stops the rounds."""
        if self.site_source is None:
            return
        try:
            site = self.site_source()
        except SiteError as e:
            self.metrics.site_reloads.labels("rejected").inc()
            event("site_rejected", f"site file not reloaded, the old one kept: {e}", logging.ERROR)
            return
        self.site = site
        self.metrics.site_reloads.labels("loaded").inc()
        event("site_reloaded", "site file reloaded")

    # ------------------------------------------------------------ forever

    def run(self, stop: threading.Event, max_rounds: int | None = None) -> None:
        """Rounds until `stop` is set (or `max_rounds`): one per interval, and one as soon as
        the queue or the nodes change (checked every ``poll`` seconds), or ``wake`` is set."""
        s = self.settings
        seen: str | None = None
        due = self.monotonic()
        while not stop.is_set() and (max_rounds is None or self.rounds < max_rounds):
            if self.reload.is_set():
                self.reload.clear()
                self.reload_site()
            changed = False
            try:
                now_seen = self.slurm.fingerprint()
                changed = seen is not None and now_seen != seen
            except SlurmError:
                now_seen = None
            if changed or self.wake.is_set() or self.monotonic() >= due:
                self.wake.clear()
                self.round()
                due = self.monotonic() + s.interval
                try:
                    now_seen = self.slurm.fingerprint()
                except SlurmError:
                    now_seen = None
            seen = now_seen
            stop.wait(s.poll)


def _deferred(report: Report, snap: Snapshot) -> int:
    """Waiting jobs the round's plan defers to cleaner hours."""
    if report.response is None:
        return 0
    deferred = {
        a.job
        for a in report.response.plan.assignments
        if a.queue_reason == QueueReason.QUEUE_REASON_DEFERRED
    }
    return sum(1 for t in snap.waiting if str(t.job.job_id) in deferred)
