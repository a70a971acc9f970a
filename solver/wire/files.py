"""A SolveRequest from a file as schedulers write them: protobuf JSON (the instances' form), or
the binary wire format (``SerializeToString``), several times smaller and faster to read for
snapshots of many profile points. The CLI, batches and sweeps read their files here."""

from __future__ import annotations

from pathlib import Path

from google.protobuf.message import DecodeError

from solver.wire import RequestFileError, SolveRequest, decode_text, message_from_json

BINARY_SUFFIXES = (".binpb", ".pb")
"""Names of binary request files (buf's and protoc's), which a batch finds in a directory
beside ``*.json``; a file's bytes, not its name, say how it is read."""


def load_request_file(path: str | Path) -> SolveRequest:
    """The SolveRequest in `path`: protobuf JSON when it is text beginning with ``{`` (a JSON
    object), else the binary wire format (a binary request whose bytes read as such a text is
    read when JSON fails); RequestFileError says what is wrong and where."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise RequestFileError(f"{path}: cannot read: {e}") from e
    if not data.strip():
        raise RequestFileError(f"{path}: empty file (a SolveRequest in protobuf JSON or binary)")
    try:
        text = decode_text(data)
    except UnicodeDecodeError:
        text = ""  # no text: the binary format
    if text.lstrip().startswith("{"):
        try:
            return message_from_json(text, SolveRequest, str(path))
        except RequestFileError:
            binary = _binary(data)
            if binary is None:
                raise
            return binary
    binary = _binary(data)
    if binary is None:
        raise RequestFileError(
            f"{path}: neither protobuf JSON (a text beginning with '{{') nor a binary SolveRequest"
        )
    return binary


def _binary(data: bytes) -> SolveRequest | None:
    """The SolveRequest in the binary wire format, or None if `data` is not one."""
    try:
        return SolveRequest.FromString(data)
    except DecodeError:
        return None


__all__ = ["BINARY_SUFFIXES", "load_request_file"]
