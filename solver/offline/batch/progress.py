"""The progress of a batch: one updating line on a terminal, one plain line per run otherwise."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TextIO

from solver.offline.batch.records import TIMING_KEY, Record, RunKey, key_of


def _describe(key: RunKey) -> str:
    file, _, backend, budget, seed = key
    budget_text = "-" if budget is None else f"{budget:g}s"
    return f"{Path(file).name} {backend or '-'} {budget_text} seed {'-' if seed is None else seed}"


def _outcome(record: Record) -> str:
    if not record["ok"]:
        return f"ERROR ({record['error']['kind']}): {record['error']['message']}"
    text = f"{record['termination']} objective {record['objective']['total']:.6g}"
    if record["gap"] is not None:
        text += f" gap {record['gap']:.2%}"
    wall = record[TIMING_KEY]["wall_s"]
    return text + (f" ({wall:.2f} s)" if wall is not None else "")


class Progress:
    """One updating line on a terminal; one plain line per finished run otherwise."""

    def __init__(self, total: int, stream: TextIO | None, *, tty: bool | None = None) -> None:
        self.total = total
        self.done = 0
        self.errors = 0
        self.stream = stream
        self.tty = (stream is not None and stream.isatty()) if tty is None else tty
        self._shown = False

    def update(self, record: Record) -> None:
        self.done += 1
        self.errors += 0 if record["ok"] else 1
        if self.stream is None:
            return
        head = f"[{self.done}/{self.total}]"
        if self.tty:
            width = shutil.get_terminal_size((100, 20)).columns - 1
            text = f"{head} {self.errors} failed | last: {_describe(key_of(record))}: "
            text += _outcome(record)
            self.stream.write("\r\x1b[K" + text[:width])
            self._shown = True
        else:
            self.stream.write(f"{head} {_describe(key_of(record))}: {_outcome(record)}\n")
        self.stream.flush()

    def finish(self) -> None:
        if self.stream is not None and self.tty and self._shown:
            self.stream.write("\n")
            self.stream.flush()
            self._shown = False
