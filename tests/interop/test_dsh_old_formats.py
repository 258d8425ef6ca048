"""dsh's upgrade chain v0→v4, edge by edge and whole, against what dsh 0.2.1rc2 itself produces.

The fixtures (``tests/fixtures/dsh_old``, see its README) hold logs rc.8 wrote, the
v1–v3 logs derived from them, the v4 log dsh stages for each, and small handwritten
cases with dsh's verdict on each. Every comparison here is against dsh's output:
the events of each edge with their key order, the upgraded file byte for byte, the
refusal word for word. Every upgraded log must also pass dshpy's own v4 checks.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dshpy import Session, SessionHeader, decode_event, validate
from dshpy.core.json import dumps, loads
from dshpy.log.formats import MigrationRefusedError, child_source, dsh_chain, unavailable_child
from dshpy.log.formats.chain import MigrationChain
from dshpy.log.formats.physical import decode_row, decode_rows, expand_packed, is_packed

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "dsh_old"
ROOTS = FIXTURES / "roots"
CASES = FIXTURES / "cases"
SESSIONS = sorted(path for path in ROOTS.glob("*/*/*") if path.is_dir())


def _read(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    lines = [line for line in path.read_bytes().split(b"\n") if line]
    return loads(lines[0]), [loads(line) for line in lines[1:]]


def _generation(directory: Path, version: int) -> Path:
    return directory / ("session.jsonl" if version == 0 else f"session.v{version}.jsonl")


def _children(directory: Path) -> list[dict[str, Any]]:
    """Catalog evidence for the session in ``directory`` from its family's subagent children, read as dsh reads them."""
    header, _ = _read(_generation(directory, 0))
    found = []
    for other in sorted(directory.parent.parent.glob("*/*")):
        child, rows = _read(_generation(other, 0))
        if child.get("parentSession") != header["id"] or child.get("origin") != "subagent":
            continue
        try:
            historical = MigrationChain(3, dsh_chain().plan(0)[:3])
            migrated, stream = historical.upgrade(child, rows)
            events = list(stream)
            markers = [
                e["seq"] for e in events if e["type"] == "session/end-seed" and e["data"].get("inherited") is True
            ]
            found.append(child_source(migrated, events, markers[-1] if markers else 0))
        except MigrationRefusedError:
            found.append(unavailable_child(child["id"], child["createdAt"]))
    return found


def _logical(events: list[dict[str, Any]], version: int) -> list[list[tuple[str, Any]]]:
    """Events as ordered key/value lists (key order is part of the format), packed rows expanded."""
    out = []
    for index, raw in enumerate(events):
        record = decode_row(raw, version, index) if version < 4 else raw
        for event in expand_packed(record) if is_packed(record) else [record]:
            out.append(list(json.loads(dumps(event)).items()))
    return out


def _refusal(directory: Path) -> str | None:
    path = directory / "refusal.txt"
    return path.read_text().strip() if path.exists() else None


@pytest.mark.parametrize("directory", SESSIONS, ids=lambda p: f"{p.parent.parent.name}/{p.name[:8]}")
@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_each_edge_matches_dsh_on_rc8_logs(directory: Path, version: int) -> None:
    source = _generation(directory, version)
    if not source.exists():
        pytest.skip(f"dsh refused an earlier edge: {_refusal(directory)}")
    header, stored = _read(source)
    rows = list(decode_rows(stored, version))  # what a store hands the edge
    edge = dsh_chain(_children(directory)).plan(version)[0]
    target = _generation(directory, version + 1)
    if not target.exists():
        refusal = _refusal(directory)
        assert refusal is not None and refusal.startswith(f"v{version}: ")
        with pytest.raises(MigrationRefusedError) as refused:
            list(edge.stream(rows, header, edge.header(header)))
        assert str(refused.value) == refusal.removeprefix(f"v{version}: ")
        return
    migrated_header = edge.header(header)
    produced = list(edge.stream(rows, header, migrated_header))
    if version == 3:
        written = b"".join(dumps(line) + b"\n" for line in [migrated_header, *produced])
        assert written == target.read_bytes()
        return
    expected_header, expected = _read(target)
    assert migrated_header == expected_header
    assert _logical(produced, version + 1) == _logical(expected, version + 1)


@pytest.mark.parametrize("directory", SESSIONS, ids=lambda p: f"{p.parent.parent.name}/{p.name[:8]}")
def test_whole_chain_from_every_generation_is_byte_identical_and_valid(directory: Path) -> None:
    expected_path = directory / "session.v4.jsonl"
    if not expected_path.exists():
        header, rows = _read(_generation(directory, 0))
        with pytest.raises(MigrationRefusedError) as refused:
            list(dsh_chain(_children(directory)).upgrade(header, rows)[1])
        assert str(refused.value) == _refusal(directory).split(": ", 1)[1]  # type: ignore[union-attr]
        return
    expected = expected_path.read_bytes()
    chain = dsh_chain(_children(directory))
    for version in range(4):
        header, rows = _read(_generation(directory, version))
        migrated, events = chain.upgrade(header, rows)
        assert b"".join(dumps(line) + b"\n" for line in [migrated, *events]) == expected, f"from v{version}"
    lines = [loads(line) for line in expected.split(b"\n") if line]
    upgraded = [decode_event(line) for line in lines[1:]]
    validate(upgraded)
    Session(SessionHeader.from_record(lines[0]), upgraded)


CASE_DIRS = sorted(path for path in CASES.iterdir() if path.is_dir())


@pytest.mark.parametrize("directory", CASE_DIRS, ids=lambda p: p.name)
def test_each_case_gets_dshs_verdict(directory: Path) -> None:
    (source,) = directory.glob("input.v*.jsonl")
    version = int(source.name.split(".v")[1].split(".")[0])
    header, stored = _read(source)
    rows = list(decode_rows(stored, version))
    children_path = directory / "children.json"
    children = json.loads(children_path.read_text()) if children_path.exists() else []
    edge = dsh_chain(children).plan(version)[0]
    refusal = _refusal(directory)
    if refusal is not None:
        with pytest.raises(MigrationRefusedError) as refused:
            list(edge.stream(rows, header, edge.header(header)))
        assert str(refused.value) == refusal
        return
    expected = json.loads((directory / "expected.json").read_text())
    migrated = edge.header(header)
    produced = list(edge.stream(rows, header, migrated))
    logical_header = {key: value for key, value in migrated.items() if key not in ("type", "seedLength")}
    if version <= 1 and "isSeeded" not in logical_header:
        position = list(expected["header"]).index("isSeeded")
        items = list(logical_header.items())
        items.insert(position, ("isSeeded", "seedLength" in migrated))
        logical_header = dict(items)
    assert list(logical_header.items()) == list(expected["header"].items())
    assert _logical(produced, version + 1) == [list(event.items()) for event in expected["events"]]
    cut = migrated.get("seedLength", 0) if version == 0 else _cut(produced)
    assert cut == expected["inheritedEventCount"]


def _cut(events: list[dict[str, Any]]) -> int:
    markers = [e["seq"] for e in events if e["type"] == "session/end-seed" and e["data"].get("inherited") is True]
    return markers[-1] if markers else 0


def test_cases_cover_every_edge_and_both_verdicts() -> None:
    verdicts = {(d.name[:2], (d / "refusal.txt").exists()) for d in CASE_DIRS}
    assert verdicts == {(f"v{n}", refused) for n in range(4) for refused in (False, True)}
