"""Session filters and the other request values a query checks before it reads anything.

Filters follow dsh's rules: the fields given all apply (AND), the values of one field
are alternatives (OR), and an empty list matches nothing. They come as a
:class:`SessionFilter` or as a plain mapping with the same keys (what the JSON-RPC
methods, the CLI and the agent's tools pass on); an unknown key, or a value of the
wrong kind, is ``SESSION_QUERY_INVALID_FILTER`` naming it. Times are epoch
milliseconds, aware :class:`~datetime.datetime`\\ s or ISO-8601 strings with a ``Z``
or an offset (a time without a zone is ambiguous, so it is refused).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from dshpy.core.ids import check_session_id
from dshpy.errors import DshError
from dshpy.projections.builtins.lifecycle import SESSION_STATES
from dshpy.query.errors import INVALID_FILTER, INVALID_LIMIT, InvalidQueryError
from dshpy.query.results import SessionSummary
from dshpy.storage.listing_page import PageRequest, PageSort, passes_header_filters

__all__ = ["SESSION_FILTER_KEYS", "SessionFilter", "check_limit", "parse_time", "parse_types"]


def _refuse(message: str) -> InvalidQueryError:
    return InvalidQueryError(INVALID_FILTER, message)


def parse_time(name: str, value: Any) -> int | None:
    """``value`` (ms, aware datetime, ISO-8601 with zone, or ``None``) as epoch milliseconds."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise _refuse(f"{name} must be a time, not a boolean")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise _refuse(f"{name} {value!r} is not an ISO-8601 time") from None
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise _refuse(f"{name} needs a time zone (Z or an offset such as +08:00): a local time is ambiguous")
        return int(value.timestamp() * 1000)
    raise _refuse(f"{name} must be epoch milliseconds, a datetime or an ISO-8601 string, not {type(value).__name__}")


