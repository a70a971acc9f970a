"""The runs of ``dsfro simulate --compare`` kept as each finishes, so that a comparison cut short
(interrupted, killed, a run that failed, its Ray cluster lost) continues with ``--resume`` and
simulates only the runs it lacks: on two cores a comparison takes half an hour.

Each run, where it ran, writes its summary and log to ``<out>/.runs/<key>.pickle`` (whole or
not at all: ``solver.files.write_atomic``). A run is known by the digest of everything that
decides its result: the scenario or the bytes of its trace, cluster and schedule files, the
policy, the seed, the settings and overrides, the label, DSFRO's version. A run is
deterministic, so a kept one is what running it again would give. An entry that cannot be read
(cut short before the rename cannot happen; another version's classes can) is run again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import pickle
from dataclasses import asdict
from pathlib import Path
from typing import Any

from solver import __version__
from solver.core.settings import settings_digest
from solver.files import write_atomic
from solver.simulate.core import SimulationLog
from solver.simulate.metrics import Summary
from solver.simulate.run_spec import RunSpec

log = logging.getLogger(__name__)

FOLDER = ".runs"
SCHEMA = 1
Run = tuple[Summary, SimulationLog]


def _file_digest(path: str | None) -> str | None:
    return None if path is None else hashlib.sha256(Path(path).read_bytes()).hexdigest()


def run_key(spec: RunSpec) -> str:
    """The digest of what decides `spec`'s result (not where its files go, nor how it connects)."""
    fields = asdict(spec)
    for name in ("out", "connection", "trace", "cluster", "power", "settings"):
        fields.pop(name)
    fields["files"] = [_file_digest(p) for p in (spec.trace, spec.cluster, spec.power)]
    fields["settings"] = settings_digest(spec.settings)
    fields["version"], fields["schema"] = __version__, SCHEMA
    text = json.dumps(fields, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


def journal_path(spec: RunSpec) -> Path:
    return Path(spec.out) / FOLDER / f"{run_key(spec)}.pickle"


def save_run(spec: RunSpec, run: Run) -> None:
    """Keep `run`, the result of `spec`."""
    path = journal_path(spec)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = pickle.dumps(run, protocol=pickle.HIGHEST_PROTOCOL)
    write_atomic(path, lambda f: f.write(data))


def load_run(spec: RunSpec) -> Run | None:
    """The kept result of `spec`, or None (never run, or unreadable: it runs again)."""
    path = journal_path(spec)
    if not path.exists():
        return None
    try:
        run: Any = pickle.loads(path.read_bytes())
    except Exception as e:  # any unreadable entry is run again
        log.warning("%s: cannot read a kept run, running it again (%r)", path, e)
        return None
    if not (
        isinstance(run, tuple)
        and len(run) == 2
        and isinstance(run[0], Summary)
        and isinstance(run[1], SimulationLog)
    ):
        log.warning("%s: not a kept run, running it again", path)
        return None
    return run[0], run[1]


__all__ = ["FOLDER", "Run", "journal_path", "load_run", "run_key", "save_run"]
