"""The sweep's journal: each finished point as a JSON line beside the outputs
(``<prefix>-points.jsonl``), written as it comes back, so that a sweep cut short (killed,
interrupted, its Ray cluster lost) continues with ``--resume`` and solves only the points it
lacks. A point is known by the digest of its whole request (file, profile, flags and swept
weights), the solver's settings (the profile's [tuning], DSFRO_TUNING_*) and the product's
version: a journal of other settings has nothing to give."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from solver import __version__
from solver.core.settings import settings_digest
from solver.core.solver import Solver
from solver.offline.batch.records import BatchError
from solver.offline.batch.results import ResultsLog
from solver.offline.sweep.grid import JobChoice, SweepError, SweepPoint

SCHEMA = "dsfro-sweep-point/1"
KIND = "dsfro sweep point"


def journal_path(out: Path, prefix: str) -> Path:
    return out / f"{prefix}-points.jsonl"


def request_digest(request: bytes, solver: Solver) -> str:
    """The digest of a sweep's base request (serialized deterministically), the solver's
    settings and the product's version: what every point shares."""
    h = hashlib.sha256(request)
    h.update(settings_digest(solver.settings).encode())
    h.update(__version__.encode())
    return h.hexdigest()


def point_key(base: str, swept: dict[str, float]) -> str:
    """What identifies a point across runs: the digest of what decides its answer (a point's
    request is the base request with the swept weights set; `base`: ``request_digest``)."""
    h = hashlib.sha256(base.encode())
    h.update(json.dumps(swept, sort_keys=True).encode())
    return h.hexdigest()


def _point(raw: dict[str, Any]) -> SweepPoint:
    fields = {k: v for k, v in raw.items() if k != "jobs"}
    return SweepPoint(**fields, jobs=tuple(JobChoice(**j) for j in raw.get("jobs", ())))


class Journal:
    """The points file, locked against a second sweep: kept with `resume`, else started over."""

    def __init__(self, path: Path, *, resume: bool) -> None:
        self.path = path
        try:
            self._log = ResultsLog(
                path, resume=resume, overwrite=not resume, schema=SCHEMA, kind=KIND
            )
            self.done = {r["key"]: _point(r["point"]) for r in self._log.existing}
        except BatchError as e:
            raise SweepError(str(e)) from e
        except (KeyError, TypeError) as e:
            self._log.close()
            raise SweepError(f"{path}: not a sweep's points file ({e!r})") from e

    def append(self, key: str, point: SweepPoint) -> None:
        self._log.append({"schema": SCHEMA, "key": key, "point": asdict(point)})

    def close(self) -> None:
        self._log.close()


__all__ = ["Journal", "journal_path", "point_key", "request_digest"]
