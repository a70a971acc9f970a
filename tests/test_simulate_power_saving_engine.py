"""The cluster's node power saving in the simulation loop (solver.simulate.node_power): nodes
that empty suspend and draw their sleep power, a job placed on a suspended node starts resume_s
later, spares stay up, the equal-horizon padding follows the rule, every policy gets the same
rule, and with the rule off a run is exactly what it was before the rule was wired in."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.cli.main import main
from solver.domain import Allocation, GpuSlice, Shape
from solver.power_states import PowerAction, PowerActionKind
from solver.simulate.core import (
    Decision,
    Policy,
    RoundInput,
    SimJob,
    SimulationError,
    SimulationLog,
)
from solver.simulate.engine import Simulation
from solver.simulate.metrics import JOULES_PER_KWH, summarize
from solver.simulate.node_power import NodeRule
from solver.simulate.policies import make_policy
from solver.simulate.power_saving import SUSPENDED, PowerSavingSettings
from solver.simulate.rounds import LiveJob
from solver.simulate.settings import EngineSettings
from tests.simulate_power_helpers import GOLDEN_POLICIES, records, short_run
from tests.test_simulate_cli import CLUSTER, GOOD, write_trace
from tests.test_simulate_engine import (
    EXACT,
    IDLE_W,
    FirstFit,
    _model_jobs,
    measured_job,
    two_gpu_cluster,
)

GOLDEN = Path(__file__).parent / "data" / "simulate" / "power-saving-off-golden.json"
ON = PowerSavingSettings(
    enabled=True, suspend_after_s=600.0, resume_s=300.0, suspended_node_watts=20.0
)
NODE_IDLE_W = 2 * IDLE_W
"""An empty up node's draw in two_gpu_cluster (two idle GPUs, no base power)."""


def energy_j(log: SimulationLog) -> float:
    return sum((p.end_s - p.start_s) * p.true_watts for p in log.power)


def run(
    jobs: list[SimJob], saving: PowerSavingSettings, nodes: int = 3, policy: Policy | None = None
) -> SimulationLog:
    settings = EngineSettings(truth=EXACT, reference_gpu_type="G", power_saving=saving)
    cluster = two_gpu_cluster(nodes=nodes)
    return Simulation(cluster, jobs, policy or FirstFit(), settings=settings, seed=1).run()


def test_with_the_rule_off_the_records_are_those_before_it() -> None:
    # Recorded with the engine before node power saving was wired in (every field then);
    # dsfro-heuristic re-recorded when the power margin's best settled attempt came to win
    # over the last re-solve (2026-12-03: its eight jobs end at 4,030 s, not 4,732 s), and
    # when lowered limits came to cost as far as they came down (rounds 9 and 10: the guided
    # plan wins, AGGREGATE, over the heuristic's; every job and power record the same);
    # gavel re-recorded when it came to renew its leases mid-round as Gavel does (2026-12-04:
    # 15 moves and preemptions instead of 25, its eight jobs end at 5,731 s, not 6,680 s);
    # dsfro-heuristic's first round OPTIMAL, not FEASIBLE, once the priced passes' dual came to
    # bound the answer (2026-12-04: the same plan, proven); every round's tenant shares with a
    # third number, the demand share as the jobs' GPU ranges count it (2026-12-05);
    # dsfro-heuristic re-recorded when a tightened re-solve with watts to spare came to be
    # followed by a looser one (2026-12-06: its jobs end at 3,799 s, not 4,030 s; mean finish
    # 1,870 s, not 1,950 s; no power segment over the budget in either).
    golden: dict[str, Any] = json.loads(GOLDEN.read_text())
    assert sorted(golden) == sorted(GOLDEN_POLICIES)
    for policy in GOLDEN_POLICIES:
        now = records(short_run(policy))
        before = golden[policy]
        assert now["end_s"] == before["end_s"] and now["idle_watts"] == before["idle_watts"]
        for part in ("jobs", "rounds", "power"):
            assert len(now[part]) == len(before[part]), (policy, part)
            for new, old in zip(now[part], before[part], strict=True):
                assert {k: new[k] for k in old} == old, (policy, part)


def test_empty_nodes_suspend_and_save_their_idle_draw_less_their_sleep_draw() -> None:
    jobs = [measured_job("a", 0, 5000)]  # one GPU of n0 for 5000 s; n1, n2 empty throughout
    off = run(jobs, PowerSavingSettings())
    on = run(jobs, ON)
    assert [j.finish_s for j in on.jobs] == [j.finish_s for j in off.jobs] == [5000.0]
    asleep_s = 5000.0 - ON.suspend_after_s  # n1 and n2, from 600 s on
    saved = 2 * (NODE_IDLE_W - ON.suspended_node_watts) * asleep_s
    assert energy_j(off) == pytest.approx((100.0 + 5 * IDLE_W) * 5000.0, rel=1e-12)
    assert energy_j(off) - energy_j(on) == pytest.approx(saved, rel=1e-9)
    s = summarize(on)
    assert (s.suspends, s.resumes) == (2, 0)
    assert s.node_hours_suspended == pytest.approx(2 * asleep_s / 3600)
    assert s.resume_gpu_hours == 0.0
    assert summarize(off).suspends is None


