"""Export/import moves a session between any two backends without changing a byte of its events."""

import orjson

import dshpy
from dshpy.testing.builders import TurnScript


def wire(store, session_id):
    return [orjson.dumps(event.to_wire()) for event in store.read(session_id)]


def test_memory_to_jsonl_to_sqlite_to_jsonl_keeps_events_identical(tmp_path):
    memory = dshpy.open_store("memory:")
    session = memory.create(cwd="/srv/app")
    script = TurnScript(session)
    script.turn("first", steps=3, tools_per_step=2, system="be brief")
    script.turn("second", steps=2)
    session.append("plugin:dshpy/note", {"text": "kept verbatim"})
    script.turn("third", close=False)
    session.close()
    original = wire(memory, session.id)

    hops = [
        dshpy.open_store(f"jsonl:///{tmp_path}/a?compression=zstd"),
        dshpy.open_store(f"sqlite:///{tmp_path}/b.db"),
        dshpy.open_store(f"jsonl:///{tmp_path}/c?compression=none"),
    ]
    source = memory
    for target in hops:
        document = orjson.loads(orjson.dumps(source.export(session.id)))  # as if written to a file
        info = target.import_session(document)
        assert info.id == session.id and info.event_count == len(original)
        assert wire(target, session.id) == original
        assert target.stat(session.id).header == memory.stat(session.id).header
        source = target
    reopened = hops[-1].open(session.id)  # the open turn is repaired only now, on the last backend
    assert reopened.events[-1].data["reason"] == {"kind": "interrupted"}
    reopened.close()
    for store in hops:
        store.close()
