"""``dshpy sessions …``: list, show, log, stats, fork, repair, export, import, delete, archive, pause, resume.

(``compact`` lives in :mod:`dshpy.cli.compact`: it calls a model.)

Each command is a thin layer over the :class:`~dshpy.SessionStore` API; read-only
commands (``list``, ``show``, ``log``, ``stats``, ``export``) never create a store and
never append to a session (``show`` displays crash repair in memory, as
``store.inspect`` does). ``list`` and ``stats`` read projections from the store's
projection cache and may refresh cache rows they had to re-fold — derived data, never
the log.
"""

from __future__ import annotations

import fnmatch
import gc
import os
import tempfile
import time as _time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click
import orjson
from rich.text import Text

from dshpy.compaction.meter import context_usage
from dshpy.core.events import SessionEvent
from dshpy.core.ids import check_session_id
from dshpy.core.json import dumps, loads, thaw
from dshpy.core.vocabulary import KNOWN_EVENT_TYPES
from dshpy.errors import CorruptSessionError, EventError, LifecycleError
from dshpy.log.header import FORMAT_VERSION
from dshpy.log.invariants import validate
from dshpy.projections.builtins.lifecycle import LIFECYCLE, SESSION_STATE_TYPE, SessionState
from dshpy.projections.builtins.title import TITLE
from dshpy.projections.runner import state_of
from dshpy.storage.base import BaseStore
from dshpy.storage.contract import SessionStore

from . import render
from .app import AppState, CliError, DataError, common_options, emit_json, emit_json_line, pass_state
from .listing import list_filters, print_filtered_listing
from .prices import CONFIG_FILENAME, PRICES_ENV, PriceError, estimate_cost, load_prices
from .summary import LIST_KEYS, read_types, summary_of

__all__ = ["sessions"]

_CHUNK = 1 << 20


@click.group()
def sessions() -> None:
    """Inspect and manage stored sessions."""


