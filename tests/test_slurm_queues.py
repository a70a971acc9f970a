"""Tenant queues for a Slurm site: declared in the site file (the wire's TenantQueue JSON), a
job's account naming its queue (its demand's tenant first), an account without one in the
default queue; DSFRO holds the quotas (a real solve here)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import pytest

from solver.app.convert import problem_from_proto
from solver.app.limits import Limits
from solver.app.validation import validate_request
from solver.core.settings import SolverSettings
from solver.core.solver import Solver
from solver.domain import JobState
from solver.slurm.site import Site, SiteError, site_from_dict
from solver.slurm.snapshot import Snapshot, build_snapshot
from solver.slurm.state import parse_sinfo, parse_squeue
from solver.wire import SolveRequest, SolveResponse
from tests.slurm_helpers import FakeClient, captured
from tests.test_slurm_loop import adapter, place_all
from tests.test_slurm_snapshot import NOW, _job

PHYSICS = {"name": "physics", "quotas": [{"resource": "H100-80GB", "nominal": 4}]}


def site(*queues: Mapping[str, Any]) -> Site:
    return site_from_dict({"queues": list(queues)})


def built(s: Site, accounts: Mapping[int, str]) -> Snapshot:
    """The captured ``mixed`` state (jobs 3 and 4 held with demands; 4's names tenant team-a)
    with the given accounts."""
    squeue = json.loads(captured("mixed", "squeue"))
    for job_id, account in accounts.items():
        _job(squeue["jobs"], job_id)["account"] = account
    nodes, jobs = parse_sinfo(captured("mixed", "sinfo")), parse_squeue(json.dumps(squeue))
    return build_snapshot(nodes, jobs, s, now=NOW, budget_seconds=2)


def test_a_sites_queues_are_read_in_the_wires_form() -> None:
    s = site(PHYSICS, {"name": "team-a", "cohort": "all", "weight": 2})
    assert [(q.name, q.cohort, q.weight) for q in s.queues] == [
        ("physics", "", 0.0),
        ("team-a", "all", 2.0),
    ]
    [quota] = s.queues[0].quotas
    assert (quota.resource, quota.nominal) == ("H100-80GB", 4.0)


@pytest.mark.parametrize(
    ("queues", "message"),
    [
        ({"name": "x"}, "site.queues: expected a list of queues, got dict"),
        (["x"], "site.queues[0]: expected an object, got str"),
        ([{"name": "x", "quota": []}], "site.queues[0]"),
        ([{"cohort": "all"}], "site.queues[0].name: a name not given before is required"),
        ([PHYSICS, PHYSICS], "site.queues[1].name: a name not given before is required"),
    ],
)
def test_a_malformed_queue_names_its_field(queues: object, message: str) -> None:
    with pytest.raises(SiteError, match=r"^" + message.replace("[", r"\[").replace("]", r"\]")):
        site_from_dict({"queues": queues})


def test_a_jobs_account_names_its_queue_and_an_account_without_one_the_default() -> None:
    """Job 3's account is physics (declared), job 4's demand names team-a (not declared: DSFRO
    refuses it, as a tenant naming no queue); with team-a declared both are planned."""
    snap = built(site(PHYSICS), {3: "physics", 4: "chemistry"})
    assert [q.name for q in snap.request.cluster.queues] == ["physics"]
    assert {j.name: j.tenant for j in snap.request.jobs} == {"3": "physics", "4": "team-a"}
    [v] = validate_request(snap.request, Limits())
    assert v.field == "jobs[1].tenant" and "names no queue" in v.description
    snap = built(site(PHYSICS, {"name": "team-a"}), {3: "chemistry", 4: "chemistry"})
    assert {j.name: j.tenant for j in snap.request.jobs} == {"3": "", "4": "team-a"}
    assert validate_request(snap.request, Limits()) == []
    # Without declared queues the account is the tenant, as before.
    snap = built(Site(), {3: "chemistry"})
    assert {j.name: j.tenant for j in snap.request.jobs} == {"3": "chemistry", "4": "team-a"}


def test_dsfro_holds_a_queues_quota_in_the_round() -> None:
    """Job 3 (gpt3-1.3b, up to 4 GPUs) alone in physics, whose quota is 2 H100s: it runs on 2,
    where without the queue it takes 4."""
    small = {"name": "physics", "quotas": [{"resource": "H100-80GB", "nominal": 2}]}
    team = {"name": "team-a"}
    runs = {}
    for name, s in (("quota", site(small, team)), ("free", replace(site(team), queues=()))):
        snap = built(s, {3: "physics"})
        problem = problem_from_proto(snap.request, Limits())
        result = Solver(SolverSettings()).solve(problem)
        [a] = [a for a in result.plan.assignments if a.job == "3"]
        assert a.state is JobState.RUNNING and a.config is not None
        runs[name] = a.config.num_gpus
    assert runs == {"quota": 2, "free": 4}


def test_a_rounds_queue_usage_is_exported_and_replaced_by_the_next() -> None:
    """The plan's per-queue usage as gauges; a queue the next plan does not list is dropped."""

    def answer(with_queue: bool) -> Callable[[SolveRequest], SolveResponse]:
        def make(request: SolveRequest) -> SolveResponse:
            out = place_all(request)
            if with_queue:
                q = out.plan.queues.add(queue="physics")
                q.resources.add(resource="H100-80GB", used=12, nominal=8, borrowed=4)
            return out

        return make

    client = FakeClient(answer(True))
    a, _, _ = adapter(client)
    assert a.round().outcome == "planned"
    value = a.metrics.registry.get_sample_value
    labels = {"queue": "physics", "resource": "H100-80GB"}
    got = {
        k: value("dsfro_slurm_queue_usage", {**labels, "kind": k})
        for k in ("used", "nominal", "borrowed")
    }
    assert got == {"used": 12.0, "nominal": 8.0, "borrowed": 4.0}
    client.answer = answer(False)
    assert a.round().outcome == "planned"
    assert value("dsfro_slurm_queue_usage", {**labels, "kind": "used"}) is None
