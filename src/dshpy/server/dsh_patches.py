"""What ``dshpy-runtime`` takes from the dsh profile patches the official SDK passes (``patches=``).

dsh's SDK launches its runtime as ``<bin> --profile sdk --patch FILE…``; a patch file
is a cordis patch list (YAML) whose entries replace the ``config`` of a profile row
whole. The row that matters to a session store is ``session-persistence-jsonl``:
``{root, compression: zstd|none}`` (dsh-v4 §2.3). dshpy-runtime reads that row, so
an SDK user who points dsh at a session root gets dshpy serving the same root, in
the same layout and encoding, instead of a store somewhere else. Other rows
configure dsh's own plugins and are reported as ignored.

The files are read as JSON when they are JSON, else as the block YAML these patch
lists are written in (sequences of mappings, nested mappings, plain and quoted
scalars, comments). Anything outside that — anchors, tags such as ``!!js``, flow
mappings that are not JSON — is refused with the file and line, never guessed at.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dshpy.errors import ConfigError

__all__ = ["JSONL_ROW", "PatchError", "PatchedStore", "read_patch_list", "store_from_patches"]

JSONL_ROW = "session-persistence-jsonl"


class PatchError(ConfigError):
    """A dsh patch file cannot be read, or configures the session store in a way dshpy cannot follow."""


@dataclass(frozen=True, slots=True)
class PatchedStore:
    """The store the patches name (``url``), and the rows dshpy left to dsh (``ignored``: file, entry id)."""

    url: str | None
    ignored: tuple[tuple[str, str], ...]


_INT = re.compile(r"[-+]?[0-9]+")
_FLOAT = re.compile(r"[-+]?([0-9]+\.[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?|[-+]?[0-9]+[eE][-+]?[0-9]+")


class _Lines:
    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.items: list[tuple[int, int, str]] = []  # (line number, indent, content)
        for number, raw in enumerate(text.splitlines(), start=1):
            content = _strip_comment(raw).rstrip()
            if content.strip() and content.strip() not in ("---", "..."):
                self.items.append((number, len(content) - len(content.lstrip(" ")), content.strip()))
        self.position = 0

    def error(self, number: int, detail: str) -> PatchError:
        return PatchError(f"cannot read dsh patch {self.path} line {number}: {detail}")


def _strip_comment(line: str) -> str:
    quote: str | None = None
    for index, char in enumerate(line):
        if quote is not None:
            if char == quote:
                quote = None
        elif char in "\"'":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1] in " \t"):
            return line[:index]
    return line


def _scalar(text: str, lines: _Lines, number: int) -> Any:
    if text.startswith(("!", "&", "*")) or text in ("|", ">"):
        raise lines.error(number, f"{text.split(maxsplit=1)[0]!r} (tags, anchors and block scalars) is not supported")
    if text.startswith('"'):
        try:
            return json.loads(text)
        except ValueError:
            raise lines.error(number, f"unterminated or invalid double-quoted string {text!r}") from None
    if text.startswith("'"):
        if len(text) < 2 or not text.endswith("'"):
            raise lines.error(number, f"unterminated single-quoted string {text!r}")
        return text[1:-1].replace("''", "'")
    if text[0] in "[{":
        try:
            return json.loads(text)
        except ValueError:
            raise lines.error(number, "flow collections must be JSON") from None
    if text in ("null", "Null", "NULL", "~"):
        return None
    if text in ("true", "True", "TRUE"):
        return True
    if text in ("false", "False", "FALSE"):
        return False
    if _INT.fullmatch(text):
        return int(text)
    if _FLOAT.fullmatch(text):
        return float(text)
    return text


def _key_value(text: str, lines: _Lines, number: int) -> tuple[str, str] | None:
    """``key: value`` (value may be empty); ``None`` when the text is not a mapping entry."""
    if text.startswith(('"', "'")):
        quote = text[0]
        end = text.find(quote, 1)
        if end < 0 or not text[end + 1 :].startswith(":"):
            return None
        key = _scalar(text[: end + 1], lines, number)
        return str(key), text[end + 2 :].strip()
    match = re.match(r"([^:]+?):(?:\s+(.*)|$)", text)
    if match is None:
        return None
    return match.group(1).strip(), (match.group(2) or "").strip()


def _block(lines: _Lines, indent: int) -> Any:
    number, at, text = lines.items[lines.position]
    if at != indent:
        raise lines.error(number, f"unexpected indentation {at} (expected {indent})")
    if text == "-" or text.startswith("- "):
        return _sequence(lines, indent)
    return _mapping(lines, indent)


def _sequence(lines: _Lines, indent: int) -> list[Any]:
    items: list[Any] = []
    while lines.position < len(lines.items):
        number, at, text = lines.items[lines.position]
        if at < indent:
            break
        if at != indent or not (text == "-" or text.startswith("- ")):
            raise lines.error(number, "expected a '- ' list item")
        rest = text[1:].strip()
        if not rest:
            lines.position += 1
            items.append(_nested(lines, indent, number))
            continue
        inner = indent + (len(text) - len(rest))
        if _key_value(rest, lines, number) is not None:
            lines.items[lines.position] = (number, inner, rest)  # the item's first key starts its mapping
            items.append(_mapping(lines, inner))
        else:
            lines.position += 1
            items.append(_scalar(rest, lines, number))
    return items


def _mapping(lines: _Lines, indent: int) -> dict[str, Any]:
    mapping: dict[str, Any] = {}
    while lines.position < len(lines.items):
        number, at, text = lines.items[lines.position]
        if at < indent:
            break
        if at != indent:
            raise lines.error(number, f"unexpected indentation {at} (expected {indent})")
        entry = _key_value(text, lines, number)
        if entry is None:
            raise lines.error(number, f"expected 'key: value', got {text!r}")
        key, value = entry
        lines.position += 1
        mapping[key] = _scalar(value, lines, number) if value else _nested(lines, indent, number)
    return mapping


def _nested(lines: _Lines, indent: int, number: int) -> Any:
    if lines.position >= len(lines.items):
        return None
    _, at, text = lines.items[lines.position]
    if at > indent or (at == indent and (text == "-" or text.startswith("- "))):
        return _block(lines, at)
    return None


def read_patch_list(path: Path) -> list[dict[str, Any]]:
    """The entries of one patch file (a list of mappings)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise PatchError(f"cannot read dsh patch {path}: {error.strerror or error}") from None
    try:
        document: Any = json.loads(text)
    except ValueError:
        lines = _Lines(path, text)
        document = _block(lines, lines.items[0][1]) if lines.items else []
        if lines.position < len(lines.items):
            raise lines.error(lines.items[lines.position][0], "unexpected content after the patch list") from None
    if not isinstance(document, list) or not all(isinstance(entry, dict) for entry in document):
        raise PatchError(f"dsh patch {path} must be a list of entries")
    return document


