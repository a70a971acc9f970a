"""A real one-machine Slurm for the adapter's end-to-end tests (tests/test_slurm_e2e*.py).

The cluster comes from ``scripts/slurm-dev-cluster.sh``: the one ``.ci/run`` started
(``DSFRO_SLURM_DIR``), else one started here for the session in a temporary directory, on its
own ports, with a short ``cred_expire`` (a requeued job waits it + 1 s). Without Slurm
installed the tests skip, and ``make test`` prints how to run them; with
``DSFRO_REQUIRE_SLURM=1`` (CI) the skip is a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pytest

from solver.slurm.decide import Decision
from solver.slurm.loop import Adapter, Report
from solver.slurm.record import decode
from solver.slurm.state import SlurmJob, parse_squeue

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "slurm-dev-cluster.sh"
REQUIRE = os.environ.get("DSFRO_REQUIRE_SLURM") == "1"
NEEDED = ("slurmctld", "slurmd", "munged", "mungekey", "sinfo", "squeue", "sbatch", "scontrol")
HOW_TO_RUN = (
    "install Slurm with `sudo scripts/slurm-dev-cluster.sh install` (Debian/Ubuntu: slurmctld, "
    "slurmd, slurm-client, munge), then `make test` starts a cluster for them; `.ci/run` does "
    "both, as CI does"
)
NODES, GPUS = 4, 8
"""What the tests expect of the cluster: four nodes of eight h100."""
SKIPPED: list[str] = []
"""Why the Slurm tests skipped, for the terminal summary (tests/conftest.py)."""


def missing() -> list[str]:
    path = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
    return [b for b in NEEDED if shutil.which(b, path=path) is None]


def skip_or_fail(reason: str) -> None:
    """Skips (on a laptop without Slurm) or, under DSFRO_REQUIRE_SLURM=1, fails."""
    if REQUIRE:
        pytest.fail(f"DSFRO_REQUIRE_SLURM=1 but the Slurm tests can't run: {reason}")
    SKIPPED.append(reason)
    pytest.skip(f"Slurm end-to-end tests skipped: {reason}. To run them: {HOW_TO_RUN}")


@dataclass
class Cluster:
    """A running dev cluster and the commands the tests use on it."""

    base: Path
    cred_expire: float

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.base / "etc" / "slurm.conf")}

    def run(self, *argv: str, check: bool = True) -> str:
        done = subprocess.run(
            list(argv), env=self.env, capture_output=True, text=True, timeout=20, check=False
        )
        if check and done.returncode != 0:
            raise AssertionError(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr}")
        return done.stdout

    def sbatch(
        self,
        name: str,
        comment: str | None,
        *args: str,
        hold: bool = True,
        script: str = "sleep 300",
    ) -> int:
        argv = ["sbatch", "--parsable", "-o", "/dev/null", "-J", name, *args]
        if hold:
            argv.append("--hold")
        if comment is not None:
            argv.append(f"--comment={comment}")
        return int(self.run(*argv, "--wrap", script).strip().split(";")[0])

    def jobs(self) -> dict[int, SlurmJob]:
        """Jobs not finished, by id, read back with ``squeue --json``."""
        jobs = parse_squeue(self.run("squeue", "--json"))
        return {j.job_id: j for j in jobs if j.pending or j.active}

    def wait(self, what: str, done: Callable[[], bool], seconds: float = 20.0) -> None:
        end = time.monotonic() + seconds
        while not done():
            if time.monotonic() > end:
                queue = self.run("squeue", "-o", "%i %j %T %r %N %b", check=False)
                nodes = self.run("sinfo", "-N", "-o", "%N %T %E", check=False)
                raise AssertionError(
                    f"timed out after {seconds:g} s waiting for {what}:\n{queue}\n{nodes}"
                )
            time.sleep(0.2)

    def wait_running(self, job_ids: list[int], seconds: float = 20.0) -> dict[int, SlurmJob]:
        self.wait(
            f"jobs {job_ids} to run",
            lambda: all(
                self.jobs().get(i, None) is not None and self.jobs()[i].state == "RUNNING"
                for i in job_ids
            ),
            seconds,
        )
        return self.jobs()

    def drain(self, node: str) -> None:
        self.run("scontrol", "update", f"NodeName={node}", "State=DRAIN", "Reason=dsfro-test")

    def features(self, nodes: str, features: str) -> None:
        """Set the nodes' (a hostlist) features, available and active; "" clears them."""
        self.run("scontrol", "update", f"NodeName={nodes}", f"AvailableFeatures={features}",
                 f"ActiveFeatures={features}")  # fmt: skip

    def reset(self) -> None:
        """No job left, every node up, no node feature, no reservation."""
        self.run("scancel", "--partition", "gpu", check=False)
        self.features(f"node[1-{NODES}]", "")
        self.wait("the queue to empty", lambda: not self.jobs(), 30)
        for line in self.run("scontrol", "show", "reservation", "-o").splitlines():
            if line.startswith("ReservationName="):  # deleted once none of its jobs runs
                name = line.split()[0].split("=", 1)[1]
                self.run("scontrol", "delete", f"ReservationName={name}")
        for node in (f"node{i}" for i in range(1, NODES + 1)):
            self.run("scontrol", "update", f"NodeName={node}", "State=RESUME", check=False)
        self.wait(
            "the nodes to be idle",
            lambda: self.run("sinfo", "-h", "-o", "%T").split() == ["idle"],
            30,
        )

    def check(self) -> None:
        nodes = json.loads(self.run("sinfo", "--json"))["nodes"]
        shape = sorted((n["name"], n["gres"]) for n in nodes)
        want = [(f"node{i}", f"gpu:h100:{GPUS}") for i in range(1, NODES + 1)]
        if shape != want:
            raise AssertionError(f"the Slurm tests need {want}, the cluster has {shape}")


