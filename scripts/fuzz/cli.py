"""Fuzzing benchmark of the gRPC service: a real server in its own process, N requests.

The server (``server.py``) runs in a separate process on a free loopback port, with room for
many solves at once and a short maximum time budget. Client threads send a reproducible mix
(``--seed``) to all four RPCs:

* structure-aware requests: valid requests (the bundled instances, ``tests/factories``, small
  generated snapshots) mutated by walking the message descriptors, with the new values drawn
  from hypothesis strategies (edge numbers, odd strings, out-of-range enums, emptied, duplicated
  or blown-up repeated fields, switched oneofs, cleared or foreign sub-messages), and messages
  generated from their descriptors alone;
* raw bytes: random bytes, bit flips, truncations, splices, unknown and nested fields, sent as
  they are.

Every OK Solve is checked twice: by EvaluatePlan on the same server, and locally with the
package's checker (``evaluate_allocations``). Requests answered INTERNAL/UNKNOWN, that crashed
the server or that came back with an invalid plan (or a non-finite objective) are saved to
``--failures`` (serialized bytes + JSON) and replay with ``--replay DIR``::

    .venv/bin/python -m scripts.fuzz --requests 1000 --seed 1
    .venv/bin/python -m scripts.fuzz --replay fuzz-failures
"""

from __future__ import annotations

import argparse
import contextlib
import shlex
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from scripts.fuzz.constants import ROOT
from scripts.fuzz.run import replay, run


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m scripts.fuzz",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    p.add_argument("--requests", type=int, default=100_000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=6, help="client threads (6)")
    p.add_argument("--raw-share", type=float, default=0.3, help="share of raw-bytes requests")
    p.add_argument("--failures", default="fuzz-failures", help="where failing requests go")
    p.add_argument("--replay", metavar="DIR", help="send the requests saved in DIR again")
    p.add_argument("--max-concurrent-solves", type=int, default=16)
    p.add_argument("--max-time-budget-seconds", type=float, default=1.0)
    p.add_argument("--timeout", type=float, default=60.0, help="RPC deadline in seconds (60)")
    p.add_argument("--server-log-level", default="WARNING")
    p.add_argument("--max-minutes", type=float, default=0.0, help="stop after this long (0: never)")
    p.add_argument("--progress-seconds", type=float, default=30.0)
    return p.parse_args(argv)


@contextlib.contextmanager
def _on_path(path: Path) -> Iterator[None]:
    sys.path.insert(0, str(path))
    try:
        yield
    finally:
        sys.path.remove(str(path))


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    command = shlex.join([".venv/bin/python", "-m", "scripts.fuzz", *sys.argv[1:]])
    with _on_path(ROOT):
        if args.replay:
            return replay(args)
        return run(args, command)
