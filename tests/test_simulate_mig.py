"""MIG in the simulator: the truth's slice speed, layouts across rounds, the reconfiguration
delay, the static-partitioning baseline, the small-job scenario, and an end-to-end run."""

from __future__ import annotations

import dataclasses
import io

import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.domain import Allocation, GpuSlice, Shape
from solver.mig import GpuLayout, LayoutChange, layout_problems
from solver.offline.generate.spec import NodeKind
from solver.perfmodel import budgets
from solver.perfmodel.configs import type_facts
from solver.perfmodel.mig_catalog import load_mig_catalog
from solver.perfmodel.slices import slice_share
from solver.simulate.core import Decision, RoundInput, SimJob, SimulationLog, TraceJob
from solver.simulate.engine import Simulation
from solver.simulate.metrics import summarize
from solver.simulate.mig_scenario import mig_mix, mig_scenario
from solver.simulate.mig_state import MigState
from solver.simulate.policies import make_policy
from solver.simulate.policies.static_mig import StaticMigPolicy, balanced_layout
from solver.simulate.scenario import build_cluster
from solver.simulate.scenarios import scenario_gavel_physical
from solver.simulate.settings import EngineSettings
from solver.simulate.slicing import (
    instance_configs,
    kept_share,
    load_fractions,
    predicted_fraction,
)
from solver.simulate.trace import check_trace_against, parse_trace, trace_text
from solver.simulate.truth import TruthSettings

EXACT = TruthSettings(throughput_sigma=0.0, power_sigma=0.0, round_sigma=0.0)
A100 = "A100-80GB"


def a100_nodes(count: int = 1) -> pb.ClusterSnapshot:
    return build_cluster((NodeKind(A100, 8, float(count)),))


def small(name: str, submit: float, duration: float, model: str = "bert-large") -> TraceJob:
    return TraceJob(name, submit, "t", model, 1, duration, slices=True)


def realize(cluster: pb.ClusterSnapshot, jobs: list[TraceJob], seed: int = 1) -> list[SimJob]:
    return mig_mix(seed).realize_all(jobs, cluster)


def simulate(
    cluster: pb.ClusterSnapshot,
    sims: list[SimJob],
    policy: object,
    **settings: object,
) -> tuple[Simulation, SimulationLog]:
    s = EngineSettings(reference_gpu_type=A100, truth=EXACT, solver_budget_s=0.5)
    sim = Simulation(cluster, sims, policy, settings=dataclasses.replace(s, **settings), seed=1)  # type: ignore[arg-type]
    return sim, sim.run()


