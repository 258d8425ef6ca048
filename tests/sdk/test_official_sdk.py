"""dsh's official Python SDK (``deepseek-harness-sdk`` 0.2.1rc2) driving ``dshpy-runtime``."""

from __future__ import annotations

from pathlib import Path

import pytest
from sdk_support import dshpy_runtime as _runtime

from dshpy.testing.fake_model import FakeModelServer, Reply

deepseek_harness = pytest.importorskip("deepseek_harness")
pytest.importorskip("deepseek_harness.errors")

# The official client never closes its child's stdout/stderr pipes (its close() only reaps the process).
pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning")


def test_run_twice_resume_and_working_directory(tmp_path: Path) -> None:
    replies = [Reply.text("first answer"), Reply.text("second answer"), Reply.length("cut")]
    with FakeModelServer(replies) as model:
        options = {
            "dsh_bin": _runtime(),
            "dsh_home": str(tmp_path / "dsh-home"),
            "base_url": model.base_url,
            "api_key": "fake",
            "cwd": str(tmp_path),
            "env": {"DSHPY_STORE": ""},
        }
        with deepseek_harness.DeepSeekHarness(**options) as harness:
            session = harness.start_session()
            first = session.run("hello")
            assert first.final_response == "first answer" and first.finish_reason == "completed"
            second = session.run([{"type": "text", "text": "more"}])
            assert second.final_response == "second answer" and second.finish_reason == "completed"
            assert session.get_working_directory() == str(tmp_path)
            (tmp_path / "sub").mkdir()
            assert session.set_working_directory("sub") == str(tmp_path / "sub")
            session_id = session.id
        with deepseek_harness.DeepSeekHarness(**options) as harness:
            resumed = harness.resume_session(session_id)
            third = resumed.run("and now?")
            assert third.final_response == "cut" and third.finish_reason == "max-tokens"
            with pytest.raises(deepseek_harness.errors.JsonRpcError):
                harness.resume_session("session-does-not-exist")
        shown = model.requests[2]["messages"]  # the SDK's provider, deepseek-official, is the Messages API
        assert [m["content"][0]["text"] for m in shown if m["role"] == "user"][:2] == ["hello", "more"]
