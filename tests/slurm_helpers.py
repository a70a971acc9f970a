"""Helpers of the Slurm adapter's unit tests: the captured ``sinfo``/``squeue --json`` of a
real 22.05 cluster (tests/data/slurm, see its README), a fake command runner that serves them
and records every write, and a fake DSFRO client.

Captured states (4 nodes of 8 h100, node4 drained in both):
- ``mixed``: jobs 1 (3 GPUs on node1) and 2 (4 + 4 on node1, node2) running without demand;
  3 and 4 held with demands; 5 pending without demand.
- ``placed``: 9, 10 (node1, 4 + 4), 13 (node2) and 14 (node3) running as the adapter placed
  them; 7 released to node1 but not started; 8, 11, 12 held with demands; 15 held with a
  malformed demand; 16 pending without demand; 1-6 finished.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from solver.client import DsfroError
from solver.slurm.commands import Result, Slurm
from solver.wire import SolveRequest, SolveResponse

DATA = Path(__file__).resolve().parent / "data" / "slurm"


def captured(state: str, command: str) -> str:
    """The captured output of ``<command> --json`` in `state` (mixed or placed)."""
    return (DATA / state / f"{command}.json").read_text()


class FakeRunner:
    """Serves reads from captured outputs and records writes; ``fail`` maps a command
    prefix (e.g. ``("scontrol", "update", "JobId=9")``) to the error it returns."""

    def __init__(self, state: str = "placed") -> None:
        self.outputs = {"sinfo": captured(state, "sinfo"), "squeue": captured(state, "squeue")}
        self.reservations = "No reservations in the system\n"
        """What ``scontrol -o show reservation`` prints (times as Unix seconds)."""
        self.calls: list[tuple[str, ...]] = []
        self.fail: dict[tuple[str, ...], str] = {}
        self.before: Callable[[tuple[str, ...]], None] | None = None

    def __call__(self, argv: Sequence[str], timeout: float) -> Result:
        args = tuple(argv)
        if self.before is not None:
            self.before(args)
        for prefix, error in self.fail.items():
            if args[: len(prefix)] == prefix:
                self.calls.append(args)
                return Result(args, 1, "", error)
        if args == ("scontrol", "-o", "show", "reservation"):
            return Result(args, 0, self.reservations, "")
        if args[0] in ("sinfo", "squeue") and "--json" in args:
            return Result(args, 0, self.outputs[args[0]], "")
        if args[0] in ("sinfo", "squeue"):
            return Result(args, 0, "fingerprint", "")
        self.calls.append(args)
        return Result(args, 0, "", "")

    def writes(self, verb: str | None = None) -> list[tuple[str, ...]]:
        """The recorded writes, optionally only ``scontrol <verb>`` (or ``scancel``)."""
        if verb is None:
            return list(self.calls)
        return [c for c in self.calls if verb in c[:2]]

    def fields(self, job_id: int) -> dict[str, str]:
        """The fields of every ``scontrol update`` of one job, merged in order."""
        out: dict[str, str] = {}
        for c in self.writes("update"):
            if f"JobId={job_id}" in c:
                for arg in c[3:]:
                    key, _, value = arg.partition("=")
                    out[key] = value
        return out


def fake_slurm(state: str = "placed") -> tuple[Slurm, FakeRunner]:
    runner = FakeRunner(state)
    return Slurm(runner), runner


class FakeClient:
    """Answers Solve with `answer(request)`, or raises `error`; counts the calls."""

    def __init__(
        self,
        answer: Callable[[SolveRequest], SolveResponse] | None = None,
        error: DsfroError | None = None,
    ) -> None:
        self.answer = answer
        self.error = error
        self.requests: list[SolveRequest] = []

    def solve(
        self, request: SolveRequest, *, timeout: float | None = None, request_id: str | None = None
    ) -> SolveResponse:
        self.requests.append(request)
        if self.error is not None:
            raise self.error
        assert self.answer is not None
        return self.answer(request)