def test_the_equal_horizon_pads_with_the_rules_tail() -> None:
    jobs = [measured_job("a", 0, 5000)]
    on, off = summarize(run(jobs, ON)), summarize(run(jobs, PowerSavingSettings()))
    horizon = 5000.0 + 3600.0
    # At the end n1, n2 sleep and n0 is empty: 2 x 20 W + 100 W; n0 suspends 600 s later.
    assert on.idle_watts == pytest.approx(2 * 20.0 + NODE_IDLE_W)
    assert on.idle_tail == ((600.0, 3 * 20.0),)
    pad_on = (2 * 20.0 + NODE_IDLE_W) * 600.0 + 3 * 20.0 * 3000.0
    assert on.at_horizon(horizon).energy_horizon_kwh == pytest.approx(
        on.energy_kwh + pad_on / JOULES_PER_KWH
    )
    pad_off = 6 * IDLE_W * 3600.0
    assert off.at_horizon(horizon).energy_horizon_kwh == pytest.approx(
        off.energy_kwh + pad_off / JOULES_PER_KWH
    )
    back = type(on).from_dict(json.loads(json.dumps(on.to_dict())))
    assert back.idle_tail == on.idle_tail and back.pad(3600.0) == pytest.approx(pad_on)
    assert on.pad(300.0) == pytest.approx((2 * 20.0 + NODE_IDLE_W) * 300.0)  # before the step


def test_a_restart_on_a_suspended_node_loads_its_checkpoint_once_the_node_is_up() -> None:
    rule = NodeRule(two_gpu_cluster(nodes=2), ON)
    rule.at(0.0, [], ())
    rule.at(1000.0, [], ())  # both nodes empty since 0: suspended at 600
    assert rule.states.state == {"n0": SUSPENDED, "n1": SUSPENDED}
    sim = measured_job("r", 0, 100)
    on_n0 = Allocation(Shape("G", 1, 1, 1), 1000, (GpuSlice("n0", (0,)),))
    job = LiveJob(sim, 1000.0, 500.0, allocation=on_n0, restart_until=1000.0 + 50.0)
    rule.wake(1000.0, [job])
    assert job.resume_until == 1000.0 + ON.resume_s
    assert job.restart_until == 1000.0 + ON.resume_s + 50.0  # the restart delay follows
    late = LiveJob(sim, 1000.0, 1000.0, allocation=on_n0)
    rule.wake(1100.0, [late])  # n0 still booting: the rest of its boot
    assert late.restart_until == late.resume_until == 1000.0 + ON.resume_s
    assert rule.states.resumes == 1


def test_a_job_placed_on_a_suspended_node_starts_exactly_resume_s_later() -> None:
    # a runs [0, 100) on n0; n0 empty from 100, suspended at 700; b arrives at 2000.
    jobs = [measured_job("a", 0, 100), measured_job("b", 2000, 100, gpus=2)]
    log = run(jobs, ON, nodes=1)
    a, b = log.jobs
    assert a.finish_s == 100.0
    assert b.first_start_s == 2000.0  # placed then: the node resumes
    assert b.finish_s == pytest.approx(2000.0 + ON.resume_s + 100.0, abs=1e-9)
    assert b.resume_gpu_seconds == pytest.approx(2 * ON.resume_s)
    assert b.restart_gpu_seconds == pytest.approx(2 * ON.resume_s)
    assert (log.suspends, log.resumes) == (1, 1)
    # [700, 2000) asleep at 20 W; the resume at the node's up draw (idle GPUs), then b.
    resume = [p for p in log.power if 2000.0 <= p.start_s < 2300.0]
    assert resume and all(p.true_watts == pytest.approx(NODE_IDLE_W) for p in resume)
    asleep = [p for p in log.power if 700.0 <= p.start_s < 2000.0]
    assert asleep and all(p.true_watts == pytest.approx(20.0) for p in asleep)


def test_spare_nodes_stay_up_and_excluded_nodes_never_suspend() -> None:
    jobs = [measured_job("a", 0, 5000)]
    spare = run(jobs, dataclasses.replace(ON, spare_nodes_per_type=1))
    # n1 sleeps from 600 s, n2 stays up as the spare until a ends and n0 is the spare.
    assert spare.suspended_node_seconds == pytest.approx(5000.0 - ON.suspend_after_s)
    assert spare.suspends == 2 and spare.idle_tail == ()
    saved = (NODE_IDLE_W - ON.suspended_node_watts) * (5000.0 - ON.suspend_after_s)
    assert energy_j(run(jobs, PowerSavingSettings())) - energy_j(spare) == pytest.approx(saved)
    excluded = run(jobs, dataclasses.replace(ON, exclude_nodes=frozenset({"n1", "n2"})))
    assert excluded.suspends == 0


class Recorder:
    """A policy that keeps every request it was sent."""

    def __init__(self, inner: Policy) -> None:
        self.inner = inner
        self.requests: list[pb.SolveRequest] = []

    @property
    def name(self) -> str:
        return self.inner.name

    def decide(self, r: RoundInput) -> Decision:
        self.requests.append(r.request)
        return self.inner.decide(r)

    def close(self) -> None:
        self.inner.close()


