"""dshpy against session files written by the official dsh runtime (0.2.1rc2).

The fixtures under ``tests/fixtures/dsh/`` were made by
``tests/fixtures/dsh/make_fixtures.py`` (see the README there): the real runtime,
driven by the official Python SDK against a scripted fake model. Every test here
reads the committed bytes; nothing runs the runtime.

What is checked, per fixture and per encoding (``zstd`` and ``plain``):

* the physical layout (session directory, ``session.lock``, zstd frames);
* the header line, parsed by :class:`dshpy.SessionHeader` and re-serialized to the
  same bytes;
* every event decoded by :func:`dshpy.decode_event` and admitted by
  :class:`dshpy.Session`, i.e. every dshpy validation rule holds on real data;
* the event type sequence the runtime wrote;
* the messages :meth:`dshpy.Session.derive_messages` folds out of the log, against
  what the fake model answered;
* :func:`dshpy.encode_event` reproduces each line byte for byte (this holds for
  every line of these fixtures, repair closers included);
* dshpy's crash repair produces the runtime's own closers, byte for byte.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from dshpy import Session, SessionEvent, SessionHeader, decode_event, encode_event, interrupted_turn_closers

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "dsh"
ENCODINGS = ("zstd", "plain")
WORKSPACE = "/tmp/dshpy-dsh-fixtures/workspace"
PROJECT = "--tmp-dshpy-dsh-fixtures-workspace--"  # dsh's projectKey(WORKSPACE)
LOG_NAMES = {"zstd": "session.v4.jsonl.zstd", "plain": "session.v4.jsonl"}

SYSTEM_PROMPT_START = "You are an AI agent powered by DeepSeek Harness."
RUNTIME_CONTEXT_START = "Current runtime context. This snapshot supersedes earlier runtime-context snapshots."

# -- what the runtime wrote ---------------------------------------------------------------

_POLICY = ["permission/preset", "sandbox/mode", "approval/policy"]
_FIRST_TURN_OPEN = [
    "agent/inbox/spliced",  # the prompt enters the next-turn inbox
    "turn/start",
    "agent/inbox/spliced",  # ... and is claimed
    "step/start",
    "system/message",
    "user/message",  # the prompt
    "user/message",  # the runtime-context snapshot
    "request/header",
    "request/context",
    "session/title",
    "session-log-deepseek/delivery-accepted",
]
_LATER_TURN_OPEN = ["agent/inbox/spliced", "turn/start", "agent/inbox/spliced", "step/start", "user/message"]
_ANSWER_CLOSE = ["assistant/message", "step/end", "turn/end"]

EXPECTED_TYPES: dict[str, list[str]] = {
    "text-2-prompts": [
        *_POLICY,
        *_FIRST_TURN_OPEN,
        *_ANSWER_CLOSE,
        *_LATER_TURN_OPEN,
        "session-log-deepseek/delivery-accepted",
        *_ANSWER_CLOSE,
    ],
    "tool-turn": [
        *_POLICY,
        *_FIRST_TURN_OPEN,
        "assistant/message",  # text + tool-call
        "tool/call",
        "tool/result",
        "step/end",
        "step/start",
        "session-log-deepseek/delivery-accepted",
        *_ANSWER_CLOSE,
    ],
    "resumed": [
        *_POLICY,
        *_FIRST_TURN_OPEN,
        *_ANSWER_CLOSE,
        "session/end-seed",  # the resume marker, written by the second process
        *_LATER_TURN_OPEN,
        "request/header",  # reason "resume"; the unchanged request/context is not re-logged
        "session-log-deepseek/delivery-accepted",
        *_ANSWER_CLOSE,
    ],
    "interrupted": [
        *_POLICY,
        *_FIRST_TURN_OPEN,
        *_ANSWER_CLOSE,
        *_LATER_TURN_OPEN,  # the process was killed while the model request of this step hung
        "step/end",  # crash-repair closers, made durable by the resume
        "turn/end",
        "session/end-seed",
        *_LATER_TURN_OPEN,
        "request/header",
        "session-log-deepseek/delivery-accepted",
        *_ANSWER_CLOSE,
    ],
}

# (role, text) per derived message; None = checked separately (system prompt, runtime context).
EXPECTED_MESSAGES: dict[str, list[tuple[str, str | None]]] = {
    "text-2-prompts": [
        ("system", None),
        ("user", "What is 2 + 2?"),
        ("user", None),
        ("assistant", "2 + 2 = 4."),
        ("user", "And times three?"),
        ("assistant", "4 × 3 = 12 — done."),
    ],
    "tool-turn": [
        ("system", None),
        ("user", "What does hello.txt say?"),
        ("user", None),
        ("assistant", "I'll read the file."),
        ("tool", None),
        ("assistant", "It says: hi from the workspace"),
    ],
    "resumed": [
        ("system", None),
        ("user", "Remember the word kiwi."),
        ("user", None),
        ("assistant", "Noted: kiwi."),
        ("user", "Which word did I ask you to remember?"),
        ("assistant", 'You asked me to remember "kiwi".'),
    ],
    "interrupted": [
        ("system", None),
        ("user", "Count to three."),
        ("user", None),
        ("assistant", "1, 2, 3."),
        ("user", "Now count to five."),  # never answered: the turn was interrupted
        ("user", "Try again: count to five."),
        ("assistant", "1, 2, 3, 4, 5."),
    ],
}

FIXTURE_NAMES = tuple(EXPECTED_TYPES)
CASES = [pytest.param(encoding, name, id=f"{encoding}-{name}") for encoding in ENCODINGS for name in FIXTURE_NAMES]

# Event types whose dsh lines dshpy's writer does NOT reproduce byte for byte. Empty:
# on these fixtures every line (header, all 18 event types, repair closers) round-trips.
BYTE_EXCEPTIONS: frozenset[str] = frozenset()


# -- reading ------------------------------------------------------------------------------


def session_dir(encoding: str, name: str) -> Path:
    return FIXTURES / "sessions" / encoding / PROJECT / name


def zstd_frames(raw: bytes) -> list[bytes]:
    """Decompress a concatenation of zstd frames, one plaintext per frame (checksums verified)."""
    zstandard = pytest.importorskip("zstandard")
    frames: list[bytes] = []
    offset = 0
    while offset < len(raw):
        params = zstandard.get_frame_parameters(raw[offset:])
        assert params.has_checksum, f"frame {len(frames)} at byte {offset} has no content checksum"
        decompressor = zstandard.ZstdDecompressor().decompressobj()
        frames.append(decompressor.decompress(raw[offset:]))
        assert decompressor.eof, f"frame {len(frames) - 1} at byte {offset} is truncated"
        offset = len(raw) - len(decompressor.unused_data)
    return frames


def log_bytes(encoding: str, name: str) -> bytes:
    raw = (session_dir(encoding, name) / LOG_NAMES[encoding]).read_bytes()
    return b"".join(zstd_frames(raw)) if encoding == "zstd" else raw


def log_lines(encoding: str, name: str) -> list[bytes]:
    """The header line and the event lines, without their newlines."""
    text = log_bytes(encoding, name)
    assert text.endswith(b"\n"), "the last record is torn (no final newline)"
    return text[:-1].split(b"\n")


def load(encoding: str, name: str) -> tuple[SessionHeader, list[SessionEvent], list[bytes]]:
    lines = log_lines(encoding, name)
    header = SessionHeader.from_record(orjson.loads(lines[0]))
    events = [decode_event(orjson.loads(line)) for line in lines[1:]]
    return header, events, lines


def of_type(events: list[SessionEvent], kind: str) -> list[SessionEvent]:
    return [event for event in events if event.type == kind]


# -- layout -------------------------------------------------------------------------------


@pytest.mark.parametrize(("encoding", "name"), CASES)
def test_session_directory_layout(encoding: str, name: str) -> None:
    directory = session_dir(encoding, name)
    assert sorted(p.name for p in directory.iterdir()) == sorted([LOG_NAMES[encoding], "session.lock"])
    assert (directory / "session.lock").stat().st_size == 0


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_zstd_frames_are_line_aligned_and_frame_0_is_the_header(name: str) -> None:
    frames = zstd_frames((session_dir("zstd", name) / LOG_NAMES["zstd"]).read_bytes())
    assert frames[0].count(b"\n") == 1
    assert frames[0].endswith(b"\n")
    assert orjson.loads(frames[0])["type"] == "session"
    for index, frame in enumerate(frames):
        assert frame.endswith(b"\n"), f"frame {index} ends inside a record"
    assert len(frames) > 2  # write-behind batches: one frame per durable batch


@pytest.mark.parametrize(("encoding", "name"), CASES)
def test_projection_cache_identity_matches_the_header(encoding: str, name: str) -> None:
    header, _, _ = load(encoding, name)
    cache = json.loads((FIXTURES / "projcache" / encoding / f"{name}.json").read_text())
    assert cache["version"] == 7
    assert cache["record"]["identity"] == {
        "formatVersion": 4,
        "createdAt": header.created_at,
        "cwd": header.cwd,
        "isSeeded": False,
        "inheritedEventCount": 0,
    }
    assert cache["record"]["rows"]["title"]["val"] == EXPECTED_MESSAGES[name][1][1]


# -- header -------------------------------------------------------------------------------


@pytest.mark.parametrize(("encoding", "name"), CASES)
def test_header_round_trips_byte_for_byte(encoding: str, name: str) -> None:
    line = log_lines(encoding, name)[0]
    header = SessionHeader.from_record(orjson.loads(line))
    assert orjson.dumps(header.to_record()) == line
    assert header.id == name
    assert header.version == 4
    assert header.cwd == WORKSPACE
    assert header.is_seeded is False
    assert header.delegation_depth == 0
    assert header.parent_session is None
    assert header.origin is None
    assert header.agent_preset is None


# -- events -------------------------------------------------------------------------------


@pytest.mark.parametrize(("encoding", "name"), CASES)
def test_event_type_sequence(encoding: str, name: str) -> None:
    _, events, _ = load(encoding, name)
    assert [event.type for event in events] == EXPECTED_TYPES[name]
    assert [event.seq for event in events] == list(range(len(events)))
    assert all(b.time >= a.time for a, b in itertools.pairwise(events))


@pytest.mark.parametrize(("encoding", "name"), CASES)
def test_every_event_is_admitted_by_dshpy(encoding: str, name: str) -> None:
    header, events, _ = load(encoding, name)
    session = Session(header, events)  # runs every dshpy validation rule, event by event
    assert len(session) == len(events)
    assert session.open_turn is None
    assert session.inherited_event_count == 0
    turns = len(of_type(events, "turn/start"))
    assert session.next_turn == turns + 1


@pytest.mark.parametrize(("encoding", "name"), CASES)
def test_encode_event_reproduces_each_line(encoding: str, name: str) -> None:
    _, events, lines = load(encoding, name)
    differing = [
        f"seq {event.seq} ({event.type}): dsh {line[:120]!r} vs dshpy {encode_event(event)[:120]!r}"
        for event, line in zip(events, lines[1:], strict=True)
        if event.type not in BYTE_EXCEPTIONS and encode_event(event) != line
    ]
    assert not differing, "\n".join(differing)


@pytest.mark.parametrize(("encoding", "name"), CASES)
def test_derived_messages_match_the_model_answers(encoding: str, name: str) -> None:
    header, events, _ = load(encoding, name)
    messages = Session(header, events).derive_messages()
    assert [
        (m.role, m.text if text is not None else None)
        for m, (_, text) in zip(messages, EXPECTED_MESSAGES[name], strict=True)
    ] == EXPECTED_MESSAGES[name]
    system, context = messages[0], messages[2]
    assert system.text.startswith(SYSTEM_PROMPT_START)
    assert system.source == {"kind": "system-prompt"}
    assert context.text.startswith(RUNTIME_CONTEXT_START)
    assert f'Current working directory: "{WORKSPACE}".' in context.text
    assert context.source["kind"] == "runtime-context"
    assert context.source["form"] == "snapshot"
    assert [s["name"] for s in context.source["sections"]] == [
        "working-directory:current",
        "sandbox:policy",
        "approval:policy",
    ]
    for message in messages:
        if message.role == "assistant":
            assert message.source["kind"] == "model"
            assert message.source["provider"] == "deepseek-official"
            assert message.source["model"] == "deepseek-v4-flash"
        if message.role == "user" and message.seq != context.seq:
            assert message.source == {"kind": "user"}


# -- fixture-specific facts ---------------------------------------------------------------


def expand_stream(stream: Any) -> dict[int, str]:
    """Concatenate each block's packed text/reasoning/tool-argument runs (dsh §3.4)."""
    out: dict[int, str] = {}
    for record in stream:
        if record["type"] in ("text-chunks", "reasoning-chunks"):
            assert len(record["dt"]) == len(record["texts"]) - 1
            out[record["index"]] = out.get(record["index"], "") + "".join(record["texts"])
        elif record["type"] == "tool-call-chunks":
            assert len(record["dt"]) == len(record["args"]) - 1
            out[record["index"]] = out.get(record["index"], "") + "".join(record["args"])
    return out


