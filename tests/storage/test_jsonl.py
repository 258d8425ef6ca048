"""The ``jsonl:`` backend on real files: dsh v4 layout, locking, torn tails, corruption.

Everything here writes real session roots under ``tmp_path`` (no mocks); the lock
tests use real child processes, and a failing append is produced by a real file size
limit (``RLIMIT_FSIZE``) in a child process.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson
import pytest

import dshpy
from dshpy.core.events import SessionEvent, encode_event, event_from_parts
from dshpy.errors import (
    ConflictError,
    CorruptSessionError,
    FormatVersionError,
    SessionExistsError,
    StoreError,
)
from dshpy.storage.jsonl import JsonlStore
from dshpy.storage.jsonl.layout import (
    decode_segment,
    encode_segment,
    generation_filename,
    parse_generation_filename,
    project_key,
)
from dshpy.storage.jsonl.zstd_frames import compress_frame, decompress_frame, scan_frames
from dshpy.testing.builders import TurnScript, user_message

COMPRESSIONS = ["none", "zstd"]


@pytest.fixture(params=COMPRESSIONS)
def compression(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "sessions"


@pytest.fixture
def store(root: Path, compression: str) -> JsonlStore:
    opened = dshpy.open_store(f"jsonl:///{root}?compression={compression}")
    assert isinstance(opened, JsonlStore)
    return opened


def log_file(store: JsonlStore, session_id: str, cwd: str | None = None) -> Path:
    project = "_no-cwd" if cwd is None else project_key(cwd)
    name = "session.v4.jsonl.zstd" if store.compression == "zstd" else "session.v4.jsonl"
    return store.root / project / encode_segment(session_id) / name


def frames_of(data: bytes) -> list[bytes]:
    """The plaintext of every complete zstd frame."""
    return [decompress_frame(data[start:end]) for start, end in scan_frames(data).frames]


def plaintext(store: JsonlStore, path: Path) -> bytes:
    data = path.read_bytes()
    return b"".join(frames_of(data)) if store.compression == "zstd" else data


def finished_session(store: JsonlStore, session_id: str = "s1", turns: int = 2) -> dshpy.Session:
    session = store.create(session_id=session_id, cwd="/w")
    for n in range(turns):
        TurnScript(session).turn(f"prompt {n}")
        session.flush()
    session.close()
    return session


def wires(events: Iterable[SessionEvent]) -> list[dict[str, Any]]:
    return [event.to_wire() for event in events]


# -- layout -----------------------------------------------------------------------------


def test_project_key_and_segments_follow_dsh() -> None:
    assert project_key("/srv/app") == "--srv-app--"
    assert project_key("C:\\Users\\me//x::y") == "--C-Users-me-x-y--"
    assert project_key("/") == "--root--"
    assert project_key("/home/ü/a b~c") == "--home-~00FC-a~0020b~007Ec--"
    assert project_key("/😀") == "--~D83D~DE00--"  # UTF-16 code units, like JavaScript
    assert project_key("/" + "a" * 400) == "--" + "a" * 251 + "--"
    assert project_key("-x") == "--x--"  # leading dashes go, whatever made them
    with pytest.raises(ValueError, match="empty"):
        project_key("")
    assert encode_segment("session-1.a_b") == "session-1.a_b"
    assert encode_segment(".") == "~002E" and encode_segment("..") == "~002E~002E"
    assert encode_segment("a/b~") == "a~002Fb~007E"
    for raw in ["session-1", ".", "..", "a/b~", "😀 x", "\udc80"]:
        assert decode_segment(encode_segment(raw)) == raw
    assert decode_segment("a~002fb") is None and decode_segment("~") is None and decode_segment("") is None
    assert generation_filename(0, compressed=True) == "session.jsonl.zstd"
    assert generation_filename(4, compressed=False) == "session.v4.jsonl"
    assert parse_generation_filename("session.v12.jsonl.zstd", compressed=True) == 12
    assert parse_generation_filename("session.jsonl", compressed=False) == 0
    for name in ["session.v0.jsonl", "session.v04.jsonl", "Session.v4.jsonl", "session.v4.jsonl.tmp", "x.jsonl"]:
        assert parse_generation_filename(name, compressed=False) is None
    assert parse_generation_filename("session.v4.jsonl", compressed=True) is None


def _dsh_rule(text: str, *, separators: bool) -> str:
    """dsh's escaping, unit by unit (the reference the encoders' shortcut for plain text must agree with)."""
    raw = text.encode("utf-16-le", "surrogatepass")
    out: list[str] = []
    after_separator = False
    for index in range(0, len(raw), 2):
        unit = int.from_bytes(raw[index : index + 2], "little")
        char = chr(unit)
        if separators and char in "/\\:":
            if not after_separator:
                out.append("-")
            after_separator = True
            continue
        after_separator = False
        out.append(char if char.isascii() and (char.isalnum() or char in "._-") else f"~{unit:04X}")
    return "".join(out)


def test_encoders_shortcut_for_plain_text_agrees_with_the_unit_by_unit_rule() -> None:
    import random

    alphabet = "aZ09._-/\\:~ é😀\n"
    pick = random.Random(7)
    for _ in range(1000):
        text = "".join(pick.choice(alphabet) for _ in range(pick.randint(1, 10)))
        if text not in (".", ".."):
            assert encode_segment(text) == _dsh_rule(text, separators=False), text
            assert decode_segment(encode_segment(text)) == text
        slug = _dsh_rule(text, separators=True).lstrip("-") or "root"
        assert project_key(text) == f"--{slug[:251]}--", text


def test_session_lives_at_dsh_path_with_private_permissions(store: JsonlStore) -> None:
    session = store.create(session_id="abc-1", cwd="/srv/my app")
    path = store.root / "--srv-my~0020app--" / "abc-1" / log_file(store, "abc-1").name
    assert path == log_file(store, "abc-1", "/srv/my app")
    assert path.is_file()
    assert sorted(p.name for p in path.parent.iterdir()) == sorted([path.name, "session.lock"])
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE((path.parent / "session.lock").stat().st_mode) == 0o600
    for directory in (store.root, path.parent, path.parent.parent):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    no_cwd = store.create(session_id="plain")
    assert log_file(store, "plain").parent.parent.name == "_no-cwd"
    session.close()
    no_cwd.close()
    assert (path.parent / "session.lock").stat().st_size == 0  # the lock file stays, empty


def test_header_line_bytes_and_key_order(store: JsonlStore) -> None:
    parent = store.create(session_id="p", cwd="/w", agent_preset="ptc")
    TurnScript(parent).turn()
    parent.close()
    created = parent.header.created_at
    text = plaintext(store, log_file(store, "p", "/w"))
    assert text.split(b"\n", 1)[0] == (
        b'{"type":"session","version":4,"id":"p","createdAt":%d,"cwd":"/w","isSeeded":false,'
        b'"delegationDepth":0,"agentPreset":"ptc"}' % created
    )
    child = store.fork("p", child_id="c")
    child.close()
    header = orjson.loads(plaintext(store, log_file(store, "c", "/w")).split(b"\n", 1)[0])
    assert list(header) == [
        "type",
        "version",
        "id",
        "createdAt",
        "cwd",
        "parentSession",
        "isSeeded",
        "delegationDepth",
        "agentPreset",
    ]
    assert header["parentSession"] == "p" and header["isSeeded"] is True


def test_events_are_compact_lines_with_seq_ranges(store: JsonlStore) -> None:
    session = store.create(session_id="r")
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    seqs = [session.append("user/message", user_message(t), surface_op="append").seq for t in "abc"]
    session.append(
        "user/message",
        user_message("abc"),
        surface_op={"op": "replace", "startSeq": seqs[0], "endSeq": seqs[-1]},
        source_event_seqs=seqs,
    )
    session.close()
    lines = plaintext(store, log_file(store, "r")).split(b"\n")
    assert lines[-1] == b""  # every record ends with \n
    assert lines[1:-1] == [encode_event(event, seq_ranges=True) for event in session.events]
    assert b'"sourceEventSeqs":[[2,4]]' in lines[-2]
    assert b" " not in lines[1]
    assert wires(store.read("r")) == wires(session.events)


def test_zstd_frames_are_header_then_one_checksummed_frame_per_flush(root: Path) -> None:
    store = dshpy.open_store(f"jsonl:///{root}")  # zstd is the default, as in dsh
    assert isinstance(store, JsonlStore) and store.compression == "zstd"
    session = store.create(session_id="z")
    TurnScript(session).turn("one")
    session.flush()
    TurnScript(session).turn("two")
    session.flush()
    session.close()
    data = log_file(store, "z").read_bytes()
    structure = scan_frames(data)
    assert structure.torn_start is None and len(structure.frames) == 3
    for start, _ in structure.frames:
        assert data[start + 4] & 0x04  # content checksum flag
    header, first, second = frames_of(data)
    assert header.count(b"\n") == 1 and header.endswith(b"\n")
    events = list(store.read("z"))
    assert first.count(b"\n") + second.count(b"\n") == len(events)
    assert first.startswith(b'{"type":"') and orjson.loads(first.split(b"\n")[0])["seq"] == 0


def test_store_url_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    relative = dshpy.open_store("jsonl:///rel/root?compression=none")
    assert isinstance(relative, JsonlStore)
    assert relative.root == tmp_path / "rel" / "root"
    assert relative.url == f"jsonl:///{tmp_path}/rel/root?compression=none"
    assert dshpy.open_store(relative.url).url == relative.url
    with pytest.raises(StoreError, match="compression"):
        dshpy.open_store("jsonl:///x?compression=gzip")
    with pytest.raises(StoreError, match="level"):
        dshpy.open_store("jsonl:///x?level=3")
    (tmp_path / "file").write_text("")
    with pytest.raises(StoreError, match="not a directory"):
        dshpy.open_store(f"jsonl:///{tmp_path}/file")


# -- locking -----------------------------------------------------------------------------

_HOLDER = textwrap.dedent(
    """
    import sys
    import dshpy

    session = dshpy.open_store(sys.argv[1]).open(sys.argv[2])
    print("ready", flush=True)
    if sys.stdin.readline().strip() == "close":
        session.close()
        print("closed", flush=True)
        sys.stdin.readline()
    """
)


def _holder(store: JsonlStore, session_id: str) -> subprocess.Popen[str]:
    """A child process that opens the session for writing and waits for orders on stdin."""
    child = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, store.url, session_id],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    return child


def _end(child: subprocess.Popen[str]) -> None:
    child.kill()
    child.communicate()


def test_one_writer_per_session_in_this_process(store: JsonlStore) -> None:
    live = store.create(session_id="w")
    with pytest.raises(ConflictError, match='session "w" is already owned'):
        store.open("w")
    other = dshpy.open_store(store.url)
    with pytest.raises(ConflictError, match='"w"'):
        other.open("w")
    TurnScript(live).turn()
    live.flush()
    events = list(store.read("w"))  # readers never lock
    n = len(events)
    turn = [
        event_from_parts("turn/start", n, 0, {"turn": 2}),
        event_from_parts("turn/end", n + 1, 0, {"turn": 2, "reason": {"kind": "completed"}}),
    ]
    with pytest.raises(ConflictError, match='"w"'):  # a raw append is a writer too
        store.append("w", turn, expected_seq=n)
    with pytest.raises(ConflictError, match='"w"'):
        store.delete("w")
    assert store.inspect("w").events[-1].type == "turn/end"
    live.close()
    again = other.open("w")
    assert wires(again.events) == wires(events)
    again.close()


def test_a_live_writer_notices_its_log_deleted_replaced_or_written_by_someone_else(store: JsonlStore) -> None:
    """The writer keeps its log open between batches; one fstat per batch still catches what reopening did."""

    def live_with_a_flushed_turn(session_id: str) -> tuple[dshpy.Session, Path, bytes]:
        session = store.create(session_id=session_id)
        TurnScript(session).turn()
        session.flush()
        path = log_file(store, session_id)
        return session, path, path.read_bytes()

    deleted, path, _ = live_with_a_flushed_turn("deleted")
    path.unlink()
    TurnScript(deleted).turn("after the delete")
    with pytest.raises(dshpy.SessionNotFound, match='"deleted" was deleted'):
        deleted.flush()
    assert not path.exists()  # nothing written to a file nobody can find
    assert deleted.pending_count > 0  # the events stay pending
    with pytest.raises(dshpy.SessionNotFound):
        deleted.close()  # tries once more, then lets the lock go

    replaced, path, before = live_with_a_flushed_turn("replaced")
    swap = path.with_name("swap")
    swap.write_bytes(before)
    os.replace(swap, path)  # same bytes, same size, another file
    TurnScript(replaced).turn("after the swap")
    with pytest.raises(ConflictError, match="replaced on disk"):
        replaced.flush()
    assert path.read_bytes() == before
    with pytest.raises(ConflictError):
        replaced.close()

    foreign, path, before = live_with_a_flushed_turn("foreign")
    stray = b'{"t' if store.compression == "none" else b"\x28\xb5\x2f"  # what a torn write could leave
    with open(path, "ab") as handle:
        handle.write(stray)
    TurnScript(foreign).turn("after the foreign write")
    with pytest.raises(ConflictError, match="changed on disk"):
        foreign.flush()
    assert path.read_bytes() == before + stray
    with pytest.raises(ConflictError):
        foreign.close()
    reopened = store.open("foreign")  # the lock was let go
    assert len(reopened) == len(foreign) - foreign.pending_count
    reopened.close()


def test_lock_is_held_by_another_process_until_it_closes_or_dies(root: Path) -> None:
    store = _zstd_store(root)  # the lock does not depend on the encoding
    finished_session(store, "x", turns=1)
    holder = _holder(store, "x")
    try:
        with pytest.raises(ConflictError, match='session "x" is already owned'):
            store.open("x")
        assert len(list(store.read("x"))) > 0
        assert holder.stdin is not None and holder.stdout is not None
        holder.stdin.write("close\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == "closed"
        store.open("x").close()  # released on close, although the process lives on
    finally:
        _end(holder)
    crashed = _holder(store, "x")
    try:
        with pytest.raises(ConflictError):
            store.open("x")
        os.kill(crashed.pid, signal.SIGKILL)
        crashed.wait()
        store.open("x").close()  # the kernel dropped the dead holder's lock
    finally:
        _end(crashed)


# -- torn tails and corruption (plain) ----------------------------------------------------


def _plain_store(root: Path) -> JsonlStore:
    store = dshpy.open_store(f"jsonl:///{root}?compression=none")
    assert isinstance(store, JsonlStore)
    return store


def test_truncated_last_line_is_ignored_then_cut_before_the_next_write(root: Path) -> None:
    store = _plain_store(root)
    session = finished_session(store)
    path = log_file(store, "s1", "/w")
    data = path.read_bytes()
    last_start = data.rstrip(b"\n").rfind(b"\n") + 1
    path.write_bytes(data[: last_start + 10])  # the final turn/end is half written
    stored = list(store.read("s1"))
    assert wires(stored) == wires(session.events[:-1])
    reopened = store.open("s1")  # the turn is open again: repair appends its closer
    assert reopened.events[-1].data["reason"] == {"kind": "interrupted"}
    reopened.close()
    repaired = path.read_bytes()
    assert repaired.startswith(data[:last_start])
    assert repaired[last_start:].count(b"\n") == 1 and b"interrupted" in repaired[last_start:]
    assert wires(store.read("s1")) == wires(reopened.events)


def test_a_garbage_tail_of_complete_lines_is_corruption_not_a_torn_tail(root: Path) -> None:
    # dsh drops damaged lines that no committed turn/end follows; a complete line was written
    # whole, though, so dropping it would lose events silently (issue #11): it is corruption.
    store = _plain_store(root)
    session = finished_session(store)
    path = log_file(store, "s1", "/w")
    data = path.read_bytes()
    step = orjson.dumps({"type": "turn/start", "seq": len(session.events), "time": 1, "data": {"turn": 3}})
    damaged = data + b'{"type":"turn/st\n' + step + b"\nmore garbage"
    path.write_bytes(damaged)
    line = data.count(b"\n") + 1
    for call in (lambda: list(store.read("s1")), lambda: store.stat("s1"), lambda: store.open("s1")):
        with pytest.raises(CorruptSessionError, match=rf"unparsable committed event at line {line}\b"):
            call()
    assert store.list() == []  # listed sessions are readable ones (the damaged one is logged)
    assert path.read_bytes() == damaged  # nothing written


def test_damage_before_a_committed_turn_end_is_corruption_naming_the_line(root: Path) -> None:
    store = _plain_store(root)
    finished_session(store)
    path = log_file(store, "s1", "/w")
    lines = path.read_bytes().split(b"\n")
    lines[3] = b"{not json"  # line 4 of the file: event seq 2
    path.write_bytes(b"\n".join(lines))
    for call in (lambda: list(store.read("s1")), lambda: store.open("s1"), lambda: store.inspect("s1")):
        with pytest.raises(CorruptSessionError, match=r"unparsable committed event at line 4\b"):
            call()
    with pytest.raises(CorruptSessionError, match="at line 4"):
        store.stat("s1")


def test_a_bad_byte_inside_a_committed_line_is_corruption(root: Path) -> None:
    store = _plain_store(root)
    finished_session(store)
    path = log_file(store, "s1", "/w")
    data = bytearray(path.read_bytes())
    line_starts = [0, *(i + 1 for i, byte in enumerate(data) if byte == 0x0A)]
    data[line_starts[5] + 3] = 0xFF  # inside '"type"' of line 6: not UTF-8, not JSON
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptSessionError, match=r"line 6\b") as caught:
        store.open("s1")
    assert str(path) in str(caught.value)
    data[line_starts[5] + 3] = ord("x")  # still JSON, but not an event envelope
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptSessionError, match=r"invalid committed event at line 6: .*unexpected key"):
        list(store.read("s1"))


def test_seq_gap_before_a_turn_end_is_corruption(root: Path) -> None:
    store = _plain_store(root)
    finished_session(store)
    path = log_file(store, "s1", "/w")
    lines = path.read_bytes().split(b"\n")
    del lines[4]
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(CorruptSessionError, match=r"line 5: .*seq gap \(expected 3, got 4\)"):
        store.inspect("s1")


# -- torn tails and corruption (zstd) -----------------------------------------------------


def _zstd_store(root: Path) -> JsonlStore:
    store = dshpy.open_store(f"jsonl:///{root}?compression=zstd")
    assert isinstance(store, JsonlStore)
    return store


def test_a_complete_zstd_frame_with_a_bad_checksum_is_corruption(root: Path) -> None:
    store = _zstd_store(root)
    finished_session(store)
    path = log_file(store, "s1", "/w")
    data = bytearray(path.read_bytes())
    _, end = scan_frames(bytes(data)).frames[1]
    data[end - 1] ^= 0xFF  # the last checksum byte of frame 1
    path.write_bytes(bytes(data))
    for call in (lambda: list(store.read("s1")), lambda: store.open("s1")):
        with pytest.raises(CorruptSessionError, match=r"complete zstd frame 1 at byte \d+ fails its checksum"):
            call()


def test_a_complete_zstd_frame_with_a_bad_record_is_corruption(root: Path) -> None:
    store = _zstd_store(root)
    finished_session(store)
    path = log_file(store, "s1", "/w")
    path.write_bytes(path.read_bytes() + compress_frame(b"{not json}\n"))
    with pytest.raises(CorruptSessionError, match=r"unparsable committed event at line \d+ in complete zstd frame 3"):
        store.open("s1")
    cut = frames_of(path.read_bytes())
    path.write_bytes(b"".join(compress_frame(frame) for frame in cut[:-1]) + compress_frame(b'{"type":"turn/en'))
    with pytest.raises(CorruptSessionError, match=r"frame 3 at byte \d+ ends inside a JSONL record"):
        list(store.read("s1"))


def test_a_cut_final_zstd_frame_keeps_its_complete_records(root: Path) -> None:
    store = _zstd_store(root)
    session = finished_session(store, turns=1)
    before = len(session.events)
    live = store.open("s1")
    for n in range(400):  # ~400 KiB of plaintext: one frame of several 128 KiB blocks
        live.append("plugin:dshpy/blob", {"n": n, "blob": os.urandom(512).hex()})
    live.close()
    path = log_file(store, "s1", "/w")
    data = path.read_bytes()
    start, end = scan_frames(data).frames[-1]
    path.write_bytes(data[: start + (end - start) * 2 // 3])  # the crash cut the last frame
    recovered = list(store.read("s1"))
    assert before + 100 < len(recovered) < before + 400
    assert wires(recovered) == wires(live.events[: len(recovered)])
    again = store.open("s1")
    assert len(again.events) == len(recovered)
    assert path.read_bytes() == data[: start + (end - start) * 2 // 3]  # still nothing written
    again.append("plugin:dshpy/blob", {"n": "after"})
    again.close()
    repaired = path.read_bytes()
    assert repaired[:start] == data[:start]  # committed bytes are never rewritten
    new_frames = frames_of(repaired[start:])
    assert scan_frames(repaired).torn_start is None
    assert len(new_frames) == 2  # the recovered records as their own frame, then the new batch
    assert new_frames[0] == b"".join(encode_event(e) + b"\n" for e in recovered[before:])
    assert new_frames[1] == encode_event(again.events[-1]) + b"\n"
    assert wires(store.read("s1")) == wires(again.events)


def test_a_torn_frame_header_or_checksum(root: Path) -> None:
    store = _zstd_store(root)
    session = finished_session(store, turns=2)
    path = log_file(store, "s1", "/w")
    data = path.read_bytes()
    start, end = scan_frames(data).frames[-1]  # the second turn's frame
    first_turn = sum(1 for _ in frames_of(data[:start])[1].splitlines())
    path.write_bytes(data[: end - 2])  # only the checksum is cut: every record survives
    assert wires(store.read("s1")) == wires(session.events)
    path.write_bytes(data[: start + 3])  # cut inside the frame header: nothing survives
    assert wires(store.read("s1")) == wires(session.events[:first_turn])
    live = store.open("s1")  # no open turn, so nothing is written on open
    TurnScript(live).turn("again")
    live.close()
    assert frames_of(path.read_bytes())[:2] == frames_of(data)[:2]
    assert wires(store.read("s1")) == wires(live.events)


# -- identity, versions, generations -------------------------------------------------------


def test_a_header_naming_another_session_is_corruption(store: JsonlStore) -> None:
    finished_session(store, "real", turns=1)
    source = log_file(store, "real", "/w")
    impostor = log_file(store, "other", "/w")
    impostor.parent.mkdir(mode=0o700)
    impostor.write_bytes(source.read_bytes())
    with pytest.raises(CorruptSessionError, match="its header names session 'real'"):
        store.open("other")
    with pytest.raises(CorruptSessionError, match="real"):
        list(store.read("other"))
    assert [info.id for info in store.list()] == ["real"]  # listing skips it (with a warning)
    moved = store.root / "--elsewhere--" / "real"
    moved.mkdir(parents=True)
    source.rename(moved / source.name)
    with pytest.raises(CorruptSessionError, match="header id and cwd belong at"):
        store.inspect("real")


def _write_log(store: JsonlStore, path: Path, header: dict[str, object], *lines: dict[str, object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    records = [orjson.dumps(header) + b"\n", *(orjson.dumps(line) + b"\n" for line in lines)]
    if store.compression == "zstd":
        path.write_bytes(b"".join(compress_frame(record) for record in records))
    else:
        path.write_bytes(b"".join(records))


def test_a_newer_format_is_refused_before_anything_else(store: JsonlStore) -> None:
    future = {"type": "session", "version": 5, "id": "future", "createdAt": 1, "brandNew": {"x": 1}}
    path = log_file(store, "future").with_name(generation_filename(5, compressed=store.compression == "zstd"))
    _write_log(store, path, future, {"anything": "goes"})
    for call in (lambda: store.open("future"), lambda: list(store.read("future")), lambda: store.inspect("future")):
        with pytest.raises(FormatVersionError, match=r"v5, .* newer harness .* upgrade") as caught:
            call()
        assert str(path) in str(caught.value)
    assert store.list() == []


def test_generations_highest_canonical_wins_and_old_ones_are_upgraded_beside_themselves(store: JsonlStore) -> None:
    zstd = store.compression == "zstd"
    old = {"type": "session", "version": 0, "id": "old", "createdAt": 1, "delegationDepth": 0}
    old_path = log_file(store, "old").with_name(generation_filename(0, compressed=zstd))
    _write_log(store, old_path, old)
    stored = old_path.read_bytes()
    assert (
        store.stat("old").stored_version == 0
        and not old_path.with_name(generation_filename(4, compressed=zstd)).exists()
    )
    store.open("old").close()  # a writer publishes the v4 generation first (issue #16)
    assert old_path.read_bytes() == stored
    assert old_path.with_name(generation_filename(4, compressed=zstd)).exists()
    assert store.stat("old").stored_version == 4
    session = store.create(session_id="gen", cwd="/w")
    TurnScript(session).turn()
    session.close()
    current = log_file(store, "gen", "/w")
    _write_log(store, current.with_name(generation_filename(3, compressed=zstd)), {**old, "id": "gen", "version": 3})
    for noise in ("session.v04.jsonl", "SESSION.v4.jsonl", "session.v0.jsonl", "session.v4.jsonl.abc.tmp"):
        (current.parent / (noise + (".zstd" if zstd else ""))).write_bytes(b"junk")
    assert wires(store.read("gen")) == wires(session.events)
    with pytest.raises(SessionExistsError):
        store.create(session_id="old")


def test_the_other_encoding_is_refused_with_a_hint(root: Path) -> None:
    plain = _plain_store(root)
    finished_session(plain, "p", turns=1)
    zstd = _zstd_store(root)
    for call in (lambda: zstd.open("p"), lambda: zstd.exists("p"), zstd.list):
        with pytest.raises(StoreError, match=r'session.v4.jsonl" uses .jsonl.*compression=none'):
            call()


def test_duplicate_ids_across_project_dirs_are_corruption(store: JsonlStore) -> None:
    finished_session(store, "dup", turns=1)
    source = log_file(store, "dup", "/w")
    twin = store.root / "_no-cwd" / "dup"
    twin.mkdir(parents=True)
    (twin / source.name).write_bytes(source.read_bytes())
    for call in (store.list, lambda: store.open("dup"), lambda: store.create(session_id="dup")):
        with pytest.raises(CorruptSessionError, match='duplicate JSONL session id "dup"'):
            call()


def test_flat_legacy_files_are_refused_by_listing(store: JsonlStore) -> None:
    (store.root / "--w--").mkdir(parents=True)
    (store.root / "--w--" / "old.jsonl").write_text("{}\n")
    with pytest.raises(StoreError, match="flat-file layout"):
        store.list()


# -- listing, forks, delete -----------------------------------------------------------------


def test_list_reads_headers_counts_and_forks(store: JsonlStore) -> None:
    parent = finished_session(store, "parent", turns=2)
    child = store.fork("parent", child_id="child")
    TurnScript(child).turn()
    child.close()
    empty = store.create(session_id="empty")
    infos = {info.id: info for info in dshpy.open_store(store.url).list()}
    assert set(infos) == {"parent", "child", "empty"}
    assert infos["parent"].event_count == len(parent.events) and infos["parent"].forks == ("child",)
    assert infos["child"].event_count == len(child.events)
    assert infos["child"].updated_at == child.events[-1].time
    assert infos["empty"].event_count == 0 and infos["empty"].updated_at == empty.header.created_at
    assert store.stat("parent").forks == ("child",)
    child_log = plaintext(store, log_file(store, "child", "/w"))
    parent_log = plaintext(store, log_file(store, "parent", "/w"))
    assert child_log.split(b"\n", 1)[1].startswith(parent_log.split(b"\n", 1)[1])  # the prefix is copied
    store.delete("parent")
    assert not log_file(store, "parent", "/w").parent.exists()
    assert wires(store.read("child")) == wires(child.events)
    empty.close()


# -- a failing write is rolled back -------------------------------------------------------------

_FILL = textwrap.dedent(
    """
    import os, resource, signal, sys
    import dshpy

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    session = dshpy.open_store(sys.argv[1]).open(sys.argv[2])
    size = os.path.getsize(sys.argv[3])
    for n in range(200):
        session.append("plugin:dshpy/blob", {"n": n, "blob": os.urandom(256).hex()})
    resource.setrlimit(resource.RLIMIT_FSIZE, (size + 4096, size + 4096))
    try:
        session.flush()
    except dshpy.StoreError as error:
        print("failed", type(error).__name__, error.__cause__.errno, os.path.getsize(sys.argv[3]) == size)
    """
)


def test_a_failed_append_is_truncated_back(store: JsonlStore) -> None:
    session = finished_session(store, turns=1)
    path = log_file(store, "s1", "/w")
    before = path.read_bytes()
    result = subprocess.run(
        [sys.executable, "-c", _FILL, store.url, "s1", str(path)], capture_output=True, text=True, check=True
    )
    # EFBIG as a store error (it used to leak as a raw OSError), and the partial batch was cut off
    assert result.stdout.split() == ["failed", "StoreFullError", "27", "True"]
    assert path.read_bytes() == before
    assert wires(store.read("s1")) == wires(session.events)
    store.open("s1").close()


# -- real dsh sessions ------------------------------------------------------------------------

DSH_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "dsh" / "sessions"


@pytest.mark.parametrize(("encoding", "mode"), [("zstd", "zstd"), ("plain", "none")])
def test_reads_and_continues_sessions_the_dsh_runtime_wrote(tmp_path: Path, encoding: str, mode: str) -> None:
    source = DSH_FIXTURES / encoding
    if not source.is_dir():
        pytest.skip(f"dsh runtime fixtures are not present at {source} (see tests/fixtures/dsh/README.md)")
    root = tmp_path / encoding
    shutil.copytree(source, root)
    store = dshpy.open_store(f"jsonl:///{root}?compression={mode}")
    assert isinstance(store, JsonlStore)
    infos = store.list()
    assert infos and all(info.cwd is not None for info in infos)
    for info in infos:
        path = log_file(store, info.id, info.cwd)
        before = path.read_bytes()
        lines = plaintext(store, path).split(b"\n")[1:-1]
        events = list(store.read(info.id))
        assert [encode_event(event) for event in events] == lines  # byte for byte, range packing included
        assert info.event_count == len(events)
        session = store.open(info.id)
        assert session.open_turn is None and len(session.events) == len(events)
        session.append("plugin:dshpy/note", {"continued": True})
        session.close()
        after = path.read_bytes()
        assert after.startswith(before)  # dsh's bytes stay as they were; ours follow
        if store.compression == "zstd":
            assert frames_of(after[len(before) :]) == [encode_event(session.events[-1]) + b"\n"]
        assert wires(dshpy.open_store(store.url).read(info.id)) == wires(session.events)
