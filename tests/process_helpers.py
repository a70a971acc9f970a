"""Process checks for tests, kept free of heavy imports: worker processes import the test
modules that use them (to run their functions), and a slow import there slows every call."""

from __future__ import annotations

import time
from pathlib import Path


def alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def gone_within(pid: int, seconds: float) -> bool:
    """Whether process `pid` has ended (or is a zombie) within `seconds`."""
    end = time.monotonic() + seconds
    while alive(pid):
        if time.monotonic() >= end:
            return False
        time.sleep(0.05)
    return True