@pytest.mark.parametrize("policy", ["fifo", "gavel", "dsfro"])
def test_every_policy_gets_the_same_rule_and_pays_the_same_resume(policy: str) -> None:
    # Two early jobs, then a late one after every node has suspended (no spares): the late
    # job's nodes resume whoever planned (baselines emit no RESUME: the engine adds it).
    early = _model_jobs(2)
    late = dataclasses.replace(
        early[1], trace=dataclasses.replace(early[1].trace, job_id="late", submit_time_s=20_000.0)
    )
    recorder = Recorder(make_policy(policy))
    cluster = two_gpu_cluster(nodes=3)
    cluster.gpu_types[0].sm_clocks_mhz.extend([800, 600])
    settings = EngineSettings(reference_gpu_type="G", solver_budget_s=1.0, power_saving=ON)
    log = Simulation(cluster, [*early, late], recorder, settings=settings, seed=3).run()
    assert all(j.finish_s is not None for j in log.jobs)
    assert log.suspends == 3 and log.resumes >= 1
    job = next(j for j in log.jobs if j.job_id == "late")
    assert job.first_start_s == 20_000.0
    gpus = job.gpu_seconds / (job.finish_s - job.first_start_s)  # type: ignore[operator]
    assert job.resume_gpu_seconds == pytest.approx(ON.resume_s * round(gpus))
    seen = next(r for r in recorder.requests if any(j.name == "late" for j in r.jobs))
    assert seen.cluster.power_saving.enabled
    assert seen.cluster.power_saving.resume_time.ToSeconds() == 300
    assert all(n.power_state == pb.NODE_POWER_STATE_SUSPENDED for n in seen.cluster.nodes)
    assert min(n.idle_for.ToSeconds() for n in seen.cluster.nodes) >= 600


def test_the_cli_flags_set_the_rule_and_name_a_wrong_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = write_trace(tmp_path, GOOD)
    base = ["simulate", "--trace", str(trace), "--cluster", str(CLUSTER), "--policy", "fifo"]
    assert main([*base, "--suspend-after", "10m", "--out", str(tmp_path / "x")]) == 2
    assert "--suspend-after needs --power-saving on" in capsys.readouterr().err
    assert main([*base, "--power-saving", "on", "--resume-time", "20y"]) == 2
    assert main([*base, "--power-saving", "on", "--suspend-after", "3651d"]) == 2
    assert "--suspend-after must be at most" in capsys.readouterr().err
    out = tmp_path / "on"
    flags = ["--power-saving", "on", "--suspend-after", "10m", "--resume-time", "2m"]
    assert main([*base, *flags, "--spare-nodes", "1", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "suspends" in printed and "resume_gpu_hours" in printed
    summary = json.loads((out / "trace-fifo-s1-summary.json").read_text())
    assert summary["suspends"] > 0 and summary["node_hours_suspended"] > 0


def test_node_base_power_is_drawn_while_a_node_is_up_and_sent_to_the_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = write_trace(tmp_path, GOOD)
    base = ["simulate", "--trace", str(trace), "--cluster", str(CLUSTER), "--policy", "fifo"]
    assert main([*base, "--node-base-watts", "500", "--out", str(tmp_path / "x")]) == 2
    assert "--node-base-watts needs --power-saving on" in capsys.readouterr().err
    assert main([*base, "--power-saving", "on", "--node-base-watts", "-1"]) == 2
    summaries = {}
    for watts in ("0", "500"):
        out = tmp_path / watts
        flags = ["--power-saving", "on", "--node-base-watts", watts, "--out", str(out)]
        assert main([*base, *flags]) == 0
        summaries[watts] = json.loads((out / "trace-fifo-s1-summary.json").read_text())
    capsys.readouterr()
    off, on = summaries["0"], summaries["500"]
    assert off["horizon_s"] == on["horizon_s"] and off["suspends"] == on["suspends"]
    # 500 W for every node-hour up, to the equal horizon: the nodes' hours less those asleep.
    nodes = len(json.loads(CLUSTER.read_text())["nodes"])
    up_hours = nodes * on["horizon_s"] / 3600 - on["node_hours_suspended"]
    extra = on["energy_horizon_kwh"] - off["energy_horizon_kwh"]
    assert extra == pytest.approx(0.5 * up_hours, rel=0.02)


class SuspendsItsOwnNode(FirstFit):
    """FirstFit that also asks to suspend the node its first job runs on (a broken plan)."""

    def decide(self, r: RoundInput) -> Decision:
        d = super().decide(r)
        bad = (PowerAction("n0", PowerActionKind.SUSPEND, "broken"),)
        return dataclasses.replace(d, power_actions=bad)


def test_a_policys_suspend_is_checked_and_a_broken_one_stops_the_run() -> None:
    with pytest.raises(SimulationError, match="SUSPEND of n0, which runs a job"):
        run([measured_job("a", 0, 100)], ON, policy=SuspendsItsOwnNode())