def _session_id(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    """Check an id argument before any store is opened (``../x`` never reaches a backend)."""
    return check_session_id(value)


def _optional_session_id(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    return None if value is None else check_session_id(value)


session_id_argument = click.argument("session_id", metavar="ID", callback=_session_id)


# -- list ---------------------------------------------------------------------------------


@contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """Listing a big store builds tens of thousands of small acyclic objects (headers, parsed rows); the cyclic
    collector would rescan them all several times for nothing (~0.1 s over 10,000 sessions)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@sessions.command("list")
@click.option("--limit", type=click.IntRange(min=1), help="Show at most this many sessions (newest first).")
@click.option("--cwd", "cwds", metavar="DIR", multiple=True, help="Only sessions started in DIR (repeatable).")
@click.option("--state", "states", metavar="STATE", multiple=True, help="Only sessions in this lifecycle state.")
@click.option("--since", metavar="TIME", help="Only sessions created since TIME: a span back (2h, 7d) or ISO-8601.")
@click.option("--parent", "parents", metavar="ID", multiple=True, help="Only forks of session ID (repeatable).")
@click.option("--cursor", metavar="CURSOR", help="Continue a filtered listing after its page (its nextCursor).")
@common_options
@pass_state
def list_sessions(
    state: AppState,
    limit: int | None,
    cwds: tuple[str, ...],
    states: tuple[str, ...],
    since: str | None,
    parents: tuple[str, ...],
    cursor: str | None,
) -> None:
    """List sessions, newest activity first: id, created, cwd, turns, events, state, title, parent.

    Turns, title (the latest session/title, else the first prompt's) and lifecycle state come
    from the projection cache: sessions whose cache is current cost no event reads.

    With a filter or --cursor the listing is paged (newest created first, 50 a page unless
    --limit) and --json prints {"sessions": [...], "nextCursor": ...}.
    """
    filters = list_filters(cwds, states, since, parents)
    if filters or cursor is not None:
        print_filtered_listing(state, filters, limit=limit, cursor=cursor)
        return
    store = state.open_store(create=False)
    with _no_cyclic_gc():
        rows = [summary_of(listed) for listed in store.list_projections(LIST_KEYS, limit=limit)]
    if state.json:
        emit_json([row.to_dict() for row in rows])
    elif rows:
        state.print_table(render.sessions_table(rows, state.terminal_width))
    else:
        state.out.print(Text(f"no sessions in {state.url}", style="dim"))
    damaged = sum(row.error is not None for row in rows)
    if damaged:
        click.echo(f"Warning: {damaged} session(s) could not be read; `dshpy sessions show ID` says why.", err=True)
    old = sum(row.info.stored_version < FORMAT_VERSION for row in rows)
    if old and not state.json:
        click.echo(
            f"Note: {old} session(s) are stored in an older dsh format (vN shown); they read as v4, and "
            "`dshpy sessions upgrade --all` stores them so (the old files are kept).",
            err=True,
        )


# -- show -----------------------------------------------------------------------------------


@sessions.command("show")
@session_id_argument
@click.option("--full", is_flag=True, help="Do not shorten long texts, tool results and system prompts.")
@common_options
@pass_state
def show(state: AppState, session_id: str, full: bool) -> None:
    """Show a session's header, counts, how full its context is, and its transcript (the messages the model sees).

    An interrupted last turn is shown closed, as `repair` would close it, but nothing is written.
    """
    store = state.open_store(create=False)
    info = store.stat(session_id)
    session = store.inspect(session_id)
    messages = session.derive_messages()
    shown_title = state_of(session, TITLE)  # the one definition `list` and `stats` use too
    title, title_source = shown_title.title, shown_title.source
    turns = sum(event.type == "turn/start" for event in session.events)
    outcomes = render.turn_outcomes(session)
    stats: dict[str, Any] = {
        "events": info.event_count,
        "turns": turns,
        "messages": len(messages),
        "inherited": session.inherited_event_count,
        "forks": list(info.forks),
        "pendingRepair": session.pending_count,
    }
    context = context_usage(session).to_dict()
    if state.json:
        header = info.header.to_record()
        del header["type"]
        emit_json(
            {
                "session": {**info.to_dict(), **header},
                "title": title,
                "titleSource": title_source,
                "stats": stats,
                "turns": [outcome.to_dict() for outcome in outcomes],
                "context": context,
                "messages": [{"seq": message.seq, "message": message.to_dict()} for message in messages],
            }
        )
        return
    state.out.print(render.session_card(info, stats, title, context, title_source=title_source))
    state.out.print()
    render.transcript(state.out, session, full=full)


# -- log ------------------------------------------------------------------------------------


def _matcher(patterns: tuple[str, ...]) -> Callable[[str], bool]:
    if not patterns:
        return lambda _type: True
    exact = frozenset(patterns)
    return lambda kind: kind in exact or any(fnmatch.fnmatchcase(kind, pattern) for pattern in patterns)


def _check_types(types: tuple[str, ...]) -> None:
    """Refuse a ``--type`` that can match nothing: neither a dsh type, a pattern of some, nor a plugin's type."""
    for pattern in types:
        if pattern.startswith("plugin:") or any(fnmatch.fnmatchcase(kind, pattern) for kind in KNOWN_EVENT_TYPES):
            continue
        raise click.BadParameter(
            f"{pattern!r} is not an event type; known types: {', '.join(sorted(KNOWN_EVENT_TYPES))} "
            "(patterns such as 'turn/*' or 'tool/*' work, and plugin:NAMESPACE/NAME for plugin records)",
            param_hint="--type",
        )


def _events(store: SessionStore, session_id: str, from_seq: int, types: tuple[str, ...]) -> Iterator[SessionEvent]:
    if types and not any(char in pattern for pattern in types for char in "*?["):
        return read_types(store, session_id, types, from_seq)  # filtered by the store when it can
    matches = _matcher(types)
    return (event for event in store.read(session_id, from_seq) if matches(event.type))


def _follow(state: AppState, store: SessionStore, session_id: str, from_seq: int, types: tuple[str, ...]) -> None:
    """Print events as they are committed; Ctrl-C is the normal way out (exit 0)."""
    matches = _matcher(types)
    follower = store.follow(session_id, from_seq)
    try:
        for event in follower:
            if not matches(event.type):
                continue
            if state.json:
                emit_json_line(event.to_wire())
            else:
                state.out.print(render.event_line(event), soft_wrap=True)
    except KeyboardInterrupt:
        pass
    finally:
        close = getattr(follower, "close", None)
        if close is not None:
            close()  # ends a LISTEN connection now rather than at garbage collection


@sessions.command("log")
@session_id_argument
@click.option("--from", "from_seq", type=click.IntRange(min=0), default=0, show_default=True, help="First seq.")
@click.option(
    "--type",
    "types",
    multiple=True,
    metavar="TYPE",
    help="Only events of this type (repeatable; shell-style patterns such as 'turn/*' work).",
)
@click.option("-f", "--follow", is_flag=True, help="Keep printing events as any writer commits them, until Ctrl-C.")
@common_options
@pass_state
def log(state: AppState, session_id: str, from_seq: int, types: tuple[str, ...], follow: bool) -> None:
    """Print the stored events of a session, oldest first.

    With --json, each event is printed as its exact dsh v4 wire object, one per line (JSONL).
    With --follow, new events are printed as they are committed (by any process) until Ctrl-C.
    """
    _check_types(types)
    store = state.open_store(create=False)
    if follow:
        _follow(state, store, session_id, from_seq, types)
        return
    events = _events(store, session_id, from_seq, types)
    if state.json:
        for event in events:
            emit_json_line(event.to_wire())
        return
    for event in events:
        state.out.print(render.event_line(event), soft_wrap=True)


# -- stats ----------------------------------------------------------------------------------

_STATS_KEYS = ("usage", "stats", "lifecycle", "title")
_INTERNAL = {"stats": ("requestStart", "pendingTools"), "usage": ("route",), "lifecycle": ("turnOpen",)}
"""Bookkeeping fields of the built-in states that are not results (in-flight requests, open turns)."""


def _public(key: str, value: Any) -> Any:
    plain = thaw(value)
    if isinstance(plain, dict):
        for name in _INTERNAL.get(key, ()):
            plain.pop(name, None)
    return plain


PRICE_HINT = (
    f'no prices configured; add USD per 1M tokens to $DSHPY_HOME/{CONFIG_FILENAME}, e.g. [prices."deepseek-chat"] '
    f"input = 0.27, cache_read = 0.07, output = 1.10 — or set {PRICES_ENV} to the same as JSON"
)


@sessions.command("stats")
@session_id_argument
@common_options
@pass_state
def stats(state: AppState, session_id: str) -> None:
    """Show a session's token usage (failed attempts included, per model), with a cost estimate when prices are
    configured, its work and time counts, and its lifecycle state.

    Prices: USD per 1M tokens in $DSHPY_HOME/config.toml, e.g.

    \b
      [prices."deepseek-chat"]
      input = 0.27        # uncached input
      cache_read = 0.07   # default: input
      cache_write = 0.27  # default: input
      output = 1.10       # reasoning included

    or the same table as JSON in $DSHPY_PRICES. Without prices, only tokens are shown.
    """
    store = state.open_store(create=False)
    try:
        prices = load_prices()
    except PriceError as error:
        raise CliError(str(error)) from None
    snapshot = store.projections(session_id, _STATS_KEYS)
    values = {key: _public(key, value) for key, value in snapshot["values"].items()}
    cost = estimate_cost(values["usage"], prices) if prices else None
    title = values["title"]
    result = {
        "id": session_id,
        "asOfSeq": snapshot["as_of_seq"],
        "title": title.get("title"),
        "titleSource": title.get("source"),
        "lifecycle": values["lifecycle"],
        "stats": values["stats"],
        "usage": values["usage"],
        "cost": cost,
    }
    if state.json:
        emit_json(result)
        return
    state.print_table(render.stats_view(result, price_hint=None if prices else PRICE_HINT))


# -- lifecycle ------------------------------------------------------------------------------


def _record(seq: int, time: int, target: SessionState, reason: str | None) -> SessionEvent:
    data: dict[str, Any] = {"state": target}
    if reason is not None:
        data["reason"] = reason
    return SessionEvent(SESSION_STATE_TYPE, seq, time, data, ignorable=True)


def _move(state: AppState, session_id: str, target: SessionState, reason: str | None) -> None:
    """Append the lifecycle record(s) that take the session to ``target``, atomically, and report it."""
    store = state.open_store(create=False)
    session = store.open(session_id)  # repairs a crashed turn first, and attaches the lifecycle guard
    try:
        before = state_of(session, LIFECYCLE)
        steps: list[SessionState] = []
        if before.state != target:
            if target == "archived" and before.state == "created":
                raise LifecycleError(
                    f'session "{session_id}" never ran (it is created): there is nothing to archive — '
                    f"delete it with `dshpy sessions delete {session_id}`",
                    state=before.state,
                    target=target,
                )
            if target == "active" and before.state != "paused":
                raise LifecycleError(
                    f'session "{session_id}" is {before.state}, not paused: only a paused session can be resumed',
                    state=before.state,
                    target=target,
                )
            if target == "archived" and before.state in ("active", "paused"):
                steps.append("completed")  # archiving a live session completes it first
            steps.append(target)
        now = _time.time_ns() // 1_000_000
        records = [_record(len(session) + i, now, step, reason) for i, step in enumerate(steps)]
        appended = session.append_events(records)  # all or nothing: the guard checks each in order
        session.flush()
        after = state_of(session, LIFECYCLE)
    finally:
        session.close()
    if state.json:
        emit_json(
            {
                "id": session_id,
                "from": before.state,
                "to": after.state,
                "appended": [thaw(event.to_wire()) for event in appended],
                "lifecycle": _public("lifecycle", LIFECYCLE.dump(after)),
            }
        )
        return
    if not appended:
        click.echo(f"{session_id}: already {after.state}")
        return
    path = " → ".join([before.state, *steps])
    click.echo(f"{session_id}: {path}")


_reason_option = click.option("--reason", metavar="TEXT", help="Why (recorded with the state change).")


@sessions.command("archive")
@session_id_argument
@_reason_option
@common_options
@pass_state
def archive(state: AppState, session_id: str, reason: str | None) -> None:
    """Archive a session: it becomes read-only (every later append is refused; fork it to continue).

    A completed or failed session is archived as it is; an active or paused one is marked completed
    first (both records are appended together). Refused while a turn is running and for a session
    that never ran. Already archived: nothing is appended, exit 0.
    """
    _move(state, session_id, "archived", reason)


@sessions.command("pause")
@session_id_argument
@_reason_option
@common_options
@pass_state
def pause(state: AppState, session_id: str, reason: str | None) -> None:
    """Pause an active session: no turn may start until it is resumed. Already paused: exit 0."""
    _move(state, session_id, "paused", reason)


@sessions.command("resume")
@session_id_argument
@_reason_option
@common_options
@pass_state
def resume(state: AppState, session_id: str, reason: str | None) -> None:
    """Resume a paused session (it becomes active again). Already active: exit 0."""
    _move(state, session_id, "active", reason)


# -- fork -----------------------------------------------------------------------------------


@sessions.command("fork")
@session_id_argument
@click.option("--at", "boundary", type=click.IntRange(min=0), help="Last inherited seq (inclusive; default: the last).")
@click.option(
    "--close-open-turn",
    is_flag=True,
    help="Allow a boundary inside an open turn: the child gets dsh's `forked` closers.",
)
@common_options
@pass_state
def fork(state: AppState, session_id: str, boundary: int | None, close_open_turn: bool) -> None:
    """Fork a session into a new child that inherits its events up to --at; prints the child id.

    The parent is never written. Refusals exit 1 with dsh's code: SESSION_NOT_FOUND,
    INVALID_BOUNDARY, OPEN_TURN (use --close-open-turn), SESSION_ALREADY_EXISTS.
    """
    store = state.open_store(create=False)
    parent_length = store.stat(session_id).event_count if store.exists(session_id) else 0
    child = store.fork_stored(session_id, boundary, close_open_turn=close_open_turn)
    result = {
        "id": child.id,
        "parentSession": session_id,
        "inheritedEventCount": parent_length if boundary is None else boundary + 1,
        "eventCount": child.event_count,
    }
    if state.json:
        emit_json(result)
    else:
        click.echo(child.id)


# -- repair ---------------------------------------------------------------------------------


def _closer_description(event: SessionEvent) -> str:
    data: Any = event.data
    if event.type == "tool/result":
        error = data.get("error") or {}
        return f"tool/result for call {data['message'].get('toolCallId')} ({error.get('code', 'error')})"
    if event.type == "turn/end":
        return f"turn/end of turn {data.get('turn')} ({data.get('reason', {}).get('kind')})"
    if event.type == "step/end":
        return f"step/end of turn {data.get('turn')} step {data.get('step')}"
    return event.type


@sessions.command("repair")
@session_id_argument
@click.option("--dry-run", is_flag=True, help="Only show what would be appended (writes nothing).")
@common_options
@pass_state
def repair(state: AppState, session_id: str, dry_run: bool) -> None:
    """Close a turn a crash left open, by appending dsh's interrupted-turn closers (never rewriting).

    Unanswered tool calls get an error result (TOOL_OUTCOME_UNKNOWN if the call was logged as
    started, else TOOL_NOT_STARTED), then step/end and turn/end {kind: interrupted}.
    """
    store = state.open_store(create=False)
    # open() reads only the tail after the session's resume point: a repair checks every stored event first
    try:
        validate(store.read(session_id))
    except EventError as error:
        raise CorruptSessionError(f'stored session "{session_id}" failed validation: {error}') from error
    if dry_run:
        view = store.inspect(session_id)
        closers = list(view.events[len(view) - view.pending_count :])
    else:
        before = store.stat(session_id).event_count
        session = store.open(session_id)
        try:
            closers = list(session.events[before:])
        finally:
            session.close()
    if state.json:
        emit_json(
            {
                "id": session_id,
                "dryRun": dry_run,
                "appended": 0 if dry_run else len(closers),
                "events": [thaw(event.to_wire()) for event in closers],
            }
        )
        return
    if not closers:
        click.echo(f"{session_id}: nothing to repair (no interrupted turn)")
        return
    verb = "would append" if dry_run else "appended"
    click.echo(f"{session_id}: {verb} {len(closers)} closer event(s):")
    for event in closers:
        click.echo(f"  seq {event.seq}: {_closer_description(event)}")


# -- export / import ------------------------------------------------------------------------


def _write_chunks(stream: Any, payload: bytes, advance: Callable[[int], None]) -> None:
    view = memoryview(payload)
    for start in range(0, len(view), _CHUNK):
        chunk = view[start : start + _CHUNK]
        stream.write(chunk)
        advance(len(chunk))


def _write_file(path: Path, payload: bytes, advance: Callable[[int], None]) -> None:
    """Write ``payload`` to ``path`` atomically: a failed export never leaves a truncated file."""
    directory = path.parent if str(path.parent) else Path(".")
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as stream:
            _write_chunks(stream, payload, advance)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


@sessions.command("export")
@session_id_argument
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False, allow_dash=True), help="Write to FILE instead of stdout."
)
@common_options
@pass_state
def export(state: AppState, session_id: str, output: str | None) -> None:
    """Export a session as one self-contained JSON document (header, events, SHA-256)."""
    store = state.open_store(create=False)
    info = store.stat(session_id)
    to_stdout = output in (None, "-")
    enabled = render.show_progress(state.err, info.event_count, render.PROGRESS_MIN_EVENTS)
    with render.activity(state.err, enabled=enabled) as steps:
        with steps.step(f"reading {info.event_count:,} events"):
            document = store.export(session_id)
        payload = dumps(document)
        if to_stdout:
            with steps.step("writing to stdout", len(payload)) as advance, click.open_file("-", "wb") as stream:
                _write_chunks(stream, payload, advance)
                stream.write(b"\n")
                stream.flush()
        else:
            assert output is not None
            try:
                with steps.step(f"writing {output}", len(payload)) as advance:
                    _write_file(Path(output), payload, advance)
            except OSError as error:
                raise CliError(f"cannot write {output}: {error.strerror or error}") from None
    if to_stdout:
        return
    if state.json:
        emit_json(
            {
                "id": session_id,
                "path": str(output),
                "eventCount": len(document["events"]),
                "bytes": len(payload),
                "eventsSha256": document["eventsSha256"],
            }
        )
    else:
        click.echo(f"exported {session_id} ({len(document['events'])} events, {len(payload):,} bytes) to {output}")


def _read_input(path: str, advance: Callable[[int], None]) -> bytes:
    chunks: list[bytes] = []
    with click.open_file(path, "rb") as stream:
        while chunk := stream.read(_CHUNK):
            chunks.append(chunk)
            advance(len(chunk))
    return b"".join(chunks)


def _input_size(path: str) -> int:
    if path == "-":
        return 0
    try:
        return os.stat(path).st_size
    except OSError as error:
        raise CliError(f"cannot read {path}: {error.strerror or error}") from None


@sessions.command("import")
@click.argument("file", metavar="FILE", type=click.Path(dir_okay=False, allow_dash=True))
@click.option(
    "--id",
    "new_id",
    metavar="NEW_ID",
    callback=_optional_session_id,
    help="Store the session under this id instead of the exported one.",
)
@common_options
@pass_state
def import_(state: AppState, file: str, new_id: str | None) -> None:
    """Import a session exported by `dshpy sessions export` (FILE may be - for stdin).

    The digest and every event are verified first; on any mismatch nothing is stored (exit 2).
    """
    size = _input_size(file)
    enabled = render.show_progress(state.err, size, render.PROGRESS_MIN_BYTES)
    store = state.open_store(create=True)
    with render.activity(state.err, enabled=enabled) as steps:
        try:
            with steps.step(f"reading {file}", size or None) as advance:
                raw = _read_input(file, advance)
        except OSError as error:
            raise CliError(f"cannot read {file}: {error.strerror or error}") from None
        try:
            document = loads(raw)
        except orjson.JSONDecodeError as error:
            raise DataError(f"{file} is not a JSON document: {error}") from None
        count = len(document.get("events") or ()) if isinstance(document, dict) else 0
        with steps.step(f"verifying and storing {count:,} events"):
            info = store.import_session(document, session_id=new_id)
    if state.json:
        emit_json(info.to_dict())
    else:
        click.echo(info.id)


# -- delete ---------------------------------------------------------------------------------


@sessions.command("delete")
@session_id_argument
@click.option(
    "--detach-forks",
    is_flag=True,
    help="Copy the shared history into forks that read it, instead of refusing the delete.",
)
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@common_options
@pass_state
def delete(state: AppState, session_id: str, detach_forks: bool, yes: bool) -> None:
    """Delete a session and its events (refused while forks share its history, unless --detach-forks)."""
    store = state.open_store(create=False)
    info = store.stat(session_id)
    if not detach_forks and isinstance(store, BaseStore):  # refuse before asking, not after a "yes"
        sharing = store.forks_sharing(session_id)
        if sharing:
            raise CliError(
                f"session {session_id} has forks that share its history ({', '.join(sharing)}); delete them first "
                "or pass --detach-forks to copy the shared history into each fork"
            )
    if not yes:
        question = f"Delete session {session_id} ({info.event_count} events)? This cannot be undone"
        try:
            confirmed = click.confirm(question, default=False, err=True)
        except click.Abort:  # end of input or ^C: no answer is a no
            click.echo(err=True)
            confirmed = False
        if not confirmed:
            raise CliError(f"{session_id} not deleted (not confirmed; pass --yes to skip the question)")
    store.delete(session_id, detach_forks=detach_forks)
    if state.json:
        emit_json({"id": session_id, "deleted": True, "forks": list(info.forks)})
    else:
        click.echo(f"deleted {session_id}")
        if info.forks:
            click.echo(f"forks kept (now self-contained where they shared history): {', '.join(info.forks)}")
