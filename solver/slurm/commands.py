"""The Slurm commands the adapter runs, each with a timeout (Slurm's clients retry for
minutes when slurmctld is gone), through a runner that tests replace.

Reads: ``sinfo --json``, ``squeue --json``, ``scontrol -o show reservation``. Writes:
``scontrol update|release|hold|requeuehold`` and ``scancel --signal``. Nothing else touches
Slurm.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from solver.slurm.reservations import Reservation, parse_reservations
from solver.slurm.state import SlurmJob, SlurmNode, SlurmOutputError, parse_sinfo, parse_squeue

DEFAULT_TIMEOUT = 10.0
"""Seconds any one Slurm command may take."""


@dataclass(frozen=True)
class Result:
    """A finished command."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def error(self) -> str:
        """What went wrong, in one line."""
        text = " ".join((self.stderr or self.stdout).split())
        return f"{' '.join(self.argv[:2])}: exit {self.returncode}: {text[:300]}"


Runner = Callable[[Sequence[str], float], Result]
"""Runs argv with a timeout in seconds; never raises for a failed or timed-out command."""


def run_subprocess(argv: Sequence[str], timeout: float) -> Result:
    """`argv` as a child process (no shell); a timeout or a missing binary is a Result.
    Slurm's clients print times as Unix seconds in it (``SLURM_TIME_FORMAT=%s``), whatever
    the adapter's own environment asks."""
    start = time.monotonic()
    env = {**os.environ, "SLURM_TIME_FORMAT": "%s"}
    try:
        done = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=timeout, check=False, env=env
        )
    except subprocess.TimeoutExpired:
        return Result(
            tuple(argv), 124, "", f"timed out after {timeout:g} s", time.monotonic() - start
        )
    except OSError as e:
        return Result(tuple(argv), 127, "", str(e), time.monotonic() - start)
    return Result(tuple(argv), done.returncode, done.stdout, done.stderr, time.monotonic() - start)


class SlurmError(RuntimeError):
    """Slurm could not be read: a command failed, timed out, or printed what can't be read."""


class Slurm:
    """The adapter's view of Slurm's command-line tools."""

    def __init__(self, runner: Runner = run_subprocess, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.runner = runner
        self.timeout = timeout

    def run(self, *argv: str) -> Result:
        return self.runner(argv, self.timeout)

    def _read(self, *argv: str) -> str:
        result = self.run(*argv)
        if not result.ok:
            raise SlurmError(result.error())
        return result.stdout

    def nodes(self) -> list[SlurmNode]:
        """Every node (``sinfo --json``)."""
        try:
            return parse_sinfo(self._read("sinfo", "--json"))
        except SlurmOutputError as e:
            raise SlurmError(str(e)) from None

    def jobs(self) -> list[SlurmJob]:
        """Every job Slurm still lists, finished ones too (``squeue --json``)."""
        try:
            return parse_squeue(self._read("squeue", "--json"))
        except SlurmOutputError as e:
            raise SlurmError(str(e)) from None

    def reservations(self) -> list[Reservation]:
        """Every reservation, active or to come (``scontrol -o show reservation``)."""
        try:
            return parse_reservations(self._read("scontrol", "-o", "show", "reservation"))
        except SlurmOutputError as e:
            raise SlurmError(str(e)) from None

    def fingerprint(self) -> str:
        """A cheap summary of the queue and the nodes (ids and states): it changes when a
        job is submitted, starts or ends, or a node changes state (the loop's events)."""
        jobs = self._read("squeue", "--noheader", "--format=%i %T %r")
        nodes = self._read("sinfo", "--noheader", "--Node", "--format=%N %T")
        return jobs + "\n" + nodes

    def update(self, job_id: int, fields: Sequence[tuple[str, str]]) -> Result:
        return self.run("scontrol", "update", f"JobId={job_id}", *(f"{k}={v}" for k, v in fields))

    def release(self, job_ids: Sequence[int]) -> Result:
        return self.run("scontrol", "release", ",".join(map(str, job_ids)))

    def hold(self, job_ids: Sequence[int]) -> Result:
        return self.run("scontrol", "hold", ",".join(map(str, job_ids)))

    def requeue_hold(self, job_id: int) -> Result:
        return self.run("scontrol", "requeuehold", str(job_id))

    def signal(self, job_id: int, signal: str) -> Result:
        """`signal` to every step of the job and to its batch script (``--full``)."""
        return self.run("scancel", f"--signal={signal}", "--full", str(job_id))
