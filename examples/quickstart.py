"""A first session: log one tool-using turn, derive the model's history, fork, and survive a crash.

Run: python examples/quickstart.py [STORE_URL]   (default: memory:)
"""

from __future__ import annotations

import sys

import dshpy


def user(text: str) -> dict:
    return {"id": dshpy.new_message_id(), "role": "user", "content": [{"type": "text", "text": text}],
            "source": {"kind": "user"}}


def main(url: str) -> None:
    store = dshpy.open_store(url)
    session = store.create(cwd="/srv/app")
    model = {"kind": "model", "provider": "deepseek", "model": "deepseek-chat"}

    # One turn, two steps: the model calls a tool, reads the result, answers.
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    session.append("user/message", user("How many files are in /srv/app?"), surface_op="append")
    session.append("assistant/message", {
        "turn": 1, "step": 1, "stream": [],
        "message": {"id": dshpy.new_message_id(), "role": "assistant", "source": model, "content": [
            {"type": "tool-call", "id": "call-1", "name": "count_files", "arguments": '{"path": "/srv/app"}'}]},
        "usage": {"inputTokens": 120, "outputTokens": 18},
    }, surface_op="append")
    call = session.append("tool/call", {"turn": 1, "step": 1, "callId": "call-1", "name": "count_files",
                                        "arguments": '{"path": "/srv/app"}'})
    session.append("tool/result", {"turn": 1, "step": 1, "message": {
        "id": dshpy.new_message_id(), "role": "tool", "source": {"kind": "tool", "callId": "call-1"},
        "toolCallId": "call-1", "content": [{"type": "text", "text": "42"}]}},
        surface_op="append", source_event_seqs=[call.seq])
    session.append("step/end", {"turn": 1, "step": 1})
    session.append("step/start", {"turn": 1, "step": 2})
    session.append("assistant/message", {
        "turn": 1, "step": 2, "stream": [],
        "message": {"id": dshpy.new_message_id(), "role": "assistant", "source": model,
                    "content": [{"type": "text", "text": "There are 42 files."}]},
    }, surface_op="append")
    session.append("step/end", {"turn": 1, "step": 2})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    session.flush()

    print(f"session {session.id}: {len(session.events)} events")
    for message in session.derive_messages():
        print(f"  {message.role:>9}: {message.text or [b['type'] for b in message.content]}")

    # Fork after turn 1 and continue the child on its own.
    child = store.fork(session.id)
    print(f"fork {child.id}: inherits {child.inherited_event_count} events, next turn {child.next_turn}")

    # A crash in the middle of turn 2 is repaired on the next open.
    session.append("turn/start", {"turn": 2})
    session.append("step/start", {"turn": 2, "step": 1})
    session.flush()
    session.close()  # its writer goes away mid-turn, as a crashed process's would (a live one could not be reopened)
    reopened = store.open(session.id)
    last = reopened.events[-1]
    print(f"reopened after a crash: last event {last.type} {last.data['reason']['kind']}")
    reopened.close()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "memory:")
