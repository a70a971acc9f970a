"""Files written whole or not at all: a temporary file beside the target, flushed to disk, then
renamed over it. A reader never sees half a file, and a write that fails or is killed leaves
the old file (or none) and no temporary behind but the one a kill -9 interrupts."""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, Protocol


def write_atomic(path: str | Path, write: Callable[[IO[bytes]], object]) -> Path:
    """Write ``path`` through ``write`` into a temporary file beside it, then rename it over
    ``path``; on any failure the temporary file is removed and ``path`` is left as it was."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def write_text(path: str | Path, text: str) -> Path:
    """``text`` as UTF-8, atomically (``write_atomic``)."""
    return write_atomic(path, lambda f: f.write(text.encode("utf-8")))


class Figure(Protocol):
    """What a matplotlib figure offers here (the package needs matplotlib only for plots)."""

    def savefig(self, fname: Any, **kwargs: Any) -> Any: ...


def write_png(path: str | Path, figure: Figure, **savefig: Any) -> Path:
    """``figure`` as PNG (``savefig``'s options, e.g. ``dpi``), atomically."""
    return write_atomic(path, lambda f: figure.savefig(f, format="png", **savefig))


__all__ = ["Figure", "write_atomic", "write_png", "write_text"]
