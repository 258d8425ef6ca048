"""dsh's ``/compact``: the ``command/run`` / ``command/done`` pair and dsh's fixed texts, whatever the outcome."""

from __future__ import annotations

import asyncio

import dshpy
from dshpy.agent.compact_command import COMPACT_ERROR_TEXTS, new_command_id, run_compact_command
from dshpy.agent.compaction import AgentCompaction
from dshpy.llm import ChatClient, ModelConfig
from dshpy.log import records
from dshpy.testing.builders import TurnScript
from dshpy.testing.fake_model import FakeModelServer, Reply

SUMMARY = "## Primary Request and Intent\n- read a.txt\n\n## Next Step\n- (none)"


def session_with_turns() -> dshpy.Session:
    session = dshpy.MemoryStore().create()
    script = TurnScript(session)
    for index in range(3):
        script.turn(f"prompt {index}: " + "words to condense " * 20, steps=2, system="S" if not index else None)
    return session


def compact(session: dshpy.Session, server: FakeModelServer, args: str = "") -> tuple[str, str, int | None]:
    async def run() -> tuple[str, str, int | None]:
        config = ModelConfig.from_env(base_url=server.base_url, api_key="k", env={})
        async with ChatClient(config) as client:
            outcome = await run_compact_command(session, AgentCompaction(session, client), args)
        return outcome.kind, outcome.text, outcome.source_event_seq

    return asyncio.run(run())


def new_types(session: dshpy.Session, length: int) -> list[str]:
    return [e.type for e in session.events[length:]]


def test_an_open_bracket_is_dsh_s_busy_text_and_only_the_command_is_logged() -> None:
    session = session_with_turns()
    session.append("compaction/start", records.compaction_bracket_data("other", None))
    length = len(session)
    with FakeModelServer([Reply.text(SUMMARY)]) as server:
        assert compact(session, server) == ("error", COMPACT_ERROR_TEXTS["busy"], None)
        assert server.requests == []
    assert new_types(session, length) == ["command/run", "command/done"]


def test_a_failed_summary_call_is_dsh_s_summary_text() -> None:
    session = session_with_turns()
    length = len(session)
    with FakeModelServer([Reply.server_error(400, "no")]) as server:
        assert compact(session, server) == ("error", COMPACT_ERROR_TEXTS["summary"], None)
    assert new_types(session, length) == ["command/run", "command/done"]
    dshpy.validate(session.events)


def test_a_summary_cut_at_its_cap_is_refused() -> None:
    session = session_with_turns()
    with FakeModelServer([Reply.length(SUMMARY)]) as server:
        assert compact(session, server)[:2] == ("error", COMPACT_ERROR_TEXTS["summary"])


def test_success_cites_the_summary_and_arguments_are_a_usage_error() -> None:
    session = session_with_turns()
    length = len(session)
    with FakeModelServer([Reply.text(SUMMARY)]) as server:
        kind, text, seq = compact(session, server)
        usage = compact(session, server, " please")
    assert kind == "success" and text.startswith("Compacted ") and text.endswith(" tokens).")
    assert seq is not None and session.events[seq].type == "compaction/summary"
    assert usage == ("error", "Usage: /compact (no arguments)", None)
    assert new_types(session, length) == [
        "command/run",
        "compaction/start",
        "compaction/summary",
        "user/message",
        "compaction/end",
        "command/done",
        "command/run",
        "command/done",
    ]
    dshpy.validate(session.events)


def test_command_ids_are_dsh_s_shape_and_never_repeat() -> None:
    first, second = new_command_id(), new_command_id()
    assert first != second
    prefix, instance, number = first.split("-")
    assert prefix == "cmd" and len(instance) == 8 and int(second.rsplit("-", 1)[1]) == int(number) + 1
