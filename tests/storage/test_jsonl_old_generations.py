"""Old dsh generations (v0–v3) in a JSONL root: read as their upgrade, written only when asked (issue #16).

The roots are the rc.8 fixture families (``tests/fixtures/dsh_old``), stored as one
generation at a time, in both encodings. What a reader sees must be exactly the v4
log dsh 0.2.1rc2 stages for that file; reading writes nothing at all; opening for
writing (or ``upgrade()``) stores that v4 log beside the old one, byte for byte
dsh's, and the session continues in it.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable
from pathlib import Path

import pytest

import dshpy
from dshpy.core.json import loads
from dshpy.errors import ConflictError, CorruptSessionError, FormatVersionError, SessionBusyError, StoreError
from dshpy.log.formats import MigrationRefusedError
from dshpy.storage.jsonl import JsonlStore
from dshpy.storage.jsonl import upgrade as upgrade_module
from dshpy.storage.jsonl.locking import SessionLock
from dshpy.storage.jsonl.scan import revision
from dshpy.storage.jsonl.zstd_frames import compress_frame, decompress_frame, scan_frames
from dshpy.testing.builders import TurnScript

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "dsh_old" / "roots"
UPGRADABLE = ["packed-chunks", "compaction", "subagent-fork", "toolchain", "retry", "code-mode"]
PARENT = "96cf59c9-b347-48b9-b234-a5200913ad05"
CHILD = "ada8966c-9fa3-441b-8721-37ff1e795e6a"


@pytest.fixture(params=["none", "zstd"])
def compression(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _expected(family: str, session_id: str) -> bytes:
    (path,) = FIXTURES.glob(f"{family}/*/{session_id}/session.v4.jsonl")
    return path.read_bytes()


def _expected_events(family: str, session_id: str) -> list[dict[str, object]]:
    lines = [loads(line) for line in _expected(family, session_id).split(b"\n") if line]
    return [dshpy.decode_event(line).to_wire() for line in lines[1:]]


def _plain(data: bytes, compression: str) -> bytes:
    if compression == "none":
        return data
    return b"".join(decompress_frame(data[start:end]) for start, end in scan_frames(data).frames)


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``root`` with its size and mtime (reading must change none of it)."""
    return {
        str(path.relative_to(root)): (path.stat().st_size, path.stat().st_mtime_ns)
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def _store(root: Path, compression: str) -> JsonlStore:
    store = dshpy.open_store(f"jsonl:///{root}?compression={compression}")
    assert isinstance(store, JsonlStore)
    return store


@pytest.mark.parametrize("version", [0, 1, 2, 3])
@pytest.mark.parametrize("family", UPGRADABLE)
def test_reading_an_old_generation_gives_dshs_upgrade_and_writes_nothing(
    dsh_old_root: Callable[..., Path], family: str, version: int, compression: str
) -> None:
    root = dsh_old_root(family, compression, version)
    before = _tree(root)
    store = _store(root, compression)
    infos = store.list()
    assert infos and all(
        info.stored_version == version and info.format_status == "migration-required" for info in infos
    )
    for info in infos:
        expected = _expected_events(family, info.id)
        assert [event.to_wire() for event in store.read(info.id)] == expected
        assert info.event_count == len(expected)
        assert info.header.version == dshpy.FORMAT_VERSION
        view = store.inspect(info.id)
        assert [event.to_wire() for event in view.events] == expected
        dshpy.validate(view.events)
        store.projections(info.id)
        assert store.stat(info.id).stored_version == version
        assert info.to_dict()["formatStatus"] == "migration-required"
    assert _tree(root) == before


@pytest.mark.parametrize("family", UPGRADABLE)
def test_opening_for_writing_stores_dshs_v4_file_beside_the_old_one(
    dsh_old_root: Callable[..., Path], family: str, compression: str
) -> None:
    root = dsh_old_root(family, compression)
    store = _store(root, compression)
    for info in store.list():
        (session_dir,) = root.glob(f"*/{info.id}")
        old = next(session_dir.glob("session.jsonl*"))
        kept = old.read_bytes()
        session = store.open(info.id)
        suffix = ".zstd" if compression == "zstd" else ""
        published = session_dir / f"session.v4.jsonl{suffix}"
        assert _plain(published.read_bytes(), compression) == _expected(family, info.id)
        assert old.read_bytes() == kept
        assert not list(session_dir.glob("*.tmp"))
        assert oct(published.stat().st_mode & 0o777) == "0o600"
        before = len(session.events)
        TurnScript(session).turn("and now in v4")
        session.close()
        reopened = _store(root, compression)
        assert reopened.stat(info.id).stored_version == 4
        events = [event.to_wire() for event in reopened.read(info.id)]
        assert events[:before] == _expected_events(family, info.id)
        assert len(events) > before
        assert old.read_bytes() == kept


def test_upgrade_dry_run_writes_nothing_and_upgrade_is_idempotent(
    dsh_old_root: Callable[..., Path], compression: str
) -> None:
    root = dsh_old_root("subagent-fork", compression, version=2)
    store = _store(root, compression)
    before = _tree(root)
    report = store.upgrade(PARENT, dry_run=True)
    assert (report.from_version, report.written, report.event_count) == (
        2,
        False,
        len(_expected_events("subagent-fork", PARENT)),
    )
    assert report.target.name.startswith("session.v4.jsonl") and not report.target.exists()
    assert _tree(root) == before
    assert sorted(store.old_generations()) == sorted([PARENT, CHILD])
    report = store.upgrade(PARENT)
    assert report.written and report.target.exists() and report.source.exists()
    assert _plain(report.target.read_bytes(), compression) == _expected("subagent-fork", PARENT)
    again = store.upgrade(PARENT)
    assert again.current and not again.written and again.from_version == 4
    assert store.old_generations() == [CHILD]


def test_an_old_parents_upgrade_lists_its_children_in_the_catalog(dsh_old_root: Callable[..., Path]) -> None:
    root = dsh_old_root("subagent-fork")
    store = _store(root, "none")
    catalog = [e.data for e in store.read(PARENT) if e.type == "subagent/catalog"]
    assert catalog == [
        {
            "version": 0,
            "childId": CHILD,
            "childCreatedAt": 1783352137161,
            "mode": "one-shot",
            "label": "Recall project codeword",
        }
    ]
    (child_dir,) = root.glob(f"*/{CHILD}")
    for path in child_dir.iterdir():
        path.unlink()
    child_dir.rmdir()
    assert not [e for e in _store(root, "none").read(PARENT) if e.type == "subagent/catalog"]


def test_a_child_dsh_cannot_read_stays_in_the_catalog_as_unknown(
    dsh_old_root: Callable[..., Path], caplog: pytest.LogCaptureFixture
) -> None:
    root = dsh_old_root("subagent-mixed")
    store = _store(root, "none")
    parent = "959ffdf5-03e2-465e-9482-009b704632dc"
    with caplog.at_level(logging.WARNING, logger="dshpy.storage.jsonl"):
        catalog = [e.data for e in store.read(parent) if e.type == "subagent/catalog"]
        assert [fact["mode"] for fact in catalog] == ["unknown", "unknown"]
        assert [info.id for info in store.list()] == [parent]  # the refused children are not listed
    assert "unsupported descriptor version 2" in caplog.text
    assert [e.to_wire() for e in store.read(parent)] == _expected_events("subagent-mixed", parent)


def test_a_refused_old_log_names_the_edge_and_stays_unchanged(
    dsh_old_root: Callable[..., Path], compression: str
) -> None:
    root = dsh_old_root("steering", compression)
    store = _store(root, compression)
    before = _tree(root)
    for call in (
        lambda: list(store.read("steering")),
        lambda: store.inspect("steering"),
        lambda: store.open("steering"),
    ):
        with pytest.raises(MigrationRefusedError) as refused:
            call()
        message = str(refused.value)
        assert message.startswith("format v2 surface before first step cannot acquire a system head")
        assert "; source v0 artifact remains unchanged (raw log: " in message and "steering/session.jsonl" in message
        assert isinstance(refused.value, FormatVersionError)
    assert store.list() == []
    after = {path: stat for path, stat in _tree(root).items() if not path.endswith("session.lock")}
    assert after == before  # only the writer's lock file was created, as dsh's write-open creates it
    assert not list(root.rglob("session.v4*")) and not list(root.rglob("*.tmp"))


def test_old_generation_tails_follow_the_v4_rules(dsh_old_root: Callable[..., Path], compression: str) -> None:
    root = dsh_old_root("retry", compression)
    (path,) = root.glob("*/retry/session.jsonl*")
    whole = _store(root, compression).read("retry")
    expected = [event.to_wire() for event in whole]
    torn = b'{"type":"turn/start","seq":99,"ti'
    path.write_bytes(path.read_bytes() + (torn if compression == "none" else compress_frame(torn)[:-6]))
    assert [e.to_wire() for e in _store(root, compression).read("retry")] == expected  # a torn tail is not a row
    if compression == "none":
        path.write_bytes(path.read_bytes()[: -len(torn)] + b'{"type":"text-chunks","seq0":16}\n')
        with pytest.raises(CorruptSessionError, match=r"invalid committed event at line .*text-chunks row"):
            list(_store(root, compression).read("retry"))


def test_a_source_changed_while_staging_is_not_published(
    dsh_old_root: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = dsh_old_root("retry")
    store = _store(root, "none")
    (source,) = root.glob("*/retry/session.jsonl")

    def touch(step: str) -> None:
        if step == "verified":
            os.utime(source, ns=(1, 1))

    monkeypatch.setattr(upgrade_module, "_checkpoint", touch)
    with pytest.raises(ConflictError, match="changed during migration"):
        store.upgrade("retry")
    assert not list(source.parent.glob("session.v4*")) and not list(source.parent.glob("*.tmp"))


def test_an_existing_target_is_accepted_only_with_the_same_bytes(dsh_old_root: Callable[..., Path]) -> None:
    root = dsh_old_root("retry")
    store = _store(root, "none")
    (source,) = root.glob("*/retry/session.jsonl")
    location = store._locate("retry")
    scan = store._reader.scan("retry", location)
    target = source.with_name("session.v4.jsonl")
    target.write_bytes(b'{"other":1}\n')
    with pytest.raises(StoreError, match=r"already exists.*bytes differ"):
        upgrade_module.publish_upgrade(store._reader, "retry", location, scan, revision(source.stat()))
    target.write_bytes(_expected("retry", "retry"))
    current, fresh = upgrade_module.publish_upgrade(store._reader, "retry", location, scan, revision(source.stat()))
    assert current.path == target and fresh.count == scan.count
    assert not list(source.parent.glob("*.tmp"))


def test_upgrade_waits_for_no_writer(dsh_old_root: Callable[..., Path]) -> None:
    root = dsh_old_root("retry")
    store = _store(root, "none")
    (session_dir,) = root.glob("*/retry")
    lock = SessionLock.try_acquire(session_dir, "busy")
    try:
        with pytest.raises(SessionBusyError):
            store.upgrade("retry")
        assert store.upgrade("retry", dry_run=True).event_count == len(_expected_events("retry", "retry"))
    finally:
        lock.release()


def test_the_other_encoding_is_still_refused_for_old_generations(dsh_old_root: Callable[..., Path]) -> None:
    root = dsh_old_root("retry", "none")
    with pytest.raises(StoreError, match="compression=none"):
        _store(root, "zstd").read("retry")


def test_the_upgraded_file_is_what_dsh_wrote_for_every_family(dsh_old_root: Callable[..., Path]) -> None:
    digests = {}
    for family in UPGRADABLE:
        store = _store(dsh_old_root(family), "none")
        for session_id in store.old_generations():
            report = store.upgrade(session_id)
            digests[session_id] = hashlib.sha256(report.target.read_bytes()).hexdigest()
            assert report.target.read_bytes() == _expected(family, session_id)
    assert len(digests) >= 8