@pytest.mark.parametrize(("encoding", "name"), CASES)
def test_assistant_streams_pack_the_visible_content(encoding: str, name: str) -> None:
    _, events, _ = load(encoding, name)
    for event in of_type(events, "assistant/message"):
        content = event.data["message"]["content"]
        packed = expand_stream(event.data["stream"])
        visible = {index: block.get("text", block.get("arguments")) for index, block in enumerate(content)}
        assert packed == visible
        assert event.data["stream"][-1]["chunk"]["type"] == "finish"
        assert event.data["usage"] == {
            "inputTokens": 120,
            "outputTokens": 12,
            "cacheReadTokens": 0,
            "cacheWriteTokens": 0,
            "totalTokens": 132,
        }
        assert event.source_event_seqs is None


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_text_fixture_keeps_the_reasoning_block(encoding: str) -> None:
    _, events, _ = load(encoding, "text-2-prompts")
    first = of_type(events, "assistant/message")[0].data
    assert [b["type"] for b in first["message"]["content"]] == ["reasoning", "text"]
    assert first["message"]["content"][0]["text"] == "The user asks for a simple sum."
    assert first["message"]["source"]["replayState"]["blocks"] == [
        {"type": "reasoning", "signature": "sig-fixture-thinking-1"},
        {"type": "text"},
    ]
    assert [r["type"] for r in first["stream"]] == [
        "chunk",
        "reasoning-chunks",
        "chunk",
        "chunk",
        "text-chunks",
        "chunk",
        "chunk",
        "chunk",
    ]


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_tool_fixture_pairs_call_and_result(encoding: str) -> None:
    header, events, _ = load(encoding, "tool-turn")
    asked = of_type(events, "assistant/message")[0].data["message"]["content"][1]
    call = of_type(events, "tool/call")[0]
    result = of_type(events, "tool/result")[0]
    assert asked == {
        "type": "tool-call",
        "id": "toolu_fixture_001",
        "name": "read",
        "arguments": '{"file_path": "hello.txt"}',
    }
    assert call.data == {"turn": 1, "step": 1, "callId": asked["id"], "name": "read", "arguments": asked["arguments"]}
    assert result.source_event_seqs == (call.seq,)
    assert result.surface_op == "append"
    message = result.data["message"]
    assert message["role"] == "tool"
    assert message["toolCallId"] == message["source"]["callId"] == asked["id"]
    assert message["isError"] is False
    assert "1: hi from the workspace" in message["content"][0]["text"]
    assert result.data["meta"]["path"] == f"{WORKSPACE}/hello.txt"
    tool_message = Session(header, events).derive_messages()[4]
    assert tool_message.seq == result.seq
    assert [(e.data["turn"], e.data["step"]) for e in of_type(events, "step/start")] == [(1, 1), (1, 2)]