def _cred_expire(base: Path) -> float:
    for line in (base / "etc" / "slurm.conf").read_text().splitlines():
        if line.startswith("AuthInfo="):
            for item in line.split("=", 1)[1].split(","):
                if item.startswith("cred_expire="):
                    return float(item.split("=")[1])
    return 120.0


@contextmanager
def session_cluster() -> Iterator[Cluster]:
    """The cluster .ci/run started, or one started (and stopped) here, in a directory of its
    own under the system's temporary directory (munged wants every directory above its socket
    searchable by all, which pytest's temporary directories are not)."""
    given = os.environ.get("DSFRO_SLURM_DIR")
    if given:
        base = Path(given)
        if not (base / "etc" / "slurm.conf").is_file():
            skip_or_fail(f"DSFRO_SLURM_DIR={given} has no etc/slurm.conf")
        cluster = Cluster(base, _cred_expire(base))
        cluster.check()
        yield cluster
        return
    if missing():
        skip_or_fail(f"not installed: {', '.join(missing())}")
    top = Path(tempfile.mkdtemp(prefix="dsfro-slurm-test-"))
    top.chmod(0o755)
    base = top / "cluster"
    env = {
        **os.environ,
        "SLURM_CI_CRED_EXPIRE": "5",
        "SLURM_CI_KILL_WAIT": "1",
        "SLURM_CI_PORT": os.environ.get("DSFRO_SLURM_TEST_PORT", "26817"),
        "SLURM_CI_NODES": str(NODES),
        "SLURM_CI_GPUS": str(GPUS),
    }
    started = subprocess.run(
        [str(SCRIPT), "start", str(base)], env=env, capture_output=True, text=True, timeout=120
    )
    try:
        if started.returncode != 0:  # installed but broken: that is a failure, not a skip
            pytest.fail(f"the dev cluster did not start: {started.stderr.strip()[-800:]}")
        cluster = Cluster(base, _cred_expire(base))
        cluster.check()
        yield cluster
    finally:
        subprocess.run(
            [str(SCRIPT), "stop", str(base)], env=env, capture_output=True, timeout=120, check=False
        )
        shutil.rmtree(top, ignore_errors=True)


# ---------------------------------------------------------------- the tests' jobs and checks

BUDGET = 1.0
"""Solve budget of every round: these snapshots are proven optimal well within it."""


def job_script(tmp_path: Path) -> str:
    """What each test job runs: it copies the plan file it finds at its start (the launcher's
    part of the contract), then sleeps."""
    plans, out = tmp_path / "plans", tmp_path / "out"
    return (
        f'cp {plans}/"$SLURM_JOB_ID".env {out}/"$SLURM_JOB_ID".'
        '"${SLURM_RESTART_COUNT:-0}".env 2>/dev/null; sleep 300'
    )


def demand(model: str, lo: int, hi: int, **more: Any) -> str:
    return "dsfro:" + json.dumps({"model": model, "min_gpus": lo, "max_gpus": hi, **more})


def by_job(report: Report) -> dict[int, Decision]:
    return {d.job_id: d for d in report.decisions}


def assert_runs_as_planned(slurm: Cluster, tmp_path: Path, d: Decision, restart: int = 0) -> None:
    """The job runs where and how its decision says: nodes, GPUs per node, TresFreq, record,
    and the plan file the job read at its start."""
    t = d.target
    assert t is not None
    job = slurm.jobs()[d.job_id]
    assert job.state == "RUNNING", (d.job_id, job.state, job.reason)
    assert sorted(n for n, _ in job.allocation) == sorted(t.nodes)
    assert [g.count if g else 0 for _, g in job.allocation] == [t.gpus_per_node] * len(t.nodes)
    assert job.tres_per_node == f"gres:gpu:h100:{t.gpus_per_node}"
    assert job.tres_freq == f"gpu:{t.sm_clock_mhz}"
    assert decode(job.admin_comment).target == t
    env_file = tmp_path / "out" / f"{d.job_id}.{restart}.env"
    slurm.wait(f"job {d.job_id} to read its plan", env_file.exists, 10)
    env = dict(line.split("=", 1) for line in env_file.read_text().splitlines())
    assert (env["DSFRO_DATA_PARALLEL"], env["DSFRO_TENSOR_PARALLEL"]) == (
        str(t.data_parallel),
        str(t.tensor_parallel),
    )
    assert env["DSFRO_PIPELINE_PARALLEL"] == str(t.pipeline_parallel)
    assert env["DSFRO_SM_CLOCK_MHZ"] == str(t.sm_clock_mhz)
    assert env["DSFRO_NODES"] == ",".join(t.nodes)


JOBS = [
    ("gpt3-1.3b", 1, 4),
    ("gpt3-2.7b", 1, 8),
    ("gpt3-6.7b", 2, 8),
    ("llama2-7b", 2, 8),
    ("bert-large", 1, 2),
    ("gpt2-xl", 1, 4),
    ("llama2-13b", 4, 8),
    ("gpt3-13b", 8, 16),
]


class MakeAdapter(Protocol):
    """The ``make_adapter`` fixture (tests/conftest.py): an adapter on the real Slurm."""

    def __call__(self, address: str, **kwargs: Any) -> Adapter: ...
