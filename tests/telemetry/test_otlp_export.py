"""End to end: ``dshpy run --otel`` as a child process exports over real OTLP/HTTP to a receiver on loopback.

The receiver decodes the protobuf (``opentelemetry-proto``): the turn → step → model
call → tool tree arrives whole, with the token counts the session's ``usage``
projection holds, the flush spans name every stored event, and the metrics arrive when
the command exits.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from otlp_support import attributes, exporting_env

import dshpy
from dshpy.projections import USAGE, state_of
from dshpy.testing.fake_model import FakeModelServer, Reply, Usage
from dshpy.testing.otlp_receiver import OtlpReceiver


def test_dshpy_run_exports_the_turn_tree_over_otlp_http(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/sessions.db"
    replies = [
        Reply.tool_calls(("read_file", '{"path": "a.txt"}', "call-7"), usage=Usage(120, 12, cache_hit_tokens=20)),
        Reply.text("There is no such tool.", usage=Usage(160, 6)),
    ]
    with OtlpReceiver() as receiver, FakeModelServer(replies) as model:
        env = exporting_env(tmp_path / "home", receiver.endpoint, model.base_url)
        done = subprocess.run(
            [sys.executable, "-m", "dshpy", "--store", url, "run", "--otel", "--json", "read a.txt"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        receiver.wait_for("/v1/traces")
        receiver.wait_for("/v1/metrics")
        spans = receiver.spans()
        metrics = receiver.metrics()
    session_id = json.loads(done.stdout)["sessionId"]
    by_name: dict[str, list] = {}
    for span in spans:
        by_name.setdefault(span.name.split(" ")[0], []).append(span)
    (turn,) = by_name["invoke_agent"]
    steps = sorted(by_name["dshpy.step"], key=lambda span: attributes(span)["dshpy.step"])
    chats = sorted(by_name["chat"], key=lambda span: attributes(span)["dshpy.step"])
    (tool_span,) = by_name["execute_tool"]
    assert turn.parent_span_id == b""
    assert len({span.trace_id for span in spans}) == 1
    assert [step.parent_span_id for step in steps] == [turn.span_id] * 2
    assert [chat.parent_span_id for chat in chats] == [step.span_id for step in steps]
    assert tool_span.parent_span_id == steps[0].span_id
    assert tool_span.name == "execute_tool read_file"
    tool_attributes = attributes(tool_span)
    assert tool_attributes["gen_ai.tool.call.id"] == "call-7"
    assert tool_attributes["error.type"] == "TOOL_NOT_FOUND"  # `dshpy run` has no tools
    assert all(attributes(span)["session.id"] == session_id for span in spans)
    written: dict[int, str] = {}  # the seed's session.event, per flush: first_seq + index → event_types[index]
    for flush in by_name["dshpy.store.flush"]:
        flushed = attributes(flush)
        for index, kind in enumerate(flushed["dshpy.store.flush.event_types"]):
            written[flushed["dshpy.store.flush.first_seq"] + index] = kind

    store = dshpy.open_store(url)
    try:
        stored = store.inspect(session_id)
        usage = state_of(stored, USAGE).total
        assert written == {event.seq: event.type for event in stored.events}
    finally:
        store.close()
    turn_attributes = attributes(turn)
    assert turn_attributes["gen_ai.usage.input_tokens"] == usage.billed_input_tokens == 280
    assert turn_attributes["gen_ai.usage.output_tokens"] == usage.output_tokens == 18
    assert sum(attributes(chat)["gen_ai.usage.input_tokens"] for chat in chats) == usage.billed_input_tokens
    assert attributes(chats[0])["gen_ai.usage.cache_read.input_tokens"] == 20

    token_points = [point for metric in metrics["gen_ai.client.token.usage"] for point in metric.histogram.data_points]
    by_type: dict[str, int] = {}
    for point in token_points:
        kind = attributes(point)["gen_ai.token.type"]
        by_type[kind] = by_type.get(kind, 0) + int(point.sum)
    assert by_type == {"input": usage.billed_input_tokens, "output": usage.output_tokens}
    for name in ("gen_ai.client.operation.duration", "dshpy.store.flush.duration", "dshpy.session.events"):
        assert name in metrics, sorted(metrics)