@pytest.mark.parametrize(
    ("encoding", "name"), [pytest.param(e, n, id=f"{e}-{n}") for e in ENCODINGS for n in ("resumed", "interrupted")]
)
def test_resume_marker_and_resume_request_header(encoding: str, name: str) -> None:
    header, events, _ = load(encoding, name)
    (marker,) = of_type(events, "session/end-seed")
    assert marker.data == {}  # a resume marker, not a fork's {"inherited": true}
    assert [e.data["reason"] for e in of_type(events, "request/header")] == ["initial", "resume"]
    assert len(of_type(events, "request/context")) == 1
    assert len(of_type(events, "system/message")) == 1  # unchanged prompt: nothing re-written after resume
    session = Session(header, events)
    assert session.inherited_event_count == 0
    assert session.request_header()["config"] == {
        "provider": "deepseek-official",
        "model": "deepseek-v4-flash",
        "maxTokens": 256000,
        "reasoningEffort": "high",
    }


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_dshpy_repair_matches_the_runtime_closers(encoding: str) -> None:
    _, events, lines = load(encoding, "interrupted")
    closer_seqs = [e.seq for e in events if e.type == "turn/end" and e.data["reason"] == {"kind": "interrupted"}]
    assert len(closer_seqs) == 1
    turn_end = closer_seqs[0]
    first_closer = turn_end - 1  # step/end
    crashed = events[:first_closer]
    ours = interrupted_turn_closers(crashed)
    assert [encode_event(e) for e in ours] == lines[1 + first_closer : 1 + turn_end + 1]
    assert all(e.time == crashed[-1].time for e in events[first_closer : turn_end + 1])
