"""What a projection is: a pure fold from the event log to one piece of state.

The log is the only source of truth (DESIGN.md §1), so every derived fact a caller
asks for — usage, title, lifecycle state — is a *projection*: ``init()`` gives the
state of an empty log and ``apply(state, event)`` the state after one more event.
Folding ``apply`` over a log from ``init()`` is the definition of the state; the
runner only makes that fold incremental and cacheable.

States are frozen pydantic models (:class:`ProjectionState`). One representation
everywhere buys three things: typed attributes for Python callers, equality for the
"incremental equals fresh fold" property, and a checked JSON form for the cache
(:meth:`ProjectionDefinition.dump` / :meth:`~ProjectionDefinition.load`, camelCase
keys like the rest of dsh's JSON). ``apply`` builds new states with the normal
constructor or :meth:`ProjectionState.evolve`, and returns the *same object* when an
event does not concern it: the runner detects change by identity (``is``), as dsh
does with ``Object.is``, so listeners hear only of real changes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel

from dshpy.core.events import SessionEvent
from dshpy.core.json import JsonValue, NotJsonError, freeze_json
from dshpy.errors import ProjectionError

__all__ = ["ProjectionDefinition", "ProjectionState", "S", "window"]


class ProjectionState(BaseModel):
    """Base of every projection state: immutable, strict about its fields, camelCase in JSON.

    Attributes are snake_case in Python (``state.open_turn_start_seq``) and camelCase
    on the wire (``openTurnStartSeq``), so a built-in's cached JSON reads like dsh's.
    Containers inside a state are never mutated in place; ``apply`` replaces them.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True)

    def evolve(self: S, **changes: Any) -> S:
        """A copy with ``changes`` applied, unchecked (like ``model_copy(update=...)``, at half its cost).

        ``apply`` runs for every committed event of a live session, so its copies are
        on the append path; pydantic's ``model_copy`` spends most of its time on
        generic bookkeeping (private attributes, ``copy.copy`` of each slot) that a
        projection state never has. Like ``model_copy``, the values are not
        validated: pass what the field's type says. Unknown names are refused.
        """
        cls = type(self)
        if not changes.keys() <= cls.__pydantic_fields__.keys():
            unknown = sorted(changes.keys() - cls.__pydantic_fields__.keys())
            raise AttributeError(f"{cls.__name__} has no field {', '.join(map(repr, unknown))}")
        new = object.__new__(cls)
        values = self.__dict__.copy()
        values.update(changes)
        _set(new, "__dict__", values)
        fields_set = self.__pydantic_fields_set__
        if not changes.keys() <= fields_set:  # else shared: pydantic copies this set before it mutates one
            fields_set = fields_set | changes.keys()
        _set(new, "__pydantic_fields_set__", fields_set)
        extra, private = self.__pydantic_extra__, self.__pydantic_private__
        _set(new, "__pydantic_extra__", None if extra is None else dict(extra))
        _set(new, "__pydantic_private__", None if private is None else dict(private))
        return new


S = TypeVar("S", bound=ProjectionState)

_set = object.__setattr__  # frozen models refuse normal attribute assignment, even on a fresh copy


def window(events: Sequence[SessionEvent], start: int, stop: int | None = None) -> Iterator[SessionEvent]:
    """``events[start:stop]`` by index, without copying: a session's event view copies the whole log to slice."""
    end = len(events) if stop is None else min(stop, len(events))
    for index in range(max(start, 0), end):
        yield events[index]


def _check_key(key: object) -> str:
    if not isinstance(key, str) or not key or key != key.strip():
        raise ProjectionError(f"projection key must be a non-empty string without surrounding spaces, got {key!r}")
    return key


