"""The one place that builds and reads the ``data`` of events, in dsh v4's exact shapes and key order.

The agent loop, the server, the CLI and the shipped test builders all write events
through these functions, so a shape (or its key order) can only drift in one place.
Key order is not semantics, but matching the real runtime's byte layout (checked
against tests/fixtures/dsh) keeps sessions diffable against dsh's own:
``user/message`` is ``{content, source, role, id}``, messages are ``{role, content,
source, id}``, a tool result message ``{role, source, toolCallId, content, isError,
id}``, ``assistant/message`` data ``{turn, step, message, usage, stream}``. The
``compaction/*`` shapes follow the 0.2.1rc2 runtime's compaction packages:
``{compactionId, sourceCommandId?, turn, error?}`` for the brackets, and the summary
record's fields in the order its transaction spreads them. ``command/run`` and
``command/done`` are the command registry's (``{commandId, name, args?, source}``,
``{commandId, kind, text?, sourceEventSeq?}``).

Message ids are fresh (:func:`~dshpy.core.ids.new_message_id`) unless the caller
passes ``message_id`` (test builders do, for stable ids).

Reading: :func:`message_text` joins a message event's text. What a whole session
says when it is continued (its system prompt, the resume marker) is in
:mod:`dshpy.log.continuation`: this module sees single events only, because the
session's own invariants reach it (through the repair closers,
:func:`closer_result_data`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dshpy.core.events import SessionEvent
from dshpy.core.ids import new_message_id

__all__ = [
    "assistant_data",
    "attempt_data",
    "checkpoint_source",
    "claim_splice",
    "closer_result_data",
    "command_done_data",
    "command_run_data",
    "compaction_bracket_data",
    "compaction_prune_data",
    "compaction_summary_data",
    "delivery_accepted_data",
    "insert_splice",
    "job_registered_data",
    "job_settled_data",
    "message_text",
    "request_context_data",
    "request_header",
    "request_header_data",
    "retry_data",
    "retry_started_data",
    "system_data",
    "title_data",
    "tool_call_data",
    "tool_result_data",
    "user_message",
]


def _in_step(turn: int, step: int, message: dict[str, Any]) -> dict[str, Any]:
    """The ``{turn, step, message}`` head every message event of a step starts with."""
    return {"turn": turn, "step": step, "message": message}


def user_message(
    content: str | Sequence[Mapping[str, Any]],
    source: Mapping[str, Any] | None = None,
    *,
    message_id: str | None = None,
) -> dict[str, Any]:
    """A ``UserMessage`` (also the whole ``user/message`` data); ``source`` defaults to a human prompt."""
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else [dict(b) for b in content]
    return {
        "content": blocks,
        "source": dict(source) if source is not None else {"kind": "user"},
        "role": "user",
        "id": message_id or new_message_id(),
    }


def insert_splice(target: str, start: int, messages: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``agent/inbox/spliced`` for messages queued into the ``next-turn`` or ``next-step`` inbox."""
    return {"target": target, "start": start, "inserted": [dict(m) for m in messages]}


def claim_splice(target: str, count: int) -> dict[str, Any]:
    """``agent/inbox/spliced`` for the loop taking ``count`` queued messages."""
    return {"target": target, "start": 0, "removedCount": count, "inserted": []}


def system_data(turn: int, step: int, text: str, *, message_id: str | None = None) -> dict[str, Any]:
    """``system/message``; an empty prompt still reserves surface node 0 (content ``[]``)."""
    message = {
        "role": "system",
        "content": [{"type": "text", "text": text}] if text else [],
        "source": {"kind": "system-prompt"},
        "id": message_id or new_message_id(),
    }
    return _in_step(turn, step, message)


