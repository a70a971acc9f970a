"""A job's own placement rules end to end, on a real Slurm and a real DSFRO: a job asking for
features runs on a node that has them, as planned, and one pinned by ``--nodelist`` on its
node; a constraint beyond a selector (matching OR) and a node list of several nodes go back to
Slurm, which runs them itself; a job waits for its ``--dependency`` and ``--begin``; a job is kept
off nodes reserved before it would end, and an exclusive job off a node another job of its round
takes."""

from __future__ import annotations

from pathlib import Path

from solver.slurm.decide import Action
from solver.slurm.record import decode
from tests.slurm_cluster_helpers import (
    GPUS,
    Cluster,
    MakeAdapter,
    assert_runs_as_planned,
    by_job,
    demand,
    job_script,
)


def test_a_job_runs_on_a_node_with_its_features_as_planned(
    slurm: Cluster, dsfro: str, make_adapter: MakeAdapter, tmp_path: Path
) -> None:
    """Only node3 is both fast and ib; node1, the first fit without features, is left."""
    slurm.features("node[2-3]", "fast")
    slurm.features("node3", "fast,ib")
    slurm.features("node4", "ib")
    job = slurm.sbatch("featured", demand("gpt3-1.3b", GPUS, GPUS), f"--gres=gpu:h100:{GPUS}",
                       "--constraint=fast&ib", script=job_script(tmp_path))  # fmt: skip
    either = slurm.sbatch("either", demand("gpt3-1.3b", GPUS, GPUS), f"--gres=gpu:h100:{GPUS}",
                          "--constraint=ib|fast", script=job_script(tmp_path))  # fmt: skip
    adapter = make_adapter(dsfro)
    decisions = by_job(adapter.round())
    d, e = decisions[job], decisions[either]
    assert d.action is Action.PLACE and d.target is not None and d.target.nodes == ("node3",)
    assert e.action is Action.PLACE and e.target is not None
    assert e.target.nodes in (("node2",), ("node4",))
    slurm.wait_running([job, either])
    assert_runs_as_planned(slurm, tmp_path, d)


def test_a_matching_or_constraint_goes_back_to_slurm_and_runs(
    slurm: Cluster, dsfro: str, make_adapter: MakeAdapter
) -> None:
    slurm.features("node[1-2]", "rack1")
    slurm.features("node[3-4]", "rack2")
    job = slurm.sbatch("racked", demand("gpt3-1.3b", 2, 2), "--gres=gpu:h100:2", "-N", "2",
                       "--constraint=[rack1|rack2]")  # fmt: skip
    adapter = make_adapter(dsfro)
    d = by_job(adapter.round())[job]
    assert (d.action, d.reason) == (Action.FALLBACK, "constraint")
    running = slurm.wait_running([job])[job]
    nodes = {name for name, _ in running.allocation}
    assert nodes in ({"node1", "node2"}, {"node3", "node4"})
    assert decode(running.admin_comment).state == "fallback"


def test_a_jobs_own_nodelist_is_kept_and_one_of_several_nodes_goes_back_to_slurm(
    slurm: Cluster, dsfro: str, make_adapter: MakeAdapter, tmp_path: Path
) -> None:
    """Best fit alone would take node1; the job asked for node4 and runs there. Before, the
    adapter's node list replaced the job's own."""
    pinned = slurm.sbatch("pinned", demand("gpt3-1.3b", GPUS, GPUS), f"--gres=gpu:h100:{GPUS}",
                          "--nodelist=node4", script=job_script(tmp_path))  # fmt: skip
    pair = slurm.sbatch("pair", demand("gpt3-1.3b", 2, 2), "--gres=gpu:h100:1", "-N", "2",
                        "--nodelist=node[2-3]")  # fmt: skip
    adapter = make_adapter(dsfro)
    decisions = by_job(adapter.round())
    d = decisions[pinned]
    assert d.action is Action.PLACE and d.target is not None and d.target.nodes == ("node4",)
    assert (decisions[pair].action, decisions[pair].reason) == (Action.FALLBACK, "nodelist")
    jobs = slurm.wait_running([pinned, pair])
    assert {name for name, _ in jobs[pair].allocation} == {"node2", "node3"}
    assert_runs_as_planned(slurm, tmp_path, d)


