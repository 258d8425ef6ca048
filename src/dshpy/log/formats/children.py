"""What a historical subagent child tells its parent's upgrade: one catalog fact per child.

v4 parents list their subagents in ``subagent/catalog`` facts; v3 parents did not
always record them. So the v3→v4 edge of a parent needs evidence from outside its
own log: for every subagent session naming it as parent, the child's id, creation
time, and its own ``subagent/descriptor`` (those after the child's inherited prefix).
:func:`child_source` extracts that from a child's events; :func:`catalog_fact` is the
fact the edge appends for a child the parent's catalog lacks: the descriptor's mode
and label when the child has exactly one known descriptor, else mode ``unknown``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from dshpy.log.formats.chain import FormatError, MigrationRefusedError
from dshpy.log.formats.released import count, is_object

__all__ = ["ChildSource", "catalog_fact", "check_catalog_fact", "child_source", "unavailable_child"]

ChildSource = dict[str, Any]
"""``{childId, childCreatedAt, descriptorCount, descriptor, sourcePath?}`` (dsh's historical child evidence)."""


def child_source(header: Mapping[str, Any], events: Iterable[Mapping[str, Any]], inherited: int) -> ChildSource:
    """The evidence a child session's header and events give its parent's upgrade.

    Refuses a session that is not a direct subagent child (dsh's ``historicalChildCatalogSource``).
    """
    if header.get("origin") != "subagent" or header.get("parentSession") is None:
        raise MigrationRefusedError("catalog migration requires a subagent child with a direct parent")
    descriptors = [
        event["data"] for event in events if event["type"] == "subagent/descriptor" and event["seq"] >= inherited
    ]
    source: ChildSource = {
        "childId": header["id"],
        "childCreatedAt": header["createdAt"],
        "descriptorCount": len(descriptors),
        "descriptor": descriptors[0] if descriptors else None,
    }
    catalog_fact(source)
    return source


def unavailable_child(child_id: str, created_at: int) -> ChildSource:
    """Evidence for a child whose log cannot be read: it is still catalogued, with mode ``unknown``."""
    return {"childId": child_id, "childCreatedAt": created_at, "descriptorCount": 0, "descriptor": None}


def subject(source: Mapping[str, Any]) -> str:
    path = source.get("sourcePath")
    return f"Session {source['childId']}" + (f" (raw log: {path})" if isinstance(path, str) else "")


def catalog_fact(source: Mapping[str, Any]) -> dict[str, Any] | None:
    """The catalog fact a child's own descriptor gives, or ``None`` without exactly one known descriptor."""
    descriptor = source.get("descriptor")
    known = is_object(descriptor) and descriptor.get("version") in (1, 2, 3)
    if source.get("descriptorCount") != 1 or not known:
        return None
    assert isinstance(descriptor, dict)
    if not isinstance(descriptor.get("provider"), str):
        raise MigrationRefusedError(f"{subject(source)} has an invalid subagent descriptor provider")
    if descriptor["version"] != 1 and descriptor.get("mode") not in ("continuable", "one-shot"):
        raise MigrationRefusedError(f"{subject(source)} has an invalid subagent descriptor mode")
    fact: dict[str, Any] = {
        "version": 0,
        "childId": source["childId"],
        "childCreatedAt": source["childCreatedAt"],
        "mode": "continuable" if descriptor["version"] == 1 else descriptor["mode"],
    }
    if "label" in descriptor:
        fact["label"] = descriptor["label"]
    return check_catalog_fact(fact, subject(source))


def check_catalog_fact(value: Any, label: str = "subagent/catalog") -> dict[str, Any]:
    """A catalog payload's membership fields are of a supported version (dsh's ``catalogFact``)."""
    valid = (
        is_object(value)
        and value.get("version") in (0, 1, 2)
        and type(value.get("version")) is int
        and isinstance(value.get("childId"), str)
        and value.get("mode") in ("continuable", "one-shot", "external", "unknown")
        and (value["version"] == 2) == (value["mode"] == "external")
        and not (value["version"] == 0 and value["mode"] == "unknown")
        and not (value["mode"] == "continuable" and not isinstance(value.get("label"), str))
        and ("label" not in value or isinstance(value["label"], str))
    )
    if not valid:
        raise FormatError(f"{label} requires a supported versioned catalog fact")
    count(value["childCreatedAt"], "catalog child creation time")
    return dict(value)


def checked_source(value: Any) -> ChildSource:
    """Supplied child evidence has the fields the edge reads (dsh's ``childCatalogSource``)."""
    if not is_object(value) or not isinstance(value.get("childId"), str) or "descriptor" not in value:
        raise MigrationRefusedError("catalog migration requires historical child identity and descriptor evidence")
    count(value.get("childCreatedAt"), "catalog child creation time")
    count(value.get("descriptorCount"), "child descriptor count")
    return value