def _jsonl_url(config: Any, path: Path) -> str:
    if not isinstance(config, dict) or not isinstance(config.get("root"), str) or not config["root"]:
        raise PatchError(f"dsh patch {path}: the {JSONL_ROW} config needs a root (a patch replaces the config whole)")
    compression = config.get("compression")
    if compression is None:
        compression = "zstd"
    if compression not in ("zstd", "none"):
        raise PatchError(f"dsh patch {path}: {JSONL_ROW} compression must be zstd or none, not {compression!r}")
    root = os.path.abspath(os.path.expanduser(config["root"]))
    return f"jsonl:///{root}?compression={compression}"


def store_from_patches(paths: Iterable[str | os.PathLike[str]]) -> PatchedStore:
    """The store the patches give dsh's JSONL persistence row (applied in order, the last one wins)."""
    url: str | None = None
    ignored: list[tuple[str, str]] = []
    for raw_path in paths:
        path = Path(raw_path)
        for entry in read_patch_list(path):
            entry_id = entry.get("id")
            if entry_id != JSONL_ROW or "insert" in entry:
                ignored.append((str(path), str(entry_id if entry_id is not None else "(insert)")))
                continue
            if entry.get("disabled") not in (None, False):
                raise PatchError(f"dsh patch {path} disables {JSONL_ROW}: dshpy-runtime always stores its sessions")
            if "config" in entry:
                url = _jsonl_url(entry["config"], path)
    return PatchedStore(url, tuple(ignored))
