"""Where dsh v4 keeps a session on disk: project keys, session directory names, generation filenames.

The layout is ``<root>/<project>/<segment>/session.v4.jsonl[.zstd]`` (dsh-v4 §2.3),
with ``<project>`` = :func:`project_key` of the session's cwd (``_no-cwd`` without
one) and ``<segment>`` = :func:`encode_segment` of its id. Both encoders work on
UTF-16 code units, exactly as dsh's JavaScript does, so a cwd outside the Basic
Multilingual Plane lands in the same directory either way. Beside the log a session
directory holds ``session.lock``, older generations, temporaries (``*.tmp``) and torn
tails set aside (``<log>.torn-<UTC time>``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from dshpy.core.ids import check_session_id
from dshpy.errors import InvalidSessionIdError

__all__ = [
    "LOCK_FILENAME",
    "NO_CWD_PROJECT",
    "TORN_SUFFIX",
    "Location",
    "decode_segment",
    "encode_segment",
    "generation_filename",
    "log_path",
    "parse_generation_filename",
    "project_dir_name",
    "project_key",
    "session_segment",
]

LOCK_FILENAME = "session.lock"
NO_CWD_PROJECT = "_no-cwd"
TORN_SUFFIX = ".torn-"
_PROJECT_KEY_LIMIT = 251
_SAFE_UNITS = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
_SEPARATOR_UNITS = frozenset(b"/\\:")
_GENERATION = re.compile(r"session(?:\.v([1-9][0-9]*))?\.jsonl")
_ESCAPE = re.compile(r"~([0-9A-F]{4})")
_ALL_SAFE = re.compile(r"[A-Za-z0-9._-]+")
"""Text that no escaping changes (listing a root decodes and re-encodes every directory name: most are this)."""
_PLAIN_PATH = re.compile(r"[A-Za-z0-9._\-/\\:]+")
_SEPARATOR_RUN = re.compile(r"[/\\:]+")
_NAME_MAX = 255  # bytes in one directory entry name on the filesystems dsh and dshpy run on


def _code_units(text: str) -> list[int]:
    raw = text.encode("utf-16-le", "surrogatepass")
    return [int.from_bytes(raw[i : i + 2], "little") for i in range(0, len(raw), 2)]


def _escape(unit: int) -> str:
    return f"~{unit:04X}"


def encode_segment(raw: str) -> str:
    """One safe, injective path segment for ``raw`` (dsh's ``encodeSegment``).

    ``A-Z a-z 0-9 . _ -`` stay literal, every other UTF-16 code unit (``~`` included)
    becomes ``~XXXX``; ``.`` and ``..`` are escaped whole so no segment can climb.
    """
    if not raw:
        raise ValueError("cannot encode an empty path segment")
    if raw == ".":
        return "~002E"
    if raw == "..":
        return "~002E~002E"
    if _ALL_SAFE.fullmatch(raw):
        return raw
    return "".join(chr(unit) if unit in _SAFE_UNITS else _escape(unit) for unit in _code_units(raw))


def decode_segment(segment: str) -> str | None:
    """The string :func:`encode_segment` maps to ``segment``, or ``None`` if no string does."""
    if segment not in (".", "..") and _ALL_SAFE.fullmatch(segment):
        return segment  # nothing escaped, and encoding it changes nothing
    units: list[int] = []
    i = 0
    while i < len(segment):
        if segment[i] == "~":
            match = _ESCAPE.match(segment, i)
            if match is None:
                return None
            units.append(int(match.group(1), 16))
            i = match.end()
        else:
            units.append(ord(segment[i]))
            i += 1
    if not units or any(unit > 0xFFFF for unit in units):
        return None
    decoded = b"".join(unit.to_bytes(2, "little") for unit in units).decode("utf-16-le", "surrogatepass")
    return decoded if encode_segment(decoded) == segment else None


def session_segment(session_id: str) -> str:
    """The directory name of a session: its checked id, escaped (dsh's layout).

    Escaping multiplies an id's length by up to five, so a long id in another script
    can exceed what a file name may hold; that id is refused here, by name, rather
    than failing later as an ``OSError``.
    """
    segment = encode_segment(check_session_id(session_id))
    if len(segment) > _NAME_MAX:
        raise InvalidSessionIdError(
            f"session id {session_id[:40]!r} is too long for a JSONL session directory: escaped it takes "
            f"{len(segment)} characters, at most {_NAME_MAX} fit in a file name"
        )
    return segment


def project_key(cwd: str) -> str:
    """dsh's readable project directory name for ``cwd``: ``--<slug>--``.

    Runs of ``/``, ``\\`` and ``:`` become one ``-``, unsafe code units ``~XXXX``,
    leading dashes are dropped (an empty slug is ``root``) and the slug is cut at
    251 characters, so distinct cwds may share a project directory (by design).
    """
    if not cwd:
        raise ValueError("cannot encode an empty project path")
    if _PLAIN_PATH.fullmatch(cwd):  # nothing to escape: only the separator runs change
        slug = _SEPARATOR_RUN.sub("-", cwd).lstrip("-") or "root"
        return f"--{slug[:_PROJECT_KEY_LIMIT]}--"
    parts: list[str] = []
    in_separator = False
    for unit in _code_units(cwd):
        if unit in _SEPARATOR_UNITS:
            if not in_separator:
                parts.append("-")
            in_separator = True
        else:
            parts.append(chr(unit) if unit in _SAFE_UNITS else _escape(unit))
            in_separator = False
    slug = "".join(parts).lstrip("-") or "root"
    return f"--{slug[:_PROJECT_KEY_LIMIT]}--"


def project_dir_name(cwd: str | None) -> str:
    """The project directory of a session: :func:`project_key` of its cwd, or ``_no-cwd``."""
    return NO_CWD_PROJECT if cwd is None else project_key(cwd)


def _suffix(compressed: bool) -> str:
    return ".zstd" if compressed else ""


def generation_filename(version: int, *, compressed: bool) -> str:
    """``session.jsonl`` for v0, ``session.v<N>.jsonl`` after it, plus ``.zstd`` when compressed."""
    base = "session.jsonl" if version == 0 else f"session.v{version}.jsonl"
    return base + _suffix(compressed)


def parse_generation_filename(name: str, *, compressed: bool) -> int | None:
    """The format version a canonical generation filename names, else ``None``.

    Upper case, leading zeros, an explicit ``.v0`` and temporary names are not canonical.
    """
    suffix = _suffix(compressed)
    if suffix and not name.endswith(suffix):
        return None
    match = _GENERATION.fullmatch(name[: len(name) - len(suffix)])
    if match is None:
        return None
    return int(match.group(1)) if match.group(1) else 0


def log_path(root: Path, cwd: str | None, session_id: str, version: int, *, compressed: bool) -> Path:
    """Where the log of generation ``version`` of the session with this id and cwd belongs under ``root``."""
    filename = generation_filename(version, compressed=compressed)
    return root / project_dir_name(cwd) / session_segment(session_id) / filename


@dataclass(frozen=True, slots=True)
class Location:
    """A session's directory and the generation file that holds its log."""

    session_dir: Path
    path: Path
    version: int