class Recorder:
    """A policy that records each round's input and decision."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.rounds: list[tuple[RoundInput, Decision]] = []

    @property
    def name(self) -> str:
        return str(self.inner.name)  # type: ignore[attr-defined]

    def decide(self, round_input: RoundInput) -> Decision:
        d: Decision = self.inner.decide(round_input)  # type: ignore[attr-defined]
        self.rounds.append((round_input, d))
        return d

    def close(self) -> None:
        self.inner.close()  # type: ignore[attr-defined]


# ---------------------------------------------------------------- the truth of a slice


def test_fractions_come_from_gavels_colocation_data() -> None:
    table = load_fractions()
    assert len(table) == 24  # 26 one-GPU job types, 2 of which did not run in pairs
    assert table["ResNet-18 (batch size 64)"] == 0.5  # keeps all its speed beside itself
    assert table["A3C"] == pytest.approx(0.5 * 7.17577 / 3.65717, abs=1e-4)
    assert table["ResNet-50 (batch size 16)"] == 1.0  # sharing costs more than time-slicing
    assert "ResNet-50 (batch size 128)" not in table


def test_kept_share_is_share_over_fraction_capped_at_one() -> None:
    assert kept_share(1 / 8, 0.5) == 0.25
    assert kept_share(4 / 7, 0.5) == 1.0
    assert kept_share(3 / 7, 1.0) == pytest.approx(3 / 7)
    with pytest.raises(ValueError, match="share and used fraction"):
        kept_share(0.5, 0.0)


def test_truth_slice_speed_is_the_one_gpu_rate_times_share_over_fraction() -> None:
    cluster = a100_nodes()
    sims = realize(cluster, [small("a", 0.0, 600.0), small("b", 0.0, 600.0)])
    sim = Simulation(cluster, sims, make_policy("gavel"), settings=EngineSettings(truth=EXACT))
    geometry = load_mig_catalog()[A100]
    job = next(j for j in sim.problem.jobs if j.name == "a")
    configs = instance_configs(job, sim.truth._facts, sim.problem.cluster.mig)
    top = max(c for (_, _, c) in configs)
    used = sims[0].gpu_fraction
    for profile in ("1g.10gb", "2g.20gb", "3g.40gb"):
        c = configs[(A100, profile, top)]
        share = slice_share(geometry, profile)
        rate = sim.truth.slice_rate("a", A100, profile, top)
        assert rate.samples_per_second == pytest.approx(
            c.samples_per_second / share * min(1.0, share / used)
        )
        assert rate.watts == pytest.approx(c.watts / share * min(1.0, share / used))


def test_the_policy_is_told_a_fraction_with_the_truths_error() -> None:
    told = predicted_fraction(3, "job-7", 0.6, 0.15)
    assert told != 0.6 and 0.3 < told <= 1.0
    assert predicted_fraction(3, "job-7", 0.6, 0.15) == told  # drawn once per job
    assert predicted_fraction(3, "job-7", 0.6, 0.0) == 0.6


# ---------------------------------------------------------------- layouts across rounds


def test_layout_state_reports_applies_and_counts_invalid_layouts() -> None:
    cluster = a100_nodes()
    node = cluster.nodes[0].name
    state = MigState(cluster)
    layout = balanced_layout(load_mig_catalog()[A100])
    changed = state.apply([LayoutChange(node, GpuLayout(0, layout))])
    assert changed == {(node, 0): ()} and state.reconfigurations == 1
    assert state.apply([LayoutChange(node, GpuLayout(0, layout))]) == {}  # no change
    first = layout[0]
    on = Allocation(Shape(A100, 1, 1, 1), 1410, (GpuSlice(node, (0,)),), first)
    snapshot = pb.ClusterSnapshot()
    snapshot.CopyFrom(cluster)
    state.fill(snapshot, [("j", on)])
    listed = snapshot.nodes[0].mig_layouts[0]
    assert listed.gpu_index == 0 and len(listed.instances) == len(layout)
    assert [i.job for i in listed.instances if (i.profile, i.start) == first.place] == ["j"]
    assert state.invalid([("j", on)]) == 0
    assert state.invalid([("j", on), ("k", on)]) == 1  # two jobs on one instance
    whole = Allocation(Shape(A100, 1, 1, 1), 1410, (GpuSlice(node, (0,)),))
    assert state.invalid([("w", whole)]) == 1  # a whole-GPU job on a partitioned GPU
    state.layouts[(node, 1)] = (("7g.80gb", 0), ("1g.10gb", 0))  # overlapping: cannot exist
    assert state.invalid([]) == 1


def test_static_partitioning_partitions_once_and_keeps_layouts_across_rounds() -> None:
    cluster = a100_nodes(2)
    jobs = [small(f"s{i}", 60.0 * i, 1800.0) for i in range(6)]
    jobs.append(TraceJob("big", 0.0, "t", "gpt3-1.3b", 4, 3600.0))
    recorder = Recorder(StaticMigPolicy())
    sim, log = simulate(cluster, realize(cluster, jobs), recorder)
    summary = summarize(log)
    assert summary.reconfigurations == 8 and summary.invalid_layouts == 0
    partitioned = cluster.nodes[0].name  # the first node by name
    assert {gpu[0] for gpu in sim.mig.layouts} == {partitioned}
    later = recorder.rounds[1][0].problem.cluster.node(partitioned)
    assert len(later.mig_layouts) == 8  # the layouts reported again in the next round
    for round_input, decision in recorder.rounds:
        assert not decision.layout_changes or round_input.round_index == 0
        for name, a in decision.allocations.items():
            on_partitioned = a.placement[0].node == partitioned
            assert (a.mig is not None) == name.startswith("s") == on_partitioned
    assert all(j.slice_seconds > 0 for j in log.jobs if j.slices)


def test_static_partitioning_keeps_the_queues_quota_and_the_power_budget() -> None:
    """Instances are admitted as whole GPUs are: six small jobs of a queue entitled to three
    A100s run three at a time (every round's plan passes the engine's checker; before, all six
    ran and the run stopped on a plan over the quota); and under a cluster budget with room
    above the floor for the first two and not a third, two start."""
    cluster = a100_nodes(2)
    cluster.queues.add(name="t", quotas=[pb.ResourceQuota(resource=A100, nominal=3.0)])
    jobs = [small(f"s{i}", 0.0, 1800.0) for i in range(6)]
    recorder = Recorder(StaticMigPolicy())
    _, log = simulate(cluster, realize(cluster, jobs), recorder)
    assert all(j.finish_s is not None for j in log.jobs)
    on = [sum(a.mig is not None for a in d.allocations.values()) for _, d in recorder.rounds]
    assert max(on) == 3

    free = Recorder(StaticMigPolicy())
    plain = a100_nodes(2)
    simulate(plain, realize(plain, jobs), free)
    round_input, decision = free.rounds[0]
    assert sum(a.mig is not None for a in decision.allocations.values()) == 6
    problem = round_input.problem
    facts = type_facts(problem.cluster)
    watts = {}
    for j in problem.jobs:
        a = decision.allocations[j.name]
        assert a.mig is not None
        fits = instance_configs(j, facts, problem.cluster.mig)
        watts[j.name] = fits[A100, a.mig.profile, a.sm_clock_mhz].watts
    # Room for s0 and s1 (first in submission order) and less than any third.
    room = watts["s0"] + watts["s1"] + 0.5 * min(watts.values())
    budget = budgets.floor_watts(problem.cluster) + room
    capped = dataclasses.replace(
        problem, cluster=dataclasses.replace(problem.cluster, power_budget_watts=budget)
    )
    d = StaticMigPolicy().decide(dataclasses.replace(round_input, problem=capped))
    assert {n for n, a in d.allocations.items() if a.mig is not None} == {"s0", "s1"}


def test_small_jobs_take_the_smallest_instance_their_memory_fits() -> None:
    cluster = a100_nodes()
    jobs = [small("bert", 0.0, 600.0), small("gpt", 0.0, 600.0, model="gpt3-1.3b")]
    recorder = Recorder(StaticMigPolicy())
    simulate(cluster, realize(cluster, jobs), recorder)
    first = recorder.rounds[0][1].allocations
    assert first["bert"].mig is not None and first["bert"].mig.profile == "1g.10gb"
    assert first["gpt"].mig is not None and first["gpt"].mig.profile == "3g.40gb"


def test_reconfiguration_delays_the_jobs_on_the_changed_gpu() -> None:
    cluster = a100_nodes()
    sims = realize(cluster, [small("a", 0.0, 600.0)])
    _, slow = simulate(cluster, sims, StaticMigPolicy(), reconfiguration_s=90.0)
    _, fast = simulate(cluster, sims, StaticMigPolicy(), reconfiguration_s=0.0)
    assert slow.jobs[0].finish_s is not None and fast.jobs[0].finish_s is not None
    assert slow.jobs[0].finish_s - fast.jobs[0].finish_s == pytest.approx(90.0)


def test_balanced_layout_is_the_gpu_operators_and_valid() -> None:
    for gpu_type, geometry in load_mig_catalog().items():
        layout = balanced_layout(geometry)
        assert sorted(geometry.profiles[i.profile].compute_slices for i in layout) == [1, 1, 2, 3]
        assert layout_problems(geometry, list(layout)) == [], gpu_type
    a100 = balanced_layout(load_mig_catalog()[A100])
    assert sorted(i.profile for i in a100) == ["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"]


# ---------------------------------------------------------------- scenario and trace


def test_the_scenario_has_at_least_half_small_one_gpu_jobs() -> None:
    s = mig_scenario(0)
    small_jobs = [j for j in s.jobs if j.slices]
    assert len(small_jobs) >= len(s.jobs) / 2 and len(small_jobs) == 136
    assert all(j.num_gpus == 1 for j in small_jobs)
    types = {n.gpu_type for n in s.cluster.nodes}
    assert types <= set(load_mig_catalog())
    sims = s.sim_jobs()
    assert all(0 < j.gpu_fraction <= 1 and j.max_gpus == 1 for j in sims if j.slices)
    assert len({j.fraction_source for j in sims if j.slices}) > 5


def test_trace_slices_column_round_trips_and_is_checked(tmp_path: object) -> None:
    plain = [TraceJob("a", 0.0, "t", "bert-large", 1, 60.0)]
    assert trace_text(plain).splitlines()[0].count(",") == 8  # nine columns, as before
    text = trace_text(
        [*plain, small("b", 1.0, 60.0), TraceJob("c", 2.0, "t", "x", 2, 9.0, slices=True)]
    )
    assert text.splitlines()[0].endswith(",slices")
    path = tmp_path / "t.csv"  # type: ignore[operator]
    path.write_text(text)
    parsed = parse_trace(path)
    assert [j.slices for j in parsed.jobs] == [False, True, True]
    problems = check_trace_against(parsed.jobs, "t.csv", a100_nodes(), {"bert-large", "x"})
    assert problems == [
        "t.csv:4:slices: only a one-GPU job may run on a MIG instance, this one asks for 2 GPUs"
    ]
    bad = io.StringIO(text.replace("true\n", "maybe\n", 1))
    path.write_text(bad.getvalue())
    assert any("slices: must be empty (false)" in p for p in parse_trace(path).problems)


# ---------------------------------------------------------------- end to end


def test_dsfro_runs_small_jobs_on_instances_with_valid_layouts() -> None:
    cluster = a100_nodes()
    jobs = [small(f"s{i}", 0.0, 3600.0) for i in range(14)]
    _, log = simulate(cluster, realize(cluster, jobs), make_policy("dsfro"), max_time_s=1800.0)
    summary = summarize(log)
    assert summary.invalid_layouts == 0
    assert summary.reconfigurations > 0
    assert any(j.slice_seconds > 0 for j in log.jobs)
    started = [j for j in log.jobs if j.first_start_s is not None]
    assert len(started) > 8  # more small jobs run than the node has GPUs
    whole = summarize(
        simulate(cluster, realize(cluster, jobs), make_policy("dsfro-whole"), max_time_s=1800.0)[1]
    )
    assert whole.reconfigurations == 0 and whole.small_on_slices == 0.0


def test_a_scenario_without_slices_gives_the_results_it_gave_before_mig() -> None:
    """gavel-physical, gavel, seed 1, six hours: the figures the simulator gave before slices
    existed (main at 37b99c4): to the last bit on Python 3.11; within 1e-13, since sum() of
    floats rounds otherwise from Python 3.12 on (any change of a plan moves them far more)."""
    s = scenario_gavel_physical(1)
    settings = dataclasses.replace(s.settings, max_time_s=6 * 3600.0)
    sim = Simulation(s.cluster, s.sim_jobs(), make_policy("gavel"), settings=settings, seed=1)
    m = summarize(sim.run())
    assert m.jobs_finished == 28
    assert (m.jct_mean_s, m.energy_kwh, m.samples, m.utilisation_busy) == pytest.approx(
        (9879.831854582693, 56.07265013422605, 8434600.635041034, 0.9919108637036955),
        rel=1e-13,
        abs=0.0,
    )
    assert m.reconfigurations == 0 and m.invalid_layouts == 0 and m.jct_small_mean_s is None


def test_gpus_partitioned_for_small_jobs_return_whole_to_a_large_job() -> None:
    """Small jobs fill one 8-GPU node on instances; once they have left, an 8-GPU job gets
    the node's GPUs back whole and finishes (GPUs once partitioned used to stay so, and the
    large job waited for good)."""
    cluster = a100_nodes()
    jobs = [small(f"s{i}", 0.0, 1800.0) for i in range(14)]
    jobs.append(TraceJob("large", 60.0, "t", "gpt3-1.3b", 8, 3600.0, preemptible=False))
    _, log = simulate(cluster, realize(cluster, jobs), make_policy("dsfro"), max_time_s=6 * 3600.0)
    summary = summarize(log)
    assert any(j.slice_seconds > 0 for j in log.jobs if j.job_id != "large")
    large = next(j for j in log.jobs if j.job_id == "large")
    assert large.finish_s is not None
    assert summary.invalid_layouts == 0 and summary.jobs_unfinished == 0


def test_static_partitioning_takes_its_share_of_all_mig_nodes_types_in_turn() -> None:
    """Half of the MIG nodes, types in turn: one node per type keeps one type whole (per-type
    rounding up partitioned every node, and large jobs never ran)."""

    def targets(kinds: tuple[NodeKind, ...], share: float = 0.5) -> dict[str, int]:
        cluster = build_cluster(kinds)
        recorder = Recorder(StaticMigPolicy(share))
        simulate(cluster, realize(cluster, [small("s", 0.0, 60.0)]), recorder)
        problem = recorder.rounds[0][0].problem
        types = {n.name: n.gpu_type for n in cluster.nodes}
        counts: dict[str, int] = {}
        for name in StaticMigPolicy(share).targets(problem):
            counts[types[name]] = counts.get(types[name], 0) + 1
        return counts

    h100 = "H100-80GB"
    assert targets((NodeKind(A100, 8, 1.0), NodeKind(h100, 8, 1.0))) == {A100: 1}
    assert targets((NodeKind(A100, 8, 2.0), NodeKind(h100, 8, 2.0))) == {A100: 1, h100: 1}
    assert targets((NodeKind(A100, 8, 3.0),), 1.0) == {A100: 3}


def test_static_partitioning_keeps_large_jobs_off_its_nodes_before_the_first_small_job() -> None:
    """A round without a slice job or a layout has no MIG geometry in its problem; the targets
    are the catalog's, so FIFO never puts a large job on a node to be partitioned. Before, a
    non-preemptible job started there in the first round, and when a small job came the run
    stopped: "list.remove(x): x not in list" pinning it (sim_unseen seed 8 through a service)."""
    cluster = a100_nodes(2)
    big = TraceJob("big", 0.0, "t", "gpt3-1.3b", 4, 3600.0, preemptible=False)
    jobs = [big, small("s0", 600.0, 1800.0)]
    recorder = Recorder(StaticMigPolicy())
    _, log = simulate(cluster, realize(cluster, jobs), recorder)
    assert all(j.finish_s is not None for j in log.jobs)
    assert summarize(log).invalid_layouts == 0
    partitioned = cluster.nodes[0].name
    assert not recorder.rounds[0][0].problem.cluster.mig  # the first round: no geometry
    for _, decision in recorder.rounds:
        if "big" in decision.allocations:
            assert decision.allocations["big"].placement[0].node != partitioned
        if "s0" in decision.allocations:
            assert decision.allocations["s0"].mig is not None
