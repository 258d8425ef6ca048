"""``dshpy sessions compact ID [--dry-run]``: condense a stored session's history now.

Everything but the newest message (and the system prompt) becomes one checkpoint
holding a summary, as dsh's ``/compact`` does; the log keeps what it replaces. The
summary is asked of the session's own model (the route of its latest request;
``--model``, the profile and ``DEEPSEEK_*`` as for ``run`` otherwise), so a key is
needed; ``--dry-run`` needs none: it reports the span it would condense, the
summary call it would make and how full the context is, and writes nothing.

The session is opened for writing (a crashed turn is closed first, as by
``repair``); one a running agent holds is refused. Refusals exit 1 and write
nothing: an empty session or one whose only message must be kept ("No
compactable history yet"), an open compaction, a summary the model could not
write or that would not be smaller.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from typing import Any

import click

from dshpy.compaction import DEFAULT_ENGINE
from dshpy.compaction.meter import context_usage
from dshpy.errors import CompactionError, NothingToCompactError
from dshpy.log.continuation import append_resume_marker
from dshpy.log.session import Session

from . import render
from .app import AppState, CliError, common_options, emit_json, pass_state
from .model_options import model_timeout_options
from .sessions import session_id_argument

__all__ = ["compact"]


def _refused(error: CompactionError) -> CliError:
    if isinstance(error, NothingToCompactError):
        return CliError(f"No compactable history yet: {error}")
    return CliError(f"compaction refused ({error.code}): {error}")


def _dry_run(state: AppState, session: Session) -> None:
    context = context_usage(session).to_dict()
    try:
        plan = DEFAULT_ENGINE.plan(session)
    except CompactionError as error:
        raise _refused(error) from None
    report = plan.to_dict()
    if state.json:
        emit_json({"sessionId": session.id, "dryRun": True, **report, "context": context})
        return
    request = report["summaryRequest"]
    click.echo(
        f"{session.id}: would compact {len(plan.span.seqs)} history items (seqs {plan.span.start_seq}–"
        f"{plan.span.end_seq}, ~{plan.span.token_count:,} tokens) with one call to "
        f"{request['provider']}/{request['model']}"
    )
    click.echo(f"context: {render.context_text(context)}")


@dataclass(frozen=True, slots=True)
class _Route:
    """The model flags: where the summary is asked for."""

    model: str | None
    base_url: str | None
    profile: str
    context_window: int | None
    timeouts: tuple[float | None, float | None, float | None]


def _compact(state: AppState, session: Session, route: _Route) -> None:
    from dshpy.agent.compaction import AgentCompaction
    from dshpy.llm.client import API_KEY_HINT, ChatClient, ModelConfig, ModelConfigError
    from dshpy.sdk.model_settings import load_model_settings
    from dshpy.sdk.profiles import ProfileError, load_profile

    if session.lifecycle.compaction is not None:
        append_resume_marker(session)  # a bracket a dead process left open: dsh's marker makes it stale
    try:
        planned = DEFAULT_ENGINE.plan(session)  # refusals that need no model come before the key check
    except CompactionError as error:
        raise _refused(error) from None
    try:
        profile = load_profile(route.profile)
        connect, read, total = route.timeouts
        config = ModelConfig.from_env(
            base_url=route.base_url or profile.base_url,
            model=route.model or planned.request.model or profile.model,
            timeouts=profile.timeouts(connect=connect, read=read, total=total),
        )
        window = load_model_settings().context_window(config.model, route.context_window)
        config = replace(config, context_window=window)
    except (ProfileError, ModelConfigError) as error:
        raise CliError(str(error)) from None
    if not config.api_key:
        raise CliError(f"no API key: {API_KEY_HINT}")

    async def run() -> Any:
        async with ChatClient(config) as client:
            return await AgentCompaction(session, client).compact_now()

    try:
        result = asyncio.run(run())
    except CompactionError as error:
        raise _refused(error) from None
    context = context_usage(session, window=route.context_window).to_dict()  # the log's window unless overridden
    if state.json:
        emit_json({"sessionId": session.id, **result.to_dict(), "context": context})
        return
    click.echo(
        f"{session.id}: compacted {len(result.shadowed_seqs)} history items (~{result.shadowed_token_count:,} "
        f"tokens) into a ~{result.checkpoint_token_count:,}-token checkpoint (seqs {result.start_seq}–"
        f"{result.end_seq})"
    )
    click.echo(f"context: {render.context_text(context)}")


@click.command("compact")
@session_id_argument
@click.option("--dry-run", is_flag=True, help="Only show what would be condensed and how full the context is.")
@click.option("--model", help="Model for the summary (default: the session's, else as for `run`).")
@click.option("--base-url", metavar="URL", help="OpenAI-compatible API base URL (default: $DEEPSEEK_BASE_URL).")
@click.option("--profile", default="default", show_default=True, help="Profile in $DSHPY_HOME/config.toml.")
@click.option("--context-window", type=click.IntRange(min=1), metavar="TOKENS", help="The model's context window.")
@model_timeout_options
@common_options
@pass_state
def compact(
    state: AppState,
    session_id: str,
    dry_run: bool,
    model: str | None,
    base_url: str | None,
    profile: str,
    context_window: int | None,
    connect_timeout: float | None,
    read_timeout: float | None,
    total_timeout: float | None,
) -> None:
    """Condense a session's history (all but the newest message) into one summary the model sees instead.

    The log keeps everything: the summary replaces the span on the surface only. --dry-run writes nothing.
    """
    store = state.open_store(create=False)
    if dry_run:
        with store.inspect(session_id) as session:
            _dry_run(state, session)
        return
    route = _Route(model, base_url, profile, context_window, (connect_timeout, read_timeout, total_timeout))
    with store.open(session_id) as session:
        _compact(state, session, route)
