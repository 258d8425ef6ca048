"""A ``jsonl:`` root the filesystem will not write to: read-only, or full (issue #11 items 3 and 6).

Root ignores file modes, so a read-only root and a full disk are made for real: a small
``tmpfs`` mounted under ``tmp_path`` (remounted read-only for the first). Without the
privilege to mount (not root, or a container without CAP_SYS_ADMIN) the tests skip,
saying why.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import dshpy
from dshpy.errors import ReadOnlyStoreError, StoreFullError
from dshpy.storage.jsonl import JsonlStore
from dshpy.testing.builders import TurnScript

COMPRESSIONS = ["none", "zstd"]


@pytest.fixture
def mount_point(tmp_path: Path) -> Iterator[Path]:
    """An empty 1 MiB tmpfs of our own, unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs (for a real read-only or full filesystem) needs root")
    if shutil.which("mount") is None:
        pytest.skip("no mount command here")
    where = tmp_path / "mnt"
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m,mode=0755", "tmpfs", str(where)],
        check=False,
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def remount_read_only(where: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(where)], check=True, capture_output=True)


def fill(where: Path) -> Path:
    """Write a filler file until the filesystem is full; return it (delete it to free the space)."""
    filler = where / "filler"
    with open(filler, "wb", buffering=0) as file:
        chunk = b"\0" * 4096
        while True:
            try:
                file.write(chunk)
            except OSError as error:
                if error.errno != errno.ENOSPC:
                    raise
                return filler


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "dshpy", *args]
    return subprocess.run(command, check=False, capture_output=True, text=True, timeout=60)


# -- read-only ---------------------------------------------------------------------------


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_a_read_only_root_reads_and_refuses_writes_with_a_store_error(mount_point: Path, compression: str) -> None:
    store = JsonlStore(mount_point / "root", compression=compression)
    done = store.create(session_id="done", cwd="/w")
    TurnScript(done).turn("finished")
    done.close()
    crashed = store.create(session_id="crashed", cwd="/w")
    TurnScript(crashed).turn("cut short", close=False)
    crashed.flush()
    crashed.close()  # closing never closes a turn: on disk it stays open, as after a crash
    remount_read_only(mount_point)

    store = JsonlStore(mount_point / "root", compression=compression)
    assert {info.id for info in store.list()} == {"done", "crashed"}
    assert len(list(store.read("done"))) == len(done.events)
    assert store.inspect("crashed").open_turn is None  # repaired in memory only
    for write in (
        lambda: store.open("crashed"),
        lambda: store.open("done"),
        lambda: store.create(session_id="new"),
        lambda: store.delete("done"),
        lambda: store.fork("done"),
    ):
        with pytest.raises(ReadOnlyStoreError, match="read-only"):
            write()

    url = f"jsonl:///{mount_point / 'root'}?compression={compression}"
    for command in (("list",), ("show", "done"), ("log", "crashed")):
        result = cli("sessions", *command, "--store", url)
        assert result.returncode == 0, result.stderr
    for command in (("repair", "crashed"), ("pause", "done")):
        result = cli("sessions", *command, "--store", url)
        assert result.returncode == 1, (command, result.stdout, result.stderr)
        assert "Traceback" not in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and "read-only" in result.stderr, result.stderr


