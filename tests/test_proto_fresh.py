"""The checked-in gRPC code is what scripts/gen_proto.py makes from proto/ now."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_generated_code_is_fresh(tmp_path: Path) -> None:
    # protoc runs in its own process: its protobuf runtime and OR-Tools' can't share one.
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_proto.py"), "--out", str(tmp_path)],
        check=True,
        capture_output=True,
    )
    checked_in = ROOT / "solver" / "_proto"
    fresh = {p.relative_to(tmp_path): p.read_text() for p in tmp_path.rglob("*") if p.is_file()}
    have = {
        p.relative_to(checked_in): p.read_text()
        for p in checked_in.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert sorted(have) == sorted(fresh), "files differ: run `make proto`"
    stale = [str(k) for k in fresh if fresh[k] != have[k]]
    assert not stale, f"stale generated code {stale}: run `make proto`"
