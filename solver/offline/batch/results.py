"""The JSON Lines results file: reading it (a last line without its newline, left by a crash, is
dropped), appending whole lines under a lock, and what a resumed run and an uninterrupted one
share (``strip_timing``)."""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from solver.offline.batch.records import SCHEMA, TIMING_KEY, BatchError, Record, RunKey, key_of


def strip_timing(record: Record) -> Record:
    """The line without its clock-dependent part: what two runs of the same inputs share."""
    return {k: v for k, v in record.items() if k != TIMING_KEY}


@dataclass
class ResultsFile:
    records: list[Record]
    truncated: bool
    """The file ended in a line without its newline (a crash mid-write); it was left out."""
    valid_bytes: int
    """Length of the file up to and including its last newline."""


class ResultsFileError(ValueError):
    """A results file with a corrupt complete line (not the trace of a crash)."""


def parse_results(
    data: bytes, name: str = "results", schema: object = SCHEMA, kind: str = "dsfro batch result"
) -> ResultsFile:
    """Result lines of a JSON Lines file's bytes, each a `kind` of `schema`; an unterminated
    last line is dropped."""
    end = data.rfind(b"\n") + 1
    records: list[Record] = []
    for lineno, line in enumerate(data[:end].split(b"\n")[:-1], start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ResultsFileError(f"{name}:{lineno}: not a JSON line: {e}") from e
        if not isinstance(record, dict) or record.get("schema") != schema:
            raise ResultsFileError(f"{name}:{lineno}: not a {kind} (schema {schema})")
        records.append(record)
    return ResultsFile(records, truncated=end < len(data), valid_bytes=end)


def read_results(path: str | Path) -> ResultsFile:
    """The results of a file (see parse_results); a missing file has none."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return ResultsFile([], truncated=False, valid_bytes=0)
    return parse_results(data, str(path))


def latest_by_key(records: Iterable[Record]) -> dict[RunKey, Record]:
    """The last line of each run key, in the order keys first appear."""
    out: dict[RunKey, Record] = {}
    for r in records:
        out[key_of(r)] = r
    return out


class ResultsLog:
    """The results file, locked against a second batch, opened to append whole lines (of
    `schema`; a sweep keeps its points in one too)."""

    def __init__(
        self,
        path: Path,
        *,
        resume: bool,
        overwrite: bool,
        schema: object = SCHEMA,
        kind: str = "dsfro batch result",
    ) -> None:
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._f: IO[bytes] = open(path, "a+b")  # noqa: SIM115 - closed in close()
        except OSError as e:
            raise BatchError(f"{path}: cannot open: {e.strerror or e}") from e
        try:
            fcntl.flock(self._f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            self._f.close()
            raise BatchError(f"{path}: in use by another {kind.split()[1]}") from e
        self._f.seek(0)
        data = self._f.read()
        self.existing: list[Record] = []
        self.dropped_partial = False
        if overwrite:
            self._f.truncate(0)
        elif data and not resume:
            self.close()
            raise BatchError(
                f"{path} exists: pass --resume to continue it, or --overwrite to start over"
            )
        elif data:
            try:
                parsed = parse_results(data, str(path), schema, kind)
            except ResultsFileError as e:
                self.close()
                raise BatchError(str(e)) from e
            self.existing = parsed.records
            if parsed.truncated:
                self.dropped_partial = True
                self._f.truncate(parsed.valid_bytes)
        self._f.seek(0, os.SEEK_END)

    def append(self, record: Record) -> None:
        line = json.dumps(record, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        self._f.write(line.encode("utf-8") + b"\n")
        self._f.flush()
        os.fsync(self._f.fileno())

    def close(self) -> None:
        if not self._f.closed:
            self._f.close()  # releases the lock
