"""Files written whole or not at all (solver.files): a failed writer leaves the old file and no
temporary; a process killed mid-write leaves the old file whole."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import IO

import pytest

from solver.files import write_atomic, write_text


def test_a_failed_writer_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "x.csv"
    write_text(target, "old\n")

    def broken(f: IO[bytes]) -> None:
        f.write(b"half")
        raise RuntimeError("writer failed")

    with pytest.raises(RuntimeError):
        write_atomic(target, broken)
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.csv"]


def test_a_process_killed_mid_write_leaves_the_old_file_whole(tmp_path: Path) -> None:
    """SIGKILL while the new text is half written: the target still reads as before (a plain
    open-and-write would have left it cut)."""
    target = tmp_path / "plan.json"
    write_text(target, '{"old": true}\n')
    code = (
        "import os, signal, sys\n"
        "from solver.files import write_atomic\n"
        "def half(f):\n"
        "    f.write(b'{\"new\": ')\n"
        "    f.flush()\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        f"write_atomic({str(target)!r}, half)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], timeout=60, capture_output=True)
    assert done.returncode == -9
    assert target.read_text() == '{"old": true}\n'
