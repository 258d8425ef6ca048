"""The server's compaction methods: ``session.compact`` and the context read ``session.get`` includes.

``session.compact {sessionId, dryRun?}`` condenses a session's history now (all but
the newest message, as dsh's ``/compact``) with the server's model client, and
answers dsh's ``CompactionResult`` (:meth:`~dshpy.compaction.CompactionResult.to_dict`)
plus ``context``; with ``dryRun`` it answers the span it would condense
(:meth:`~dshpy.compaction.CompactionPlan.to_dict`) and ``context``, writing nothing
and needing no model.

While it runs the compaction occupies the session's worker, as a turn would:
prompts sent meanwhile queue behind it (dsh's ``compactNow`` reserves the agent's
next turn the same way) and ``session/wait`` waits for it. A session running or
queueing a turn is refused with -32002 ``{code: "busy"}`` — compaction needs an
idle session. Other refusals write nothing and answer -32000 with ``data: {error,
code, sessionId}``, ``code`` being the :class:`~dshpy.errors.CompactionError`'s
(``empty``: nothing to compact; ``unbalanced``, ``summary``, ``changed``, …); an
open compaction bracket is -32002 ``{code: "busy"}`` too.

``context`` is ``{used, window, ratio}``: the next request's estimated tokens, the
window, and their ratio ("62% used"); the window is the one the session's log
records, else the server's for its model.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Protocol

from dshpy.compaction import DEFAULT_ENGINE, DEFAULT_METER, CompactionResult, context_usage
from dshpy.errors import CompactionBusyError, CompactionError
from dshpy.log.session import Session

from .protocol import CONFLICT, DOMAIN_ERROR, Params, RpcError

if TYPE_CHECKING:
    from dshpy.agent import Agent
    from dshpy.storage.contract import SessionStore

    from .live import Live, LiveSessions

__all__ = ["CompactionHost", "compact_session", "context_of"]


class CompactionHost(Protocol):
    """What ``session.compact`` needs of the server's runtime (:class:`~dshpy.server.methods.Runtime`)."""

    store: SessionStore
    live: LiveSessions

    async def open_live(self, session_id: str) -> Live:
        """The stored session, held live."""
        ...

    def agent_of(self, live: Live) -> Agent:
        """The session's agent (its model client is the server's)."""
        ...

    def context_window(self) -> int | None:
        """The server's window, for sessions whose log names none."""
        ...

    def drain(self, live: Live) -> None:
        """Run the prompts queued behind the session's worker."""
        ...


def context_of(session: Session, fallback_window: int | None) -> dict[str, Any]:
    """``{used, window, ratio}`` of ``session`` (the log's window, else ``fallback_window``)."""
    window = DEFAULT_METER.window(session) or fallback_window
    return context_usage(session, window=window).to_dict()


def _busy(session_id: str, why: str) -> RpcError:
    data = {"sessionId": session_id, "code": "busy"}
    return RpcError(CONFLICT, f'session "{session_id}" {why}; compaction needs an idle session', data)


def _refusal(session_id: str, error: CompactionError) -> RpcError:
    if isinstance(error, CompactionBusyError):
        return _busy(session_id, "has an open compaction")
    data = {"error": type(error).__name__, "code": error.code, "sessionId": session_id}
    return RpcError(DOMAIN_ERROR, str(error), data)


def _dry_run(session: Session, fallback_window: int | None) -> dict[str, Any]:
    plan = DEFAULT_ENGINE.plan(session)
    return {"sessionId": session.id, "dryRun": True, **plan.to_dict(), "context": context_of(session, fallback_window)}


def _dry_run_stored(runtime: CompactionHost, session_id: str) -> dict[str, Any]:
    """A dry run on a session this server does not hold: a read-only view, in a worker thread."""
    session = runtime.store.inspect(session_id)
    try:
        return _dry_run(session, runtime.context_window())
    finally:
        session.close()


async def compact_session(runtime: CompactionHost, p: Params) -> Any:
    """``session.compact``: compact the session now, or (``dryRun``) say what would be compacted."""
    session_id = p.session_id()
    dry_run = p.boolean("dryRun")
    live = runtime.live.get(session_id)
    try:
        if dry_run and live is None:
            return await asyncio.to_thread(_dry_run_stored, runtime, session_id)
        if live is None:
            live = await runtime.open_live(session_id)
        if live.running or live.queue:
            raise _busy(session_id, "is running a turn")
        if dry_run:
            return _dry_run(live.session, runtime.context_window())
        agent = runtime.agent_of(live)  # -32006 without a model
        results: list[CompactionResult] = []

        async def work() -> None:
            results.append(await agent.compaction.compact_now())

        task = asyncio.get_running_loop().create_task(work(), name=f"dshpy-compact-{session_id}")
        live.worker = task  # the session is busy: prompts queue behind the compaction
        task.add_done_callback(lambda _done: runtime.drain(live))  # … and run once it is over
        await asyncio.shield(task)  # a caller that goes away does not stop the compaction
    except CompactionError as error:
        raise _refusal(session_id, error) from None
    context = context_of(live.session, agent.compaction.window)
    return {"sessionId": session_id, **results[0].to_dict(), "context": context}