def check_limit(value: Any, maximum: int, *, default: int) -> int:
    """A page size: an integer from 1 to ``maximum`` (``None``: ``default``)."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        raise InvalidQueryError(INVALID_LIMIT, f"limit must be an integer from 1 to {maximum}, not {value!r}")
    return value


def _strings(name: str, value: Any, *, nullable: bool = False) -> tuple[Any, ...] | None:
    """A string (or ``None`` where a missing value is meaningful) or a list of them, as a tuple."""
    if value is None and not nullable:
        return None
    items = [value] if value is None or isinstance(value, str) else value
    if not isinstance(items, Iterable) or isinstance(items, Mapping | bytes):
        raise _refuse(f"{name} must be a string or a list of strings, not {type(value).__name__}")
    out = tuple(items)
    for item in out:
        if not (isinstance(item, str) or (nullable and item is None)):
            raise _refuse(f"{name} holds {item!r}, which is not a string")
    return out


def parse_types(value: Any) -> tuple[str, ...] | None:
    """Event types to keep (a type or a list of them), as ``types`` of a log read or a search."""
    types = _strings("types", value)
    if types is not None and any(not kind for kind in types):
        raise _refuse("types must not hold an empty type")
    return types


def _session_ids(name: str, value: Any, *, nullable: bool = False) -> tuple[Any, ...] | None:
    ids = _strings(name, value, nullable=nullable)
    for session_id in ids or ():
        if session_id is not None:
            try:
                check_session_id(session_id)
            except DshError:
                raise _refuse(f"{name} holds {session_id!r}, which is not a session id") from None
    return ids


@dataclass(frozen=True, slots=True)
class SessionFilter:
    """Which sessions a listing or a search covers; a field left ``None`` does not filter.

    Build one directly or with :meth:`parse` (which the service always applies, so a
    mapping and an instance are checked alike).
    """

    ids: tuple[str, ...] | None = None
    exclude_ids: tuple[str, ...] | None = None
    """Sessions to leave out (the agent's own session, when it searches its past)."""
    cwd: tuple[str | None, ...] | None = None
    """Working directories, exactly; ``None`` among them matches sessions without one."""
    created_from: int | None = None
    """Created at or after (epoch ms)."""
    created_to: int | None = None
    """Created at or before (epoch ms)."""
    parent: tuple[str | None, ...] | None = None
    """Direct forks of these sessions; ``None`` among them matches sessions that are no fork."""
    lineage: str | None = None
    """This session and every fork made from it, recursively."""
    state: tuple[str, ...] | None = None
    """Lifecycle states (``created``, ``active``, ``paused``, ``completed``, ``failed``, ``archived``)."""
    title: str | None = None
    """Text the title contains (case-insensitive)."""
    model: tuple[str, ...] | None = None
    """Models the session called (case-insensitive, exact names)."""
    min_turns: int | None = None
    """At least this many turns."""

    @classmethod
    def parse(cls, value: SessionFilter | Mapping[str, Any] | None) -> SessionFilter:
        """A checked filter from a mapping with these keys, an instance, or ``None`` (no filter)."""
        if value is None:
            return cls()
        if isinstance(value, SessionFilter):
            # only the fields that filter: a present ``cwd``/``parent`` key of None would mean "has none"
            fields = (f.name for f in dataclasses.fields(cls))
            value = {name: getattr(value, name) for name in fields if getattr(value, name) is not None}
        if not isinstance(value, Mapping):
            raise _refuse(f"filters must be a mapping or a SessionFilter, not {type(value).__name__}")
        unknown = sorted(str(key) for key in value if key not in SESSION_FILTER_KEYS)
        if unknown:
            raise _refuse(f"unknown filter {unknown[0]!r} (known: {', '.join(SESSION_FILTER_KEYS)})")
        states = _strings("state", value.get("state"))
        for state in states or ():
            if state not in SESSION_STATES:
                raise _refuse(f"state {state!r} is not a session state (one of {', '.join(SESSION_STATES)})")
        title, lineage, min_turns = value.get("title"), value.get("lineage"), value.get("min_turns")
        if title is not None and not isinstance(title, str):
            raise _refuse(f"title must be a string, not {type(title).__name__}")
        if min_turns is not None and (isinstance(min_turns, bool) or not isinstance(min_turns, int) or min_turns < 0):
            raise _refuse(f"min_turns must be a non-negative integer, not {min_turns!r}")
        lineages = _session_ids("lineage", lineage)
        if lineages is not None and len(lineages) != 1:
            raise _refuse("lineage must name one session")
        return cls(
            ids=_session_ids("ids", value.get("ids")),
            exclude_ids=_session_ids("exclude_ids", value.get("exclude_ids")),
            cwd=_strings("cwd", value["cwd"], nullable=True) if "cwd" in value else None,
            created_from=parse_time("created_from", value.get("created_from")),
            created_to=parse_time("created_to", value.get("created_to")),
            parent=_session_ids("parent", value["parent"], nullable=True) if "parent" in value else None,
            lineage=None if lineages is None else lineages[0],
            state=states,
            title=title,
            model=_strings("model", value.get("model")),
            min_turns=min_turns,
        )

    @property
    def empty(self) -> bool:
        """Whether it lets every session through."""
        return self == SessionFilter()

    @property
    def needs_projections(self) -> bool:
        """Whether it reads projections (state, title, model, turns), not only the stored headers."""
        return self.state is not None or self.title is not None or self.model is not None or self.min_turns is not None

    def to_json(self) -> dict[str, Any]:
        """The fields that filter, as JSON (a cursor's request fingerprint)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) is not None}

    def page_request(
        self, *, sort: PageSort, descending: bool, after: tuple[int, str] | None, limit: int
    ) -> PageRequest:
        """The store's page request for this filter's header fields (the store cuts the page; see
        :meth:`~dshpy.storage.contract.SessionStore.list_page`)."""
        return PageRequest(
            ids=self.ids,
            exclude_ids=self.exclude_ids,
            cwd=self.cwd,
            created_from=self.created_from,
            created_to=self.created_to,
            parent=self.parent,
            sort=sort,
            descending=descending,
            after=after,
            limit=limit,
        )

    def matches(self, summary: SessionSummary, lineage: frozenset[str] | None) -> bool:
        """Whether ``summary`` passes; ``lineage`` is the set :attr:`lineage` names (resolved by the caller)."""
        if not passes_header_filters(self, summary.info):
            return False
        if lineage is not None and summary.info.id not in lineage:
            return False
        return not self.needs_projections or self._projections_match(summary)

    def _projections_match(self, summary: SessionSummary) -> bool:
        if summary.error is not None:
            return False
        if self.state is not None and summary.state not in self.state:
            return False
        if self.title is not None and (summary.title is None or self.title.casefold() not in summary.title.casefold()):
            return False
        if self.model is not None:
            wanted = {model.casefold() for model in self.model}
            if not any(model.casefold() in wanted for model in summary.models):
                return False
        return self.min_turns is None or (summary.turns or 0) >= self.min_turns


SESSION_FILTER_KEYS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(SessionFilter))
"""The keys a filter mapping may hold."""
