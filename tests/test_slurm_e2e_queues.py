"""Tenant queues end to end, on a real Slurm and a real DSFRO: the site file's queue holds its
account's jobs to its quota; a job of an account without a queue runs beside them."""

from __future__ import annotations

from pathlib import Path

from solver.slurm.decide import Action
from solver.slurm.site import site_from_dict
from tests.slurm_cluster_helpers import (
    GPUS,
    Cluster,
    MakeAdapter,
    assert_runs_as_planned,
    by_job,
    demand,
    job_script,
)


def test_a_queue_holds_its_accounts_jobs_to_its_quota(
    slurm: Cluster, dsfro: str, make_adapter: MakeAdapter, tmp_path: Path
) -> None:
    """physics may use one node's GPUs: of its two whole-node jobs one runs, the other waits
    for quota; a whole-node job of chemistry (no queue: the default one) runs beside them."""
    quota = [{"resource": "H100-80GB", "nominal": GPUS}]
    site = site_from_dict({"queues": [{"name": "physics", "quotas": quota}]})
    whole = (demand("gpt3-1.3b", GPUS, GPUS), f"--gres=gpu:h100:{GPUS}")
    physics = [slurm.sbatch(f"p{k}", *whole, "--account=physics") for k in (1, 2)]
    chemistry = slurm.sbatch("c", *whole, "--account=chemistry", script=job_script(tmp_path))
    report = make_adapter(dsfro, site=site).round()
    decisions = by_job(report)
    assert report.outcome == "planned", report.error
    assert sorted(decisions[j].action for j in physics) == [Action.PLACE, Action.WAIT]
    [waiting] = [decisions[j] for j in physics if decisions[j].action is Action.WAIT]
    assert waiting.reason == "queued" and "quota" in waiting.detail
    d = decisions[chemistry]
    assert d.action is Action.PLACE
    [placed] = [j for j in physics if decisions[j].action is Action.PLACE]
    slurm.wait_running([placed, chemistry])
    assert_runs_as_planned(slurm, tmp_path, d)
