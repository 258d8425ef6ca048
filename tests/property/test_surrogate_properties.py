"""Whatever ``append()`` accepts, every backend writes and reads back equal (strings with lone surrogates included).

Generated data, event types, cwds and projection states mix ordinary text with lone
UTF-16 surrogates, split surrogate pairs and NUL; each example goes through a real
store (append, flush, close, reopen, read, export, import) and must come back exactly
as the session held it, with the session still writable.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dshpy
from dshpy.core.json import dumps, loads
from dshpy.testing.builders import user_message
from dshpy.testing.strategies import json_values, texts

FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(params=["memory", "jsonl-plain", "jsonl-zstd", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dshpy.BaseStore]:
    kind = request.param
    if kind == "postgres":
        url = request.getfixturevalue("postgres_url")
    elif kind == "memory":
        url = "memory:"
    elif kind == "sqlite":
        url = f"sqlite:///{tmp_path}/fuzz.db"
    else:
        url = f"jsonl:///{tmp_path}/root?compression={'zstd' if kind == 'jsonl-zstd' else 'none'}"
    opened = dshpy.open_store(url)
    yield opened
    opened.close()


@FUZZ
@given(
    data=json_values(surrogates=True),
    text=texts(max_size=20, surrogates=True),
    kind=texts(max_size=8, surrogates=True),
    cwd=texts(max_size=8, surrogates=True),
)
def test_accepted_appends_round_trip_on_every_backend(
    store: dshpy.BaseStore, data: Any, text: str, kind: str, cwd: str
) -> None:
    session = store.create(cwd="/" + cwd)
    written = [
        session.append("plugin:dshpy/note", {"value": data}),
        session.append("user/message", user_message(text), surface_op="append"),
        session.append("x-" + kind, {"text": text}, ignorable=True),  # an unknown type dsh readers skip
        session.append("todo/write", {"todos": [{"content": text, "status": "pending", "extra": data, "x" + kind: 1}]}),
    ]
    session.flush()
    session.close()  # checkpoints the projection cache too

    reopened = store.open(session.id)
    assert [e.to_wire() for e in reopened.events] == [e.to_wire() for e in written]
    assert reopened.header.cwd == session.header.cwd
    reopened.append("plugin:dshpy/note", {"after": text})  # still writable
    reopened.close()
    assert [e.to_wire() for e in store.read(session.id)][:4] == [e.to_wire() for e in written]
    todos = store.projections(session.id, ["todos"])["values"]["todos"]["todos"]
    assert todos[0]["content"] == written[3].data["todos"][0]["content"]  # text, its split pairs joined

    copy = dshpy.open_store("memory:")
    copy.import_session(loads(dumps(store.export(session.id))))
    assert [e.to_wire() for e in copy.read(session.id)][:4] == [e.to_wire() for e in written]
    store.delete(session.id)


@settings(max_examples=200, deadline=None)
@given(st.one_of(json_values(surrogates=True), texts(surrogates=True)))
def test_codec_reads_back_exactly_what_the_gate_accepted(value: Any) -> None:
    frozen = dshpy.freeze_json(value)
    assert loads(dumps(frozen)) == frozen
    assert dshpy.freeze_json(frozen) is frozen or frozen == dshpy.freeze_json(frozen)