def assistant_data(
    turn: int,
    step: int,
    content: list[dict[str, Any]],
    *,
    provider: str,
    model: str,
    stream: list[dict[str, Any]],
    usage: Mapping[str, Any] | None,
    interrupted: bool = False,
    message_id: str | None = None,
    replay_state: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``assistant/message``: the message, its usage (when the stream reported one) and its packed stream.

    ``replay_state`` (a Messages API answer's thinking signatures, dsh-v4 §3.4) goes into
    the message's ``source.replayState``, where the next request reads it back.
    """
    source: dict[str, Any] = {"kind": "model", "provider": provider, "model": model}
    if replay_state is not None:
        source["replayState"] = dict(replay_state)
    message = {
        "role": "assistant",
        "content": content,
        "source": source,
        "id": message_id or new_message_id(),
    }
    data = _in_step(turn, step, message)
    if usage is not None:
        data["usage"] = dict(usage)
    data["stream"] = stream
    if interrupted:
        data["interrupted"] = True
    return data


def attempt_data(turn: int, step: int, stream: list[dict[str, Any]]) -> dict[str, Any]:
    """``assistant/attempt``: a failed try's packed stream, kept for its billed tokens."""
    return {"turn": turn, "step": step, "stream": stream}


def tool_call_data(turn: int, step: int, call_id: str, name: str, arguments: str) -> dict[str, Any]:
    """``tool/call``: the model's call ``call_id`` is about to run (``arguments`` is the raw JSON text)."""
    return {"turn": turn, "step": step, "callId": call_id, "name": name, "arguments": arguments}


def tool_result_data(
    turn: int,
    step: int,
    call_id: str,
    content: Sequence[Mapping[str, Any]],
    *,
    is_error: bool,
    error: Mapping[str, Any] | None = None,
    meta: Any = None,
    message_id: str | None = None,
) -> dict[str, Any]:
    """``tool/result``: a ``role: "tool"`` message answering ``call_id``, plus dsh's error code and tool meta."""
    message = {
        "role": "tool",
        "source": {"kind": "tool", "callId": call_id},
        "toolCallId": call_id,
        "content": [dict(b) for b in content],
        "isError": is_error,
        "id": message_id or new_message_id(),
    }
    data = _in_step(turn, step, message)
    if error is not None:
        data["error"] = dict(error)
    if meta is not None:
        data["meta"] = meta
    return data


def closer_result_data(
    turn: int, step: int, call_id: str, text: str, *, message_id: str, error: Mapping[str, Any]
) -> dict[str, Any]:
    """The error ``tool/result`` that closes a call left unanswered (crash repair, forked closers).

    dsh's repair writes its message keys in another order than its agent loop
    (``{id, role, toolCallId, isError, source, content}``), and this keeps to it.
    """
    message = {
        "id": message_id,
        "role": "tool",
        "toolCallId": call_id,
        "isError": True,
        "source": {"kind": "tool", "callId": call_id},
        "content": [{"type": "text", "text": text}],
    }
    data = _in_step(turn, step, message)
    data["error"] = dict(error)
    return data


def request_header(
    provider: str,
    model: str,
    *,
    max_tokens: int | None = None,
    reasoning_effort: str | None = None,
    tools: Sequence[Mapping[str, Any]] = (),
    defaults: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The request header a model request is sent with: ``{config, adapterDefaults?, tools?}``.

    ``defaults`` are the adapter's own values (``maxTokens``, ``reasoningEffort``) for
    what the caller left unset: they fill ``config`` and are flagged ``true`` in
    ``adapterDefaults``, as dsh logs them. Empty ``tools`` / ``adapterDefaults`` are omitted.
    """
    config: dict[str, Any] = {"provider": provider, "model": model}
    filled: dict[str, bool] = {}
    for key, given in (("maxTokens", max_tokens), ("reasoningEffort", reasoning_effort)):
        value = given if given is not None else (defaults or {}).get(key)
        if given is None and value is not None:
            filled[key] = True
        if value is not None:
            config[key] = value
    header: dict[str, Any] = {"config": config}
    if filled:
        header["adapterDefaults"] = {key: True for key in ("reasoningEffort", "maxTokens") if key in filled}
    if tools:
        header["tools"] = list(tools)
    return header


def request_header_data(header: Mapping[str, Any], reason: str) -> dict[str, Any]:
    """``request/header``: why the header is logged (``initial``, ``resume``, ``change``) and the header."""
    return {"header": header, "reason": reason}


def request_context_data(provider: str, model: str, context_window: int | None = None) -> dict[str, Any]:
    """``request/context``: the route of the next model request."""
    context: dict[str, Any] = {"provider": provider, "model": model}
    if context_window is not None:
        context["contextWindow"] = context_window
    return context


def title_data(title: str, message_seqs: Sequence[int], source_kind: str) -> dict[str, Any]:
    """``session/title``: the title, the human prompts it was made from, and who made it (``fallback`` …)."""
    return {"title": title, "messageSeqs": list(message_seqs), "source": {"kind": source_kind}}


def delivery_accepted_data(session_id: str, format_version: int, through_seq: int) -> dict[str, Any]:
    """``session-log-deepseek/delivery-accepted``: DeepSeek took the uploaded log up to ``through_seq``."""
    return {"sessionId": session_id, "sessionFormatVersion": format_version, "throughSeq": through_seq}


def job_registered_data(
    job_id: str,
    owner: str,
    kind: str,
    label: str,
    started_at: int,
    tool_call: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """``job/registered``: a job (a ``bash`` command, …) started for the session ``owner``, by a tool call."""
    data: dict[str, Any] = {"jobId": job_id, "owner": owner, "kind": kind, "label": label, "startedAt": started_at}
    if tool_call is not None:
        data["toolCall"] = dict(tool_call)
    return data


def job_settled_data(
    registered: Mapping[str, Any],
    *,
    finished_at: int,
    status: str,
    cause: str,
    producer_reported: bool,
    detail: str | None = None,
) -> dict[str, Any]:
    """``job/settled``: the registration's fields, then how the job ended (``completed``, ``killed``, ``failed``)."""
    data = {
        **registered,
        "finishedAt": finished_at,
        "status": status,
        "cause": cause,
        "producerReported": producer_reported,
    }
    if detail is not None:
        data["detail"] = detail
    return data


def retry_data(
    retry_id: str,
    turn: int,
    step: int,
    *,
    provider: str,
    policy_key: str,
    retry: int,
    max_retries: int,
    delay_ms: int | float,
    failure: Mapping[str, Any],
    mode: str = "normal",
) -> dict[str, Any]:
    """``llm/retry``: a retry of the step's model request is scheduled after ``delay_ms``."""
    return {
        "retryId": retry_id,
        "turn": turn,
        "step": step,
        "provider": provider,
        "mode": mode,
        "policyKey": policy_key,
        "retry": retry,
        "maxRetries": max_retries,
        "delayMs": delay_ms,
        "failure": failure,
    }


def retry_started_data(retry_id: str, turn: int, step: int, retry: int) -> dict[str, Any]:
    """``llm/retry-started``: the scheduled retry ``retry`` of chain ``retry_id`` is now running."""
    return {"retryId": retry_id, "turn": turn, "step": step, "retry": retry}


def compaction_bracket_data(
    compaction_id: str, turn: int | None, *, source_command_id: str | None = None, error: str | None = None
) -> dict[str, Any]:
    """``compaction/start`` and ``compaction/end``: the bracket's id, its command, its owner turn (``None``:
    standalone, between turns), and on a failed end the error text."""
    data: dict[str, Any] = {"compactionId": compaction_id}
    if source_command_id is not None:
        data["sourceCommandId"] = source_command_id
    data["turn"] = turn
    if error is not None:
        data["error"] = error
    return data


def compaction_summary_data(
    compaction_id: str,
    summary: Sequence[Mapping[str, Any]],
    shadowed_seqs: Sequence[int],
    shadowed_token_count: int,
    *,
    provider: str,
    model: str,
    source_command_id: str | None = None,
    raw_output: Sequence[Mapping[str, Any]] | None = None,
    llm_stream_call: bool = False,
    max_tokens: int | None = None,
    usage: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``compaction/summary``: the summary text blocks, the span they stand for and its price, and the call.

    ``raw_output`` is the model's whole answer (reasoning included); dsh marks an
    answer that came from its own streaming call with ``llmStreamCall: true``, which
    needs the raw output beside it.
    """
    if llm_stream_call and raw_output is None:
        raise ValueError("llm_stream_call needs the raw_output it describes")
    data: dict[str, Any] = {"compactionId": compaction_id}
    if source_command_id is not None:
        data["sourceCommandId"] = source_command_id
    data["summary"] = [dict(b) for b in summary]
    if raw_output is not None:
        data["rawOutput"] = [dict(b) for b in raw_output]
        if llm_stream_call:
            data["llmStreamCall"] = True
    data["shadowedRange"] = {"start": shadowed_seqs[0], "end": shadowed_seqs[-1]}
    data["shadowedSeqs"] = list(shadowed_seqs)
    data["shadowedTokenCount"] = shadowed_token_count
    data["provider"] = provider
    data["model"] = model
    if max_tokens is not None:
        data["maxTokens"] = max_tokens
    if usage is not None:
        data["usage"] = dict(usage)
    return data


def compaction_prune_data(seq: int, shadowed_token_count: int) -> dict[str, Any]:
    """``compaction/prune``: the price of the one ``tool/result`` node the next event rewrites."""
    return {
        "shadowedRange": {"start": seq, "end": seq},
        "shadowedSeqs": [seq],
        "shadowedTokenCount": shadowed_token_count,
    }


def checkpoint_source(compaction_id: str, source_command_id: str | None = None) -> dict[str, Any]:
    """The ``source`` of a compaction checkpoint ``user/message`` (dsh v4's ``compact-checkpoint``)."""
    source: dict[str, Any] = {"kind": "compact-checkpoint", "compactionId": compaction_id}
    if source_command_id is not None:
        source["sourceCommandId"] = source_command_id
    return source


def command_run_data(
    command_id: str, name: str, args: str | None = None, *, source: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """``command/run``: a slash command entered its handler (``args``: the raw text after its name, as typed;
    ``None`` for a command that does not record its input). ``source`` defaults to ``{"kind": "user"}``."""
    data: dict[str, Any] = {"commandId": command_id, "name": name}
    if args is not None:
        data["args"] = args
    data["source"] = dict(source) if source is not None else {"kind": "user"}
    return data


def command_done_data(
    command_id: str, kind: str, text: str | None = None, *, source_event_seq: int | None = None
) -> dict[str, Any]:
    """``command/done``: how the command settled (``success`` or ``error``), its message, and for a success
    the event it produced (``/compact``: the ``compaction/summary``)."""
    if kind not in ("success", "error"):
        raise ValueError(f"a command settles as success or error, not {kind!r}")
    data: dict[str, Any] = {"commandId": command_id, "kind": kind}
    if text is not None:
        data["text"] = text
    if kind == "success" and source_event_seq is not None:
        data["sourceEventSeq"] = source_event_seq
    return data


def message_text(event: SessionEvent) -> str:
    """The text blocks of a message event's ``message``, joined (other blocks are skipped)."""
    return "".join(str(b["text"]) for b in event.data["message"]["content"] if b.get("type") == "text")
