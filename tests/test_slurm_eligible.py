"""A held DSFRO job is planned only once Slurm would start it: its ``--begin`` has come and its
``--dependency`` holds (evaluated by the adapter: Slurm does not evaluate a held job's)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from solver.slurm.decide import Action, fallback, reported
from solver.slurm.eligible import waiting_for
from solver.slurm.state import SlurmJob, parse_squeue
from tests.slurm_helpers import captured
from tests.test_slurm_snapshot import NOW, _job, _with_jobs

BASE = next(j for j in parse_squeue(captured("mixed", "squeue")) if j.job_id == 3)


def other(job_id: int, state: str, start: int = 0, end: int = 0, name: str = "x") -> SlurmJob:
    return replace(
        BASE, job_id=job_id, state=state, start_time=start, end_time=end, name=name, held=False
    )


JOBS = {
    9: other(9, "COMPLETED", start=int(NOW) - 900, end=int(NOW) - 120),
    10: other(10, "FAILED", start=int(NOW) - 900, end=int(NOW) - 600),
    11: other(11, "RUNNING", start=int(NOW) - 60),
    12: other(12, "PENDING"),
}


@pytest.mark.parametrize(
    ("dependency", "waits"),
    [
        ("", False),
        ("(null)", False),
        ("afterok:9(unfulfilled)", False),  # Slurm's word while held: the adapter looks itself
        ("afterok:10(unfulfilled)", True),
        ("afternotok:10(unfulfilled)", False),
        ("afternotok:9(unfulfilled)", True),
        ("afterany:10(unfulfilled)", False),
        ("afterany:11(unfulfilled)", True),
        ("after:11(unfulfilled)", False),
        ("after:12(unfulfilled)", True),
        ("after:11+5(unfulfilled)", True),  # started 1 minute ago, 5 to wait
        ("afterok:9+1(unfulfilled)", False),  # ended 2 minutes ago
        ("afterok:9+3(unfulfilled)", True),
        ("afterok:9(unfulfilled),afterany:11(unfulfilled)", True),
        ("afterok:9(unfulfilled)?afterany:11(unfulfilled)", False),
        ("afterok:10(unfulfilled)?afterany:11(unfulfilled)", True),
        ("afterok:77(unfulfilled)", False),  # squeue no longer lists it
        ("aftercorr:11(unfulfilled)", False),  # not read here: Slurm judges it
        ("afterok:9_*(unfulfilled)", False),
        ("afterok:x(unfulfilled)", False),  # a form not read: Slurm judges it on release
    ],
)
def test_dependencies_as_slurm_reads_them(dependency: str, waits: bool) -> None:
    job = replace(BASE, dependency=dependency)
    why = waiting_for(job, JOBS, NOW)
    assert (why is not None) == waits, why
    if waits:
        assert why is not None and "--dependency" in why


def test_singleton_waits_while_a_job_of_its_name_and_user_runs() -> None:
    job = replace(BASE, dependency="singleton(unfulfilled)", name="train")
    jobs = {**JOBS, 11: replace(JOBS[11], name="train", user=BASE.user)}
    assert waiting_for(job, jobs, NOW) is not None
    assert waiting_for(job, {**jobs, 11: replace(jobs[11], user="someone")}, NOW) is None
    assert waiting_for(job, JOBS, NOW) is None


def test_a_begin_time_to_come_waits() -> None:
    assert waiting_for(replace(BASE, eligible_time=int(NOW) + 600), JOBS, NOW) == (
        "its --begin is 600 s away"
    )
    assert waiting_for(replace(BASE, eligible_time=int(NOW) - 5), JOBS, NOW) is None


def test_a_job_not_eligible_is_not_sent_and_waits_held_then_goes_back_when_dsfro_is_away() -> None:
    def edit(jobs: list[dict[str, object]]) -> None:
        _job(jobs, 3)["dependency"] = "afterok:1(unfulfilled)"  # job 1 runs

    snap = _with_jobs(edit)
    assert [j.name for j in snap.request.jobs] == ["4"]
    [(job, why)] = snap.ineligible
    assert job.job_id == 3 and "afterok:1" in why
    [wait] = [d for d in reported(snap) if d.job_id == 3]
    assert (wait.action, wait.reason) == (Action.WAIT, "not_eligible")
    [away] = [d for d in fallback(snap, "DSFRO unreachable for 300 s", True) if d.job_id == 3]
    assert (away.action, away.reason) == (Action.FALLBACK, "dsfro_unavailable")
    [held] = [d for d in fallback(snap, "DSFRO unreachable for 5 s", False) if d.job_id == 3]
    assert held.action is Action.WAIT