def test_a_job_waits_for_its_dependency_and_its_begin_then_runs(
    slurm: Cluster, dsfro: str, make_adapter: MakeAdapter, tmp_path: Path
) -> None:
    """Slurm leaves a held job's dependency "(unfulfilled)" after the job it names has ended:
    the adapter reads that job's state itself. Before, the job was planned and released at once
    and sat in Slurm's queue (Dependency) on the GPUs planned for it."""
    first = slurm.sbatch("first", None, hold=False, script="sleep 2")
    after = slurm.sbatch("after", demand("gpt3-1.3b", GPUS, GPUS), f"--gres=gpu:h100:{GPUS}",
                         f"--dependency=afterok:{first}", script=job_script(tmp_path))  # fmt: skip
    later = slurm.sbatch("later", demand("gpt3-1.3b", 1, 1), "--gres=gpu:h100:1",
                         "--begin=now+3600")  # fmt: skip
    adapter = make_adapter(dsfro)
    decisions = by_job(adapter.round())
    assert (decisions[after].action, decisions[after].reason) == (Action.WAIT, "not_eligible")
    assert (decisions[later].action, decisions[later].reason) == (Action.WAIT, "not_eligible")
    slurm.wait(f"job {first} to complete", lambda: first not in slurm.jobs(), 30)
    d = by_job(adapter.round())[after]
    assert d.action is Action.PLACE and d.target is not None
    slurm.wait_running([after])
    assert_runs_as_planned(slurm, tmp_path, d)
    assert slurm.jobs()[later].held


def test_reserved_nodes_are_left_out_and_a_job_of_the_reservation_goes_back_to_slurm(
    slurm: Cluster, dsfro: str, make_adapter: MakeAdapter, tmp_path: Path
) -> None:
    slurm.run("scontrol", "create", "reservation", "reservationname=dsfro-test", "starttime=now",
              "duration=10", "nodes=node1", "users=root", "flags=maint,ignore_jobs")  # fmt: skip
    try:
        slurm.wait("node1 to be reserved", lambda: "maint" in slurm.run("sinfo", "-h", "-N",
                   "-n", "node1", "-o", "%T"), 10)  # fmt: skip
        inside = slurm.sbatch("inside", demand("gpt3-1.3b", 1, 1), "--gres=gpu:h100:1",
                              "--reservation=dsfro-test")  # fmt: skip
        outside = slurm.sbatch("outside", demand("gpt3-1.3b", GPUS, GPUS),
                               f"--gres=gpu:h100:{GPUS}", script=job_script(tmp_path))  # fmt: skip
        decisions = by_job(make_adapter(dsfro).round())
        assert (decisions[inside].action, decisions[inside].reason) == (
            Action.FALLBACK,
            "reservation",
        )
        d = decisions[outside]
        assert d.action is Action.PLACE and d.target is not None and "node1" not in d.target.nodes
        jobs = slurm.wait_running([inside, outside])
        assert [name for name, _ in jobs[inside].allocation] == ["node1"]
        assert_runs_as_planned(slurm, tmp_path, d)
    finally:
        slurm.reset()  # its jobs cancelled, then the reservation deleted


