"""The migration chain: adjacency, completeness, refusal of newer formats, in-memory upgrades."""

import pytest

import dshpy
from dshpy import FormatVersionError, Migration, MigrationChain


def _rename(old: str, new: str):
    def migrate_events(events, header):
        for event in events:
            yield {**event, "type": new} if event["type"] == old else event

    return migrate_events


def _bump(to: int):
    return lambda header: {**header, "version": to}


def _edge(n: int, *, to: int | None = None, events=None) -> Migration:
    return Migration(
        f"v{n}-to-v{n + 1}",
        n,
        n + 1 if to is None else to,
        _bump(n + 1 if to is None else to),
        events or (lambda events, header: events),
    )


def test_current_version_is_dsh_v4():
    assert dshpy.FORMAT_VERSION == 4
    assert dshpy.DEFAULT_CHAIN.current == 4


def test_chain_applies_edges_in_order_in_memory():
    chain = MigrationChain(
        3,
        [
            Migration("v1-to-v2", 1, 2, _bump(2), _rename("steering/message", "user/message")),
            Migration("v2-to-v3", 2, 3, _bump(3), _rename("compact/start", "compaction/start")),
        ],
    )
    header = {"type": "session", "version": 1, "id": "s"}
    events = [{"type": "steering/message", "seq": 0}, {"type": "compact/start", "seq": 1}, {"type": "x", "seq": 2}]
    new_header, upgraded = chain.upgrade(header, events, "s")
    assert new_header["version"] == 3
    assert [e["type"] for e in upgraded] == ["user/message", "compaction/start", "x"]
    assert header["version"] == 1 and events[0]["type"] == "steering/message"  # inputs untouched


def test_current_version_runs_no_edge():
    calls = []
    chain = MigrationChain(2, [Migration("v1-to-v2", 1, 2, _bump(2), lambda ev, h: calls.append(1) or ev)])
    _header, events = chain.upgrade({"version": 2}, [{"type": "a"}])
    assert list(events) == [{"type": "a"}] and calls == []
    assert chain.plan(2) == []


def test_newer_version_is_refused_with_upgrade_advice():
    with pytest.raises(FormatVersionError, match=r"v5.*newer harness.*upgrade dshpy"):
        dshpy.DEFAULT_CHAIN.plan(5, "abc")


def test_dsh_chain_plans_every_older_generation():
    assert [e.name.rsplit("-", 3)[-3:] for e in dshpy.DEFAULT_CHAIN.plan(0)] == [
        ["v0", "to", "v1"],
        ["v1", "to", "v2"],
        ["v2", "to", "v3"],
        ["v3", "to", "v4"],
    ]
    assert dshpy.DEFAULT_CHAIN.oldest == 0 and len(dshpy.DEFAULT_CHAIN.plan(3)) == 1


def test_older_version_without_path_is_refused():
    with pytest.raises(FormatVersionError, match="no upgrade path"):
        MigrationChain(4, [_edge(3)]).plan(2, "abc")
    chain = MigrationChain(4, [_edge(2), _edge(3)])
    assert [e.name for e in chain.plan(2)] == ["v2-to-v3", "v3-to-v4"]
    with pytest.raises(FormatVersionError, match="older than the oldest supported v2"):
        chain.plan(1)


def test_non_adjacent_edge_is_rejected():
    with pytest.raises(ValueError, match="adjacent"):
        MigrationChain(4, [_edge(2, to=4)])


def test_missing_edge_is_rejected():
    with pytest.raises(ValueError, match="v2->v3 is missing"):
        MigrationChain(4, [_edge(1), _edge(3)])


def test_duplicate_edge_is_rejected():
    with pytest.raises(ValueError, match="twice"):
        MigrationChain(4, [_edge(3), _edge(3)])


def test_edge_past_current_is_rejected():
    with pytest.raises(ValueError, match="past the current"):
        MigrationChain(3, [_edge(3)])


def test_edge_that_lies_about_its_header_version_is_caught():
    chain = MigrationChain(2, [Migration("bad", 1, 2, _bump(7), lambda ev, h: ev)])
    with pytest.raises(FormatVersionError, match="produced a v7 header"):
        chain.upgrade({"version": 1}, [])


@pytest.mark.parametrize("version", [None, "4", -1, 4.0, True])
def test_header_without_valid_version_is_refused(version):
    with pytest.raises(FormatVersionError, match="no valid format version"):
        dshpy.DEFAULT_CHAIN.upgrade({"version": version}, [])