# -- disk full ---------------------------------------------------------------------------


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_a_full_disk_refuses_the_batch_whole_and_the_session_appends_after_space_returns(
    mount_point: Path, compression: str
) -> None:
    store = JsonlStore(mount_point / "root", compression=compression)
    session = store.create(session_id="s1", cwd="/w")
    TurnScript(session).turn("before")
    session.flush()
    path = next((mount_point / "root").rglob("session.v4.jsonl*"))
    before = path.read_bytes()
    filler = fill(mount_point)
    for n in range(8):  # ~128 KiB that compresses badly: more than any slack left
        session.append("plugin:dshpy/blob", {"n": n, "blob": os.urandom(8192).hex()})
    with pytest.raises(StoreFullError, match="disk is full"):
        session.flush()
    assert path.read_bytes() == before  # nothing partial left
    assert session.pending_count == 8
    with pytest.raises(StoreFullError, match="disk is full"):
        store.create(session_id="s2", cwd="/w")
    assert [info.id for info in store.list()] == ["s1"]
    assert not list((mount_point / "root").rglob("*.tmp"))

    filler.unlink()  # space returns
    session.flush()
    session.close()
    assert [event.to_wire() for event in store.read("s1")] == [event.to_wire() for event in session.events]
    store.create(session_id="s2", cwd="/w").close()


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_a_torn_tail_is_kept_when_the_disk_is_too_full_to_set_it_aside(mount_point: Path, compression: str) -> None:
    store = JsonlStore(mount_point / "root", compression=compression)
    session = store.create(session_id="s1", cwd="/w")
    TurnScript(session).turn("before")
    session.close()
    path = next((mount_point / "root").rglob("session.v4.jsonl*"))
    committed = path.read_bytes()
    live = store.open("s1")
    for n in range(40):
        live.append("plugin:dshpy/blob", {"n": n, "blob": os.urandom(1024).hex()})
    live.close()
    damaged = path.read_bytes()[: len(committed) + 5000]  # a crash cut the last batch
    path.write_bytes(damaged)
    filler = fill(mount_point)

    live = JsonlStore(mount_point / "root", compression=compression).open("s1")
    live.append("plugin:dshpy/note", {"after": "crash"})
    with pytest.raises(StoreFullError, match="disk is full"):
        live.flush()
    assert path.read_bytes() == damaged  # the torn bytes were not cut before a copy of them was safe
    assert not list(path.parent.glob("*.torn-*"))
    filler.unlink()
    live.close()
    (aside,) = path.parent.glob("*.torn-*")
    assert path.read_bytes().startswith(committed)
    assert damaged.endswith(aside.read_bytes())
    assert [event.to_wire() for event in dshpy.open_store(store.url).read("s1")][-1]["data"] == {"after": "crash"}


def _as_nobody(url: str, report: int) -> None:
    """The forked child: drop to user ``nobody``, read, try to write, report each outcome in one line."""
    os.setgid(65534)
    os.setuid(65534)
    store = dshpy.open_store(url)
    lines = [f"{len(list(store.read('s1')))} {[info.id for info in store.list()]}"]
    for write in (lambda: store.open("s1"), lambda: store.create(session_id="s2", cwd="/w")):
        try:
            write()
        except ReadOnlyStoreError as error:
            lines.append(f"refused: {error}")
        except BaseException as error:  # reported, so the parent's assertion shows it
            lines.append(f"unexpected: {error!r}")
    os.write(report, "\n".join(lines).encode())


@pytest.fixture
def world_readable_dir() -> Iterator[Path]:
    """A fresh 0755 directory straight under the temp dir (pytest's own base is private to root)."""
    base = Path(tempfile.mkdtemp(prefix="dshpy-perm-"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base)


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_a_root_another_user_owns_reads_and_refuses_writes(world_readable_dir: Path, compression: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("switching to another user (to be refused by file permissions) needs root")
    root = world_readable_dir / "root"
    store = JsonlStore(root, compression=compression)
    session = store.create(session_id="s1", cwd="/w")
    TurnScript(session).turn("mine")
    session.close()
    for directory in (root, *(p for p in root.rglob("*") if p.is_dir())):
        directory.chmod(0o755)  # others may enter and list, not write
    for file in (p for p in root.rglob("*") if p.is_file()):
        file.chmod(0o644)
    url = f"jsonl:///{root}?compression={compression}"
    list(dshpy.open_store(url).read("s1"))  # every module the child needs is imported before it drops root
    report, report_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(report)
        try:
            _as_nobody(url, report_w)
        finally:
            os._exit(0)
    os.close(report_w)
    with os.fdopen(report) as pipe:
        lines = pipe.read().splitlines()
    os.waitpid(pid, 0)
    assert lines[0] == f"{len(session.events)} ['s1']"
    assert len(lines) == 3 and all(line.startswith("refused:") and "read-only" in line for line in lines[1:]), lines