@dataclass(frozen=True)
class ProjectionDefinition(Generic[S]):
    """A named, versioned, pure fold over session events (dsh's ``ProjectionDefinition``).

    ``apply`` must be pure and deterministic, and must return ``state`` itself for an
    event that does not change it. ``types``, when given, promises that every event
    of another type leaves the state unchanged; the runner then skips ``apply`` for
    those events, which keeps the per-append cost independent of how many
    projections ignore the event.

    ``state_schema`` is the state's own class, a :class:`ProjectionState` subclass:
    it validates cached JSON on :meth:`load`.

    ``check``, when given, is an admission rule: ``check(state, candidate)`` runs
    before a live session commits ``candidate`` (with the state as of the events
    before it) and raises :class:`~dshpy.errors.EventError` to refuse it. It must be
    consistent with ``apply``: an event ``check`` refuses is one ``apply`` treats as a
    no-op, so a log written without the guard still folds deterministically.

    ``apply_many``, when given, folds a run of events at once: ``apply_many(state,
    events)`` must equal applying ``apply`` to each event in turn (returning ``state``
    itself when none changed it). Folding is mostly done in runs — a reader catching up
    on what was appended since its last read, a cold open folding a whole log — and a
    run can keep its working values in plain Python variables and build the immutable
    state once at the end, where ``apply`` must build one per event. The built-ins
    define ``apply`` as ``apply_many`` over one event, so both paths share one body.

    Bump ``state_version`` whenever the meaning or shape of the state changes: cached
    states with another version are then discarded and re-folded from the log.
    """

    key: str
    state_version: int
    state_schema: type[S]
    init: Callable[[], S]
    apply: Callable[[S, SessionEvent], S]
    types: frozenset[str] | None = None
    check: Callable[[S, SessionEvent], None] | None = None
    apply_many: Callable[[S, Sequence[SessionEvent]], S] | None = None

    def __post_init__(self) -> None:
        _check_key(self.key)
        version = self.state_version
        if type(version) is not int or version < 0:
            raise ProjectionError(
                f'projection "{self.key}": state_version must be a non-negative integer, got {version!r}'
            )
        if not (isinstance(self.state_schema, type) and issubclass(self.state_schema, ProjectionState)):
            raise ProjectionError(f'projection "{self.key}": state_schema must be a ProjectionState subclass')
        if self.types is not None and not isinstance(self.types, frozenset):
            object.__setattr__(self, "types", frozenset(self.types))

    def concerns(self, event_type: str) -> bool:
        """Whether ``apply`` may change the state for an event of this type."""
        return self.types is None or event_type in self.types

    def fold(self, events: Iterable[SessionEvent], state: S | None = None) -> S:
        """The state after ``events``, starting from ``state`` (default: ``init()``).

        Events outside ``types`` are skipped, as the runner skips them; a cold reader
        (a store rebuilding a state without a live session) folds with this. Uses
        ``apply_many`` when the definition has one.
        """
        current = self.init() if state is None else state
        if self.apply_many is not None:
            return self.apply_many(current, events if isinstance(events, Sequence) else list(events))
        apply, types = self.apply, self.types
        for event in events:
            if types is None or event.type in types:
                current = apply(current, event)
        return current

    def dump(self, state: S) -> JsonValue:
        """``state`` as frozen JSON (camelCase keys): what snapshots show and caches store."""
        if not isinstance(state, self.state_schema):
            raise ProjectionError(
                f'projection "{self.key}": expected a {self.state_schema.__name__}, got {type(state).__name__}'
            )
        try:
            try:
                dumped = state.model_dump(mode="json", by_alias=True)
            except UnicodeEncodeError:
                # pydantic's JSON mode encodes dict keys as UTF-8, which a key holding a lone surrogate
                # (event data may) cannot be; Python mode copies them, and freeze_json checks the rest.
                dumped = state.model_dump(by_alias=True)
            return freeze_json(dumped)
        except NotJsonError as error:
            raise ProjectionError(f'projection "{self.key}": state is not lossless JSON: {error}') from None

    def load(self, value: JsonValue) -> S:
        """Validate JSON from :meth:`dump` (e.g. a cache row) back into a state.

        Raises :class:`~dshpy.errors.ProjectionError` when ``value`` does not match
        ``state_schema``; a caller holding a cache then re-folds from the log.
        """
        try:
            return self.state_schema.model_validate(value)
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "state"
            raise ProjectionError(
                f'projection "{self.key}" (state_version {self.state_version}): cached state does not '
                f"validate: {where}: {first['msg']}"
            ) from None

    def __repr__(self) -> str:
        return f"<ProjectionDefinition {self.key!r} v{self.state_version}>"
