"""The workload mix (solver.simulate.workload): deterministic and independent of job order, and
every realized job of both default scenarios runs on its cluster."""

from __future__ import annotations

from solver.domain import ModelSpec, ThroughputProfile
from solver.perfmodel.catalog import load_architectures, load_gpu_catalog
from solver.simulate.scenario import Scenario
from solver.simulate.trace import cluster_pools
from solver.simulate.workload import WorkloadMix, runs


def test_mix_is_deterministic_and_independent_of_job_order(philly: Scenario) -> None:
    jobs = list(philly.jobs[:300])
    cluster = philly.cluster
    one = WorkloadMix(seed=7).realize_all(jobs, cluster)
    again = WorkloadMix(seed=7).realize_all(list(reversed(jobs)), cluster)
    assert one == list(reversed(again))
    other = WorkloadMix(seed=8).realize_all(jobs, cluster)
    assert [s.workload_name for s in one] != [s.workload_name for s in other]
    assert {s.measured for s in one} == {True, False}


def test_every_realized_job_runs_on_the_cluster(philly: Scenario, llm: Scenario) -> None:
    for scenario in (philly, llm):
        cluster = scenario.cluster
        pools = cluster_pools(cluster)
        gpus = load_gpu_catalog()
        nodes = {n.gpu_type: n for n in cluster.nodes}
        archs = load_architectures()
        for s in scenario.sim_jobs():
            n = s.trace.num_gpus
            assert 1 <= s.min_gpus <= n <= s.max_gpus <= max(pools.values())
            if isinstance(s.workload, ThroughputProfile):
                counts = {p.num_gpus for p in s.workload.points}
                assert n in counts and min(counts) == s.min_gpus and max(counts) == s.max_gpus
                assert all(p.num_gpus <= pools[p.gpu_type] for p in s.workload.points)
            else:
                assert isinstance(s.workload, ModelSpec)
                assert s.workload == archs[s.workload_name]
                assert any(
                    runs(
                        s.workload,
                        gpus[t],
                        n,
                        nodes[t].gpu_count,
                        nodes[t].network_bandwidth_gbps,
                    )
                    for t in pools
                    if n <= pools[t]
                )
            assert s.parameters > 0
