"""dsh's official SDK with ``patches=`` naming a dsh session root: ``dshpy-runtime`` serves that root.

A dsh user's patch (the JSONL persistence row: root and compression) is what decides
where their sessions live. With it, the SDK driving ``dshpy-runtime`` resumes an old
(v0, rc.8) session from that root, continues it in the v4 file written beside the old
one, and starts new sessions there too, instead of in a store of dshpy's own.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from sdk_support import dshpy_runtime as _runtime

import dshpy
from dshpy.testing.fake_model import FakeModelServer, Reply

deepseek_harness = pytest.importorskip("deepseek_harness")

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning")

PARENT = "96cf59c9-b347-48b9-b234-a5200913ad05"


def test_patched_root_is_served_and_old_sessions_continue_in_v4(
    tmp_path: Path, dsh_old_root: Callable[..., Path]
) -> None:
    root = dsh_old_root("subagent-fork", "zstd")
    patch = tmp_path / "root.patch.yml"
    patch.write_text(f'- id: session-persistence-jsonl\n  config:\n    root: "{root}"\n    compression: zstd\n')
    home = tmp_path / "dsh-home"
    # the fixture sessions were recorded in this working directory, and the runtime is started in it
    Path("/tmp/dshpy-old-fixtures/workspace").mkdir(parents=True, exist_ok=True)
    with FakeModelServer([Reply.text("MARMALADE, still."), Reply.text("hello")]) as model:
        options = {
            "dsh_bin": _runtime(),
            "dsh_home": str(home),
            "base_url": model.base_url,
            "api_key": "fake",
            "cwd": "/tmp/dshpy-old-fixtures/workspace",
            "patches": (str(patch),),
            "env": {"DSHPY_STORE": ""},
        }
        with deepseek_harness.DeepSeekHarness(**options) as harness:
            resumed = harness.resume_session(PARENT)
            assert resumed.run("What was the codeword?").final_response == "MARMALADE, still."
            fresh = harness.start_session()
            assert fresh.run("hi").final_response == "hello"
            fresh_id = fresh.id
        assert "MARMALADE" in str(model.requests[0]["messages"])
    (session_dir,) = root.glob(f"*/{PARENT}")
    assert (session_dir / "session.jsonl.zstd").exists() and (session_dir / "session.v4.jsonl.zstd").exists()
    store = dshpy.open_store(f"jsonl:///{root}?compression=zstd")
    assert store.stat(PARENT).stored_version == 4 and store.stat(fresh_id).stored_version == 4
    assert not (home / "dshpy" / "sessions.db").exists()  # nothing landed in a store of dshpy's own