def test_an_exclusive_job_gets_an_empty_node_and_keeps_it_to_itself(
    slurm: Cluster, dsfro: str, make_adapter: MakeAdapter, tmp_path: Path
) -> None:
    """Best fit alone would put the exclusive job beside the 1-GPU job on node1, where Slurm
    would not start it, and the next job beside it, where Slurm would not start that one.
    Slurm gives an exclusive job every GPU of its node (22.05: ``gpu:h100:8`` for
    ``--gres=gpu:h100:4``), so the adapter leaves it to run as Slurm started it."""
    other = slurm.sbatch("other", None, "--nodelist=node1", "--gres=gpu:h100:1", hold=False)
    slurm.wait_running([other])
    alone = slurm.sbatch("alone", demand("gpt3-1.3b", 4, 4), "--gres=gpu:h100:4", "--exclusive",
                         script=job_script(tmp_path))  # fmt: skip
    adapter = make_adapter(dsfro)
    d = by_job(adapter.round())[alone]
    assert d.action is Action.PLACE and d.target is not None and "node1" not in d.target.nodes
    running = slurm.wait_running([alone])[alone]
    assert [name for name, _ in running.allocation] == list(d.target.nodes)
    beside = slurm.sbatch("beside", demand("gpt3-1.3b", 4, 4), "--gres=gpu:h100:4")
    e = by_job(adapter.round())[beside]
    assert e.action is Action.PLACE and e.target is not None
    assert not set(e.target.nodes) & set(d.target.nodes)
    slurm.wait_running([beside])


def test_a_job_is_kept_off_nodes_reserved_before_it_would_end(
    slurm: Cluster, dsfro: str, make_adapter: MakeAdapter, tmp_path: Path
) -> None:
    """node1-3 reserved from an hour on: two jobs of two hours may use only node4 (one runs,
    one waits), a job of half an hour runs on a reserved node. Before, a long job was released
    there and pended ("ReqNodeNotAvail, May be reserved for other job") until replanned."""
    slurm.run("scontrol", "create", "reservation", "reservationname=dsfro-later",
              "starttime=now+3600", "duration=60", "nodes=node[1-3]", "users=root",
              "flags=maint,ignore_jobs")  # fmt: skip
    try:
        whole = (demand("gpt3-1.3b", GPUS, GPUS), f"--gres=gpu:h100:{GPUS}")
        long_jobs = [slurm.sbatch(f"long{k}", *whole, "--time=120") for k in (1, 2)]
        short = slurm.sbatch("short", *whole, "--time=30", script=job_script(tmp_path))
        report = make_adapter(dsfro).round()
        assert report.warnings == []  # Slurm's reservations read, with their Unix times
        decisions = by_job(report)
        placed = [decisions[j] for j in long_jobs if decisions[j].action is Action.PLACE]
        assert len(placed) == 1 and placed[0].target is not None
        assert placed[0].target.nodes == ("node4",)
        d = decisions[short]
        assert d.action is Action.PLACE and d.target is not None
        assert d.target.nodes[0] in ("node1", "node2", "node3")
        slurm.wait_running([placed[0].job_id, short])
        assert_runs_as_planned(slurm, tmp_path, d)
    finally:
        slurm.reset()


def test_an_exclusive_job_and_another_planned_onto_one_empty_node_do_not_both_go(
    slurm: Cluster, dsfro: str, make_adapter: MakeAdapter, tmp_path: Path
) -> None:
    """Every node but node4 busy: an exclusive 4-GPU job and a 4-GPU job both fit only there.
    The exclusive one is released and runs; the other waits a round (``gpus_busy``), not
    pending beside it until ``--replan-after``."""
    busy = [slurm.sbatch(f"busy{k}", None, f"--nodelist=node{k}", "--gres=gpu:h100:1",
                         hold=False) for k in (1, 2, 3)]  # fmt: skip
    slurm.wait_running(busy)
    alone = slurm.sbatch("alone", demand("gpt3-1.3b", 4, 4), "--gres=gpu:h100:4", "--exclusive",
                         script=job_script(tmp_path))  # fmt: skip
    other = slurm.sbatch("other", demand("gpt3-1.3b", 4, 4), "--gres=gpu:h100:4",
                         "--nodelist=node4")  # fmt: skip
    decisions = by_job(make_adapter(dsfro).round())
    d, e = decisions[alone], decisions[other]
    assert d.action is Action.PLACE and d.target is not None and d.target.nodes == ("node4",)
    assert (e.action, e.reason) == (Action.WAIT, "gpus_busy")
    slurm.wait_running([alone])
    assert slurm.jobs()[other].held
