"""A SessionFilter instance filters exactly as the mapping it was parsed from (parse is idempotent)."""

from __future__ import annotations

import dshpy
from dshpy.query import SessionFilter, SessionQuery


def test_parsing_an_instance_keeps_unset_fields_unset() -> None:
    for mapping in ({"title": "port"}, {"cwd": ["/a", None]}, {"parent": [None]}, {}):
        parsed = SessionFilter.parse(mapping)
        assert SessionFilter.parse(parsed) == parsed


def test_listing_with_an_instance_matches_listing_with_the_mapping() -> None:
    store = dshpy.open_store("memory:")
    with_cwd = store.create(cwd="/srv/app")
    with_cwd.append("turn/start", {"turn": 1})
    with_cwd.flush()
    store.create()  # no cwd
    query = SessionQuery(store)
    for mapping in ({"min_turns": 1}, {"cwd": [None]}, {}):
        by_mapping = [s.id for s in query.list(mapping).sessions]
        by_instance = [s.id for s in query.list(SessionFilter.parse(mapping)).sessions]
        assert by_instance == by_mapping, mapping
    assert [s.id for s in query.list(SessionFilter(min_turns=1)).sessions] == [with_cwd.id]
