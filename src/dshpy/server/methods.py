"""The server's methods: dsh's SDK runtime protocol plus dshpy's ``session.*`` methods.

One :class:`Runtime` serves one store on one asyncio event loop, whatever the
transport. Every session it writes to is held live (single writer) with one
:class:`~dshpy.agent.Agent`; prompts queue per session and run one turn at a time
in a background task, so a long turn never blocks other requests or sessions.
Every appended event is published as ``session.event``; a session's worker going
busy/idle as ``session.status``; forks as ``subagent.started``; the store's session
lifecycle points as the seed names them (:mod:`~dshpy.server.session_points`).

With telemetry on, a request's W3C trace context (``params._meta.traceparent``, or the
HTTP ``traceparent`` header) is current while its method runs and travels with a
queued prompt, so the turn it starts is a child of the client's span
(:mod:`dshpy.telemetry.propagation`).

Live sessions and queued prompts are bounded (:mod:`~dshpy.server.live`,
:mod:`~dshpy.server.limits`): idle sessions are closed and reopen on demand.
Store reads and derivations that grow with a log (``session.get``, ``session.events``,
``session.list``, opening, creating, forking, deleting) run in worker threads, so a
request on a huge session never stalls the event loop, and with it every other
client. The loop thread stays the only one that appends to a live session; a worker
reads a live session only through its immutable event snapshot and its projection
runner (which is safe to read while another thread appends), never its message cache.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from itertools import islice
from typing import Any

from dshpy.agent import Agent, ChunkUpdate, EventUpdate, TurnResult
from dshpy.agent.builtin import builtin_tools
from dshpy.agent.jobs import jobs_of
from dshpy.agent.memory_tools import MemoryScope, memory_tools
from dshpy.agent.permissions import Permissions, record_permissions
from dshpy.agent.runtime_context import permission_sections
from dshpy.agent.system_prompt import system_prompt_for
from dshpy.agent.tools import Tool
from dshpy.core.events import SessionEvent
from dshpy.llm.client import DEFAULT_MODEL, ModelConfig, ModelConfigError, ModelTimeouts
from dshpy.llm.protocol import ModelClient, make_client
from dshpy.log.continuation import append_resume_marker
from dshpy.log.records import user_message
from dshpy.log.session import Session
from dshpy.plugins import PluginHost
from dshpy.query import SessionQuery
from dshpy.sdk.model_settings import ModelSettings
from dshpy.storage.contract import SessionStore
from dshpy.telemetry import captured_context, remote_parent, within_context

from . import query_methods
from .assistant_stream import AssistantStreams
from .compaction import compact_session, context_of
from .hub import Hub, Peer
from .limits import ServerLimits
from .live import Live, LiveSessions, Queued
from .protocol import (
    CONFLICT,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    MODEL_NOT_CONFIGURED,
    SESSION_NOT_FOUND,
    FrameError,
    Params,
    RpcError,
    error_frame,
    parse_frame,
    result_frame,
    rpc_error_of,
)
from .sdk_gate import SdkGate
from .session_points import SessionPointRelay

__all__ = ["SERVER_NAME", "Runtime", "ServerLimits", "ServerSettings"]

log = logging.getLogger("dshpy.server")
SERVER_NAME = "dshpy"
PROVIDERS = frozenset({"deepseek-official", "deepseek", "openai", "openai-compatible"})
MAX_EVENTS_PAGE = 10_000


@dataclass(frozen=True, slots=True)
class ServerSettings:
    """Model and agent options (from the command line / profile; ``initialize`` may override)."""

    model: str | None = None
    provider: str | None = None
    """``deepseek-official``: DeepSeek's Anthropic-format Messages API (dsh's); otherwise OpenAI-compatible chat."""
    base_url: str | None = None
    max_tokens: int | None = None
    reasoning_effort: str | None = None
    system_prompt: str | None = None
    max_steps: int = 25
    cwd: str = field(default_factory=os.getcwd)
    timeouts: ModelTimeouts = field(default_factory=ModelTimeouts)
    context_window: int | None = None
    """``--context-window``: overrides the config file's window for every model."""
    auto_compact: bool = True
    model_settings: ModelSettings = field(default_factory=ModelSettings)
    """``config.toml``'s ``[models."…"]`` windows."""
    tools: tuple[str, ...] = ()
    """The built-in tools each session's agent gets (``dshpy serve`` / ``dshpy-runtime``: all of them)."""
    permissions: Permissions = field(default_factory=Permissions)
    """What those tools may change; nobody answers approvals here, so escalations fail closed."""
    sdk_semantics: bool = False
    """dsh's SDK runtime rules for dsh's methods (``dshpy-runtime`` sets it): see :class:`SdkGate`."""
    dsh_records: bool = False
    """Write dsh's runtime-context snapshot and fallback ``session/title`` as its runtime does (``dshpy-runtime``)."""
    session_log_upload: bool = False
    """Send the session log with each Messages API request and log DeepSeek's acceptance, as dsh does."""
    memory: MemoryScope | None = None
    """What the agents' ``session_search``/``session_read`` tools see (``cwd`` or ``all``); ``None``: no tools."""
    vectors: str | None = None
    """The file ``session.search`` keeps its semantic vectors in (``None``: in memory)."""


def _text_size(blocks: Iterable[dict[str, Any]]) -> int:
    return sum(len(str(block.get("text", "")).encode()) for block in blocks)


def _close_quietly(session: Session) -> None:
    try:
        session.close()
    except Exception:
        log.exception("closing %s failed", session.id)


def _current_cwd(session: Session) -> str | None:
    for event in reversed(session.events):
        if event.type == "working-directory/change" and isinstance(event.data, dict):
            cwd = event.data.get("cwd")
            if isinstance(cwd, str):
                return cwd
    return session.header.cwd


def _page(source: Iterable[SessionEvent], from_seq: int, limit: int, wanted: frozenset[str] | None) -> dict[str, Any]:
    """One ``session.events`` page (in a worker thread: reading and encoding grow with the page)."""
    if wanted is not None:
        source = (event for event in source if event.type in wanted)
    page = list(islice(source, limit + 1))
    more = len(page) > limit
    page = page[:limit]
    next_seq = page[-1].seq + 1 if page else from_seq
    return {"events": [event.to_wire() for event in page], "nextSeq": next_seq, "more": more}


def _snapshot(session: Session) -> Any:
    from dshpy.projections import snapshot

    return snapshot(session)


Handler = Callable[[Params, Peer | None], Awaitable[Any]]


class Runtime:
    """Sessions, agents and the method table of one server."""

    def __init__(
        self,
        store: SessionStore,
        settings: ServerSettings | None = None,
        hub: Hub | None = None,
        limits: ServerLimits | None = None,
        plugins: PluginHost | None = None,
    ) -> None:
        self.store = store
        self.plugins = plugins
        """Plugins whose agent handlers every agent of this server gets (their session points are on ``store``)."""
        self.settings = settings or ServerSettings()
        self.hub = hub or Hub()
        self.streams = AssistantStreams()
        """Answers streaming in the turns this runtime runs, for live watchers (the web UI)."""
        self.live = LiveSessions(limits or ServerLimits(), self._close_live)
        self._opening: dict[str, asyncio.Future[None]] = {}
        self._sweeper: asyncio.TimerHandle | None = None
        self.closed = asyncio.Event()
        self._client: ModelClient | None = None
        self._client_model: tuple[str | None, str | None] | None = None  # (provider, model) the client was built for
        self._retiring: set[asyncio.Task[None]] = set()
        self.gate = SdkGate(store, enabled=self.settings.sdk_semantics)
        # dsh's SDK runtime sends no lifecycle points: the official SDK would hand them back as run notifications
        self._points = None if self.settings.sdk_semantics else SessionPointRelay(store, self._publish)
        self._query: SessionQuery | None = None
        """``session.search``'s service, kept so semantic search embeds only what is new (made on first use)."""
        self._tools: list[Tool] | None = None
        self._methods: dict[str, Handler] = {
            "initialize": self.initialize,
            "session/prompt": self.prompt,
            "session/resume": self.resume,
            "session/wait": self.wait,
            "session/working-directory/get": self.get_cwd,
            "session/working-directory/set": self.set_cwd,
            "shutdown": self.shutdown,
            "session.create": self.create,
            "session.list": self.list,
            "session.get": self.get,
            "session.send": self.send,
            "session.events": self.events,
            "session.fork": self.fork,
            "session.cancel": self.cancel,
            "session.delete": self.delete,
            "session.subscribe": self.subscribe,
            "session.unsubscribe": self.unsubscribe,
            "session.search": self.search,
            "session.compact": lambda p, _peer: compact_session(self, p),
        }

    # -- dispatch -----------------------------------------------------------------

    async def handle_frame(
        self, raw: bytes, peer: Peer | None, headers: Mapping[str, str] | None = None
    ) -> bytes | None:
        """Answer one frame (``None`` for a notification). Never raises for bad input.

        ``headers`` are the HTTP request's (their ``traceparent`` parents the work, as
        ``params._meta.traceparent`` does over any transport).
        """
        try:
            request = parse_frame(raw)
        except FrameError as error:
            return None if error.silent else error_frame(error.request_id, error.error)
        method = self._methods.get(request.method)
        try:
            if method is None:
                raise RpcError(METHOD_NOT_FOUND, self.gate.unknown_method_message(request.method))
            self.gate.check_initialized(request.method)
            with remote_parent(request.params, headers):
                result = await method(Params(request.params), peer)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            rpc = rpc_error_of(error)
            if rpc is None:
                log.exception("internal error in %s", request.method)
                rpc = RpcError(INTERNAL_ERROR, f"internal error: {type(error).__name__}: {error}")
            return None if request.is_notification else error_frame(request.id, rpc)
        return None if request.is_notification else result_frame(request.id, result)

    # -- live sessions ------------------------------------------------------------

    def _publish(self, method: str, params: dict[str, Any], *session_ids: str) -> None:
        try:
            self.hub.publish(method, params, session_ids)
        except Exception:  # a broken peer must not break the turn that appended
            log.exception("could not publish %s", method)

    def _on_event(self, session: Session, event: SessionEvent) -> None:
        self._publish("session.event", {"sessionId": session.id, "event": event.to_wire()}, session.id)

    def _adopt(self, session: Session, cwd: str | None) -> Live:
        """Hold ``session`` live (the caller holds a :meth:`LiveSessions.slot`) and publish its appends."""
        live = Live(session, cwd or self.settings.cwd)
        live.unsubscribe = session.subscribe(self._on_event)
        self.live.add(live)
        self._schedule_sweep()
        return live

    def _load(self, session_id: str, create: bool, marker: bool) -> tuple[Session, str | None]:
        """Open (repairing) or create a session; runs in a worker thread, before anyone else sees the session.

        ``marker``: append dsh's resume marker, as a write-open does; not when this server
        closed the session itself for room, so that a reopen leaves no trace in the log.
        """
        if self.store.exists(session_id):
            session = self.store.open(session_id)
            try:
                if marker:
                    append_resume_marker(session)  # as the agent would, but before publishing starts
                return session, _current_cwd(session)
            except BaseException:
                _close_quietly(session)
                raise
        if not create:
            raise RpcError(SESSION_NOT_FOUND, f'session "{session_id}" not found', {"sessionId": session_id})
        session = self.store.create(session_id=session_id, cwd=self.settings.cwd)
        return session, session.header.cwd

    async def _owned(self, call: Callable[[], tuple[Session, str | None]]) -> tuple[Session, str | None]:
        """Run ``call`` (which opens a session) in a thread; if the request is cancelled meanwhile, close it."""
        task = asyncio.ensure_future(asyncio.to_thread(call))
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:

            def orphaned(done: asyncio.Future[tuple[Session, str | None]]) -> None:
                if not done.cancelled() and done.exception() is None:
                    _close_quietly(done.result()[0])

            task.add_done_callback(orphaned)
            raise

    async def _open(self, session_id: str, *, create: bool) -> Live:
        """The live session ``session_id``: held already, reopened from the store, or (``create``) new."""
        while True:
            live = self.live.get(session_id)
            if live is not None:
                return live
            pending = self._opening.get(session_id)
            if pending is None:
                break
            await asyncio.shield(pending)  # another request is opening it: use what it opened, or try again
        opening = asyncio.get_running_loop().create_future()
        self._opening[session_id] = opening
        try:
            with self.live.slot():
                marker = not self.live.was_closed(session_id)
                session, cwd = await self._owned(lambda: self._load(session_id, create, marker))
                return self._adopt(session, cwd)
        finally:
            del self._opening[session_id]
            opening.set_result(None)

    def _schedule_sweep(self) -> None:
        if self._sweeper is None and not self.closed.is_set():
            delay = min(60.0, self.live.limits.idle_seconds / 2)
            self._sweeper = asyncio.get_running_loop().call_later(delay, self._sweep)

    def _sweep(self) -> None:
        self._sweeper = None
        try:
            self.live.sweep()
        except Exception:
            log.exception("closing idle sessions failed")
        if len(self.live):
            self._schedule_sweep()

    def _model_client(self) -> ModelClient:
        if self._client is None:
            settings = self.settings
            try:
                config = ModelConfig.from_env(
                    base_url=settings.base_url,
                    model=settings.model,
                    provider=settings.provider,
                    timeouts=settings.timeouts,
                )
                window = settings.model_settings.context_window(config.model, settings.context_window)
                if window is None:
                    window = config.context_window
                self._client = make_client(replace(config, context_window=window))
                self._client_model = (settings.provider, settings.model)
            except ModelConfigError as error:  # no API key, a malformed base URL: never worth retrying
                raise RpcError(MODEL_NOT_CONFIGURED, str(error)) from None
        return self._client

    def _adopt_model_change(self) -> None:
        """Swap in a client for the chosen model once no turn runs.

        ``initialize`` may change the model while a turn runs; that turn keeps the client
        it started with, and the first prompt after every turn has ended builds the new
        one (and new agents), so the choice is never silently ignored.
        """
        client = self._client
        if client is None or self._client_model == (self.settings.provider, self.settings.model):
            return
        if any(live.running or live.notice_pending for live in self.live):
            return  # a notice waits in an agent's inbox: adopt once its turn has claimed it
        self._client = None
        for live in self.live:
            live.agent = None
        task = asyncio.get_running_loop().create_task(client.close(), name="dshpy-retire-model-client")
        self._retiring.add(task)
        task.add_done_callback(self._retiring.discard)

    def _agent(self, live: Live) -> Agent:
        if live.agent is None:
            settings = self.settings
            live.agent = Agent(
                live.session,
                self._model_client(),
                system_prompt=system_prompt_for(live.session, settings.system_prompt),
                instructions_dir=live.cwd,
                max_steps=settings.max_steps,
                max_tokens=settings.max_tokens,
                reasoning_effort=settings.reasoning_effort,
                resume_marker=False,
                auto_compact=settings.auto_compact,
                tools=[
                    *(builtin_tools(settings.tools, permissions=settings.permissions) if settings.tools else ()),
                    *self._agent_tools(),
                ],
                runtime_context=(lambda: self._runtime_context(live)) if settings.dsh_records else None,
                fallback_title=settings.dsh_records,
                upload_session_log=settings.session_log_upload,
            )
            if settings.tools:  # dsh's permission/preset, sandbox/mode, approval/policy (when they change)
                record_permissions(live.session, settings.permissions)
            if self.plugins is not None:
                self.plugins.attach(live.agent)
        return live.agent

    def _runtime_context(self, live: Live) -> list[dict[str, str]]:
        """dsh's runtime-context sections for the session: its directory and the permissions it runs under."""
        permissions = self.settings.permissions
        return permission_sections(live.cwd, permissions.sandbox, permissions.policy)

    def _agent_tools(self) -> list[Tool]:
        """The tools every agent of this server gets: the memory tools when the settings ask for them."""
        if self._tools is None:
            scope = self.settings.memory
            self._tools = [] if scope is None else memory_tools(self.store, scope=scope)
        return self._tools

    # -- for the compaction methods (server/compaction.py) ------------------------

    async def open_live(self, session_id: str) -> Live:
        """The stored session ``session_id``, held live (-32001 if it does not exist)."""
        return await self._open(session_id, create=False)

    def agent_of(self, live: Live) -> Agent:
        """The session's agent (made on first use; -32006 without a model)."""
        self._adopt_model_change()
        return self._agent(live)

    def context_window(self) -> int | None:
        """The window of the model the server talks to (for sessions whose log names none)."""
        settings = self.settings
        model = settings.model or os.environ.get("DEEPSEEK_MODEL") or DEFAULT_MODEL
        return settings.model_settings.context_window(model, settings.context_window)

    def _enqueue(self, live: Live, item: Queued) -> None:
        self._adopt_model_change()
        self._agent(live)
        item.trace = captured_context()  # the request's trace context, for the turn that runs it later
        self.live.push(live, item)
        self.drain(live)

    def drain(self, live: Live) -> None:
        """Run the session's queued prompts, unless its worker is busy (a turn, or a compaction)."""
        if live.queue and not live.running:
            name = f"dshpy-serve-{live.session.id}"
            live.worker = asyncio.get_running_loop().create_task(self._work(live), name=name)

    async def _work(self, live: Live) -> None:
        sid = live.session.id
        announced = False

        def announce(update: EventUpdate) -> None:
            # dsh reports the agent busy after the prompt's inbox receipt: the official SDK
            # drops every notification before that receipt, a "running" status included.
            nonlocal announced
            if not announced:
                announced = True
                self._publish("session.status", {"sessionId": sid, "status": "running"}, sid)
            self.streams.event(sid, update.event)

        def relay(update: ChunkUpdate) -> None:
            self.streams.chunk(sid, update)

        try:
            while live.queue:
                item = self.live.pop(live)
                agent = self._agent(live)
                try:
                    with within_context(item.trace):
                        result = await agent.run(item.message, on_chunk=relay, on_event=announce)
                except asyncio.CancelledError:
                    if item.future is not None and not item.future.done():
                        item.future.cancel()
                    raise
                except Exception as error:
                    log.exception("turn on %s failed", sid)
                    live.failure = error
                    if item.future is not None and not item.future.done():
                        item.future.set_exception(error)
                    continue
                live.failure = None
                live.notice_pending = False  # the turn claimed it
                if item.future is not None and not item.future.done():
                    item.future.set_result(result)
        finally:
            self.streams.finish(sid)
            self._drop_queue(live, "the session stopped before this prompt ran")
            self.live.touch(live)  # idle from now
            self._publish("session.status", {"sessionId": sid, "status": "idle"}, sid)

    def _drop_queue(self, live: Live, why: str) -> int:
        dropped = 0
        while live.queue:
            item = self.live.pop(live)
            dropped += 1
            if item.future is not None and not item.future.done():
                item.future.set_exception(RpcError(CONFLICT, why, {"sessionId": live.session.id}))
        return dropped

    @staticmethod
    def _close_live(live: Live) -> None:
        """Stop publishing and close the session (flushing it, releasing its lock); it is out of the registry."""
        if live.unsubscribe is not None:
            live.unsubscribe()
        _close_quietly(live.session)

    def _release(self, live: Live) -> None:
        self.live.remove(live)
        self._close_live(live)

    async def close(self) -> None:
        """Cancel running turns (logged ``aborted``), close every session and the model client."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        lives = list(self.live)
        for live in lives:
            self._drop_queue(live, "the server is shutting down")
            if live.agent is not None:
                live.agent.cancel("disposed")
        workers = [live.worker for live in lives if live.worker is not None and not live.worker.done()]
        if workers:
            _done, pending = await asyncio.wait(workers, timeout=5)
            for task in pending:
                task.cancel()
        for live in lives:  # background jobs end with their runtime (their job/settled says teardown)
            with contextlib.suppress(Exception):
                await jobs_of(live.session).close()
        for live in lives:
            self._release(live)
        if self._client is not None:
            with contextlib.suppress(Exception):
                await self._client.close()
            self._client = None
        if self._points is not None:
            self._points.stop()  # after the sessions closed: their session/disposed went out
        self.closed.set()

    def _info(self, session: Session) -> dict[str, Any]:
        header = session.header
        return {
            "id": session.id,
            "sessionId": session.id,
            "createdAt": header.created_at,
            "cwd": header.cwd,
            "parentSession": header.parent_session,
            "eventCount": len(session),
        }

    # -- dsh's methods ------------------------------------------------------------

    async def initialize(self, p: Params, _peer: Peer | None) -> Any:
        """dsh's ``initialize``: adopt the client's ``cwd``, ``model``, ``reasoningEffort`` and ``maxTokens``.

        The settings apply to agents created from now on. A model change replaces the
        model client and drops every agent (each is rebuilt at its session's next
        prompt); while a turn runs, the client in use is kept until every turn has
        ended, and the first prompt after that adopts the new model. An unknown
        ``provider`` is -32602. Answers ``serverInfo`` (name, version).
        """
        cwd = p.string("cwd", required=False)
        provider = p.string("provider", required=False)
        model = p.string("model", required=False, max_length=200)
        effort = p.string("reasoningEffort", required=False, max_length=100)
        max_tokens = p.integer("maxTokens", minimum=1, maximum=2**53 - 1)
        if provider is not None and provider not in PROVIDERS:
            raise RpcError(INVALID_PARAMS, f'no adapter registered for provider "{provider}"', {"field": "provider"})
        changes: dict[str, Any] = {}
        if cwd is not None:
            changes["cwd"] = os.path.abspath(cwd)
        if model is not None and model != self.settings.model:
            changes["model"] = model
        if provider is not None and provider != self.settings.provider:
            changes["provider"] = provider
        if effort is not None:
            changes["reasoning_effort"] = effort
        if max_tokens is not None:
            changes["max_tokens"] = max_tokens
        self.gate.initialized = True
        if changes:
            self.settings = replace(self.settings, **changes)
            rebuild = "model" in changes or "provider" in changes
            if rebuild and self._client is not None and not any(x.running for x in self.live):
                await self._client.close()
                self._client = None
                for live in self.live:
                    live.agent = None
        from dshpy import __version__

        return {"serverInfo": {"name": SERVER_NAME, "version": __version__}}

    async def prompt(self, p: Params, _peer: Peer | None) -> Any:
        """dsh's ``session/prompt``: queue ``contentBlocks`` as a user message; answer at once with its ``messageId``.

        The session is created if it does not exist. The turn runs in the background
        after those already queued; ``session/wait`` waits for it. Over a queue limit
        the answer is -32007 and nothing is queued (nor created).
        """
        session_id = p.session_id()
        blocks = p.content_blocks()
        size = _text_size(blocks)
        self.live.check_bytes(size, session_id)  # before a new session is created for a prompt it would refuse
        self.gate.check_create(session_id)
        live = await self._open(session_id, create=True)
        self.gate.opened(session_id)
        message = user_message(blocks)
        self._enqueue(live, Queued(message, size))
        return {"messageId": message["id"]}

    async def resume(self, p: Params, _peer: Peer | None) -> Any:
        """dsh's ``session/resume``: hold a stored session live, repairing an interrupted tail; -32001 if absent."""
        session_id = p.session_id()
        self.gate.check_resume(session_id)
        await self._open(session_id, create=False)
        self.gate.opened(session_id)
        return {}

    async def wait(self, p: Params, _peer: Peer | None) -> Any:
        """dsh's ``session/wait``: return once the session's queued turns have all run.

        ``{}`` if the last turn succeeded, -32603 naming its error if it failed (also
        when the session was closed for room since); -32001 for a session this server
        never held.
        """
        session_id = p.session_id()
        live = self.live.get(session_id)
        if live is None:
            if not self.live.was_closed(session_id):
                raise RpcError(SESSION_NOT_FOUND, f"unknown SDK session: {session_id}", {"sessionId": session_id})
            failure = self.live.closed_failure(session_id)  # closed while idle: nothing is running
        else:
            while live.worker is not None and not live.worker.done():
                await asyncio.shield(live.worker)
            failure = live.failure
        if failure is not None:
            raise RpcError(INTERNAL_ERROR, f"the turn failed: {type(failure).__name__}: {failure}")
        return {}

    async def get_cwd(self, p: Params, _peer: Peer | None) -> Any:
        """dsh's ``session/working-directory/get``: the session's working directory.

        If that directory no longer exists, it falls back to the one the session was
        created in (or the server's), so a client is never handed a path it cannot use.
        """
        session_id = p.session_id()
        self.gate.check_create(session_id)
        live = await self._open(session_id, create=True)
        self.gate.opened(session_id)
        if not os.path.isdir(live.cwd):  # recover a vanished directory to the session's origin
            live.cwd = live.session.header.cwd or self.settings.cwd
        return {"cwd": live.cwd}

    async def set_cwd(self, p: Params, _peer: Peer | None) -> Any:
        """dsh's ``session/working-directory/set``: change the session's working directory.

        ``path`` is resolved against the current one (``~`` expanded) and must be an
        existing directory (-32602 naming ``path`` otherwise). A real change is logged as
        ``working-directory/change`` and, when a model is configured, announced to it at
        the next turn.
        """
        session_id = p.session_id()
        path = p.string("path", max_length=4096)
        self.gate.check_create(session_id)
        live = await self._open(session_id, create=True)
        self.gate.opened(session_id)
        target = os.path.abspath(os.path.join(live.cwd, os.path.expanduser(path)))
        if not os.path.isdir(target):
            raise RpcError(INVALID_PARAMS, f"invalid params: path {target!r} is not a directory", {"field": "path"})
        if target != live.cwd:
            before = live.cwd
            live.session.append("working-directory/change", {"cwd": target})
            live.cwd = target
            if live.agent is not None:
                live.agent.instructions_dir = target  # the new directory's AGENTS.md enters the next turn
            notice = f"The working directory changed from {before} to {target}."
            with contextlib.suppress(RpcError):  # no model configured: the change is logged, no notice
                self._agent(live).inject(notice, source={"kind": "working-directory"})
                live.notice_pending = True
            live.session.flush()
        return {"cwd": target}

    async def shutdown(self, _p: Params, _peer: Peer | None) -> Any:
        """``shutdown``: close the runtime (cancelling running turns) and answer ``{}``; the transport then stops."""
        await self.close()
        return {}

    # -- dshpy's methods ----------------------------------------------------------

    async def create(self, p: Params, _peer: Peer | None) -> Any:
        """``session.create``: a new session (``sessionId`` optional, else generated; ``cwd`` optional), held live.

        -32002 if the id is taken. Answers the session's info (``id``, ``createdAt``, ``cwd``, …).
        """
        session_id = p.session_id(required=False)
        cwd = p.string("cwd", required=False, max_length=4096)
        where = os.path.abspath(cwd) if cwd else self.settings.cwd

        def create() -> tuple[Session, str | None]:
            session = self.store.create(session_id=session_id, cwd=where)
            return session, session.header.cwd

        with self.live.slot():
            session, start = await self._owned(create)
            return self._info(self._adopt(session, start).session)

    async def list(self, p: Params, _peer: Peer | None) -> Any:
        """``session.list``: every session in the store, held live by this server or not.

        With ``filters``, ``sort``, ``descending``, ``limit`` or ``cursor`` it is the
        query service's paged listing instead (:func:`~dshpy.server.query_methods.list_page`).
        """
        if query_methods.is_paged_list(p):
            return await query_methods.list_page(self.store, p)
        infos = await asyncio.to_thread(self.store.list)
        return {"sessions": [info.to_dict() for info in infos]}

    async def search(self, p: Params, _peer: Peer | None) -> Any:
        """``session.search``: full-text search over the store (:func:`~dshpy.server.query_methods.search`)."""
        if self._query is None:
            vectors = None
            if self.settings.vectors is not None:
                from dshpy.query.vector_store import VectorStore

                vectors = VectorStore(self.settings.vectors)
            self._query = SessionQuery(self.store, vectors=vectors)
        return await query_methods.search(self.store, p, self._query)

    def _describe(self, session: Session, live: Live | None, messages: int, projections: bool) -> dict[str, Any]:
        result = self._info(session)
        result["header"] = session.header.to_record()
        result["running"] = live is not None and live.running
        result["openTurn"] = session.open_turn
        result["messages"] = messages
        result["context"] = context_of(session, self.context_window())
        if projections:
            result["projections"] = _snapshot(session)
        return result

    def _describe_stored(self, session_id: str, projections: bool) -> dict[str, Any]:
        """``session.get`` of a session this server does not hold: in a worker thread, on a private view."""
        session = self.store.inspect(session_id)
        try:
            return self._describe(session, None, len(session.derive_messages()), projections)
        finally:
            session.close()

    async def get(self, p: Params, _peer: Peer | None) -> Any:
        """``session.get``: header, event and message counts, ``running``, ``openTurn``, ``context`` (how full the
        context window is: ``{used, window, ratio}``) and the projection snapshot.

        ``projections: false`` skips the snapshot, the part whose cost grows with the
        log. A session this server does not hold is read without opening it for writing.
        """
        session_id = p.session_id()
        projections = p.boolean("projections", default=True)
        live = self.live.get(session_id)
        if live is None:
            return await asyncio.to_thread(self._describe_stored, session_id, projections)
        session = live.session
        messages = len(session.derive_messages())  # incremental, and its cache belongs to the loop thread
        result = self._describe(session, live, messages, False)
        if projections:
            result["projections"] = await asyncio.to_thread(_snapshot, session)
        return result

    async def send(self, p: Params, _peer: Peer | None) -> Any:
        """``session.send``: run one turn and answer when it has ended, with its text, finish reason and usage.

        Waits behind prompts already queued on the session. An unknown ``sessionId`` is
        -32001 (a typo must not start a session of its own): create sessions with
        ``session.create``, or pass ``create: true``. ``events: false`` leaves the turn's
        events out of the answer, for clients that already read them from the
        notification stream.
        """
        session_id = p.session_id()
        text = p.string("text", empty=True)
        with_events = p.boolean("events", default=True)
        size = len(text.encode())
        self.live.check_bytes(size, session_id)
        live = await self._open(session_id, create=p.boolean("create", default=False))
        message = user_message(text)
        future: asyncio.Future[TurnResult] = asyncio.get_running_loop().create_future()
        self._enqueue(live, Queued(message, size, future))
        result = await future
        answer: dict[str, Any] = {
            "sessionId": result.session_id,
            "messageId": message["id"],
            "turn": result.turn,
            "content": result.text,
            "finishReason": result.kind,
            "reason": result.reason,
            "usage": result.usage,
            "steps": result.steps,
        }
        if with_events:
            answer["events"] = [event.to_wire() for event in result.events]
        return answer

    async def events(self, p: Params, _peer: Peer | None) -> Any:
        """``session.events``: one page of stored events from ``fromSeq``, optionally only those of ``types``.

        ``limit`` defaults to 1000 (at most 10,000); page on with ``nextSeq`` while
        ``more`` is true. A live session's page is read from a snapshot: events appended
        meanwhile arrive on the next page, never half of them.
        """
        session_id = p.session_id()
        from_seq = p.integer("fromSeq") or 0
        limit = p.integer("limit", minimum=1, maximum=MAX_EVENTS_PAGE) or 1000
        types = p.str_list("types")
        wanted = None if types is None else frozenset(types)
        live = self.live.get(session_id)
        if live is not None:
            snapshot = live.session.events  # immutable: later appends do not show in it
            return await asyncio.to_thread(lambda: _page(snapshot[from_seq:], from_seq, limit, wanted))
        return await asyncio.to_thread(lambda: _page(self.store.read(session_id, from_seq), from_seq, limit, wanted))

    async def fork(self, p: Params, _peer: Peer | None) -> Any:
        """``session.fork``: a new child session with the parent's events up to ``boundary`` (default: all), held live.

        The parent's pending writes are flushed first, so the fork sees every event it
        has appended. Refusals are -32003 with the fork error's ``code``;
        ``closeOpenTurn`` lets a fork inside an open turn close it in the child. Publishes
        ``subagent.started`` to the subscribers of the parent and the child.
        """
        session_id = p.session_id()
        boundary = p.integer("boundary")
        child_id = p.session_id("childSessionId", required=False)
        close_open = p.boolean("closeOpenTurn")
        source = self.live.get(session_id)
        if source is not None:
            source.session.flush()

        def fork() -> tuple[Session, str | None]:
            child = self.store.fork(session_id, boundary, child_id=child_id, close_open_turn=close_open)
            return child, _current_cwd(child)

        with self.live.slot():
            child, cwd = await self._owned(fork)
            live = self._adopt(child, cwd)
        params = {"parentSessionId": session_id, "childSessionId": child.id}
        self._publish("subagent.started", params, session_id, child.id)
        return self._info(live.session)

    async def cancel(self, p: Params, _peer: Peer | None) -> Any:
        """``session.cancel``: cancel the running turn and drop the queued prompts.

        Answers ``{"cancelled", "dropped"}``; the dropped prompts' ``session.send`` calls
        get -32002. A session this server does not hold has nothing to cancel.
        """
        session_id = p.session_id()
        live = self.live.get(session_id)
        if live is None:
            return {"cancelled": False, "dropped": 0}
        dropped = self._drop_queue(live, "cancelled")
        cancelled = live.agent.cancel("user") if live.agent is not None else False
        return {"cancelled": cancelled, "dropped": dropped}

    async def delete(self, p: Params, _peer: Peer | None) -> Any:
        """``session.delete``: remove the session from the store.

        Refused with -32002 while a turn runs (cancel it first). A session whose history
        forks share is refused unless ``detachForks`` copies that history into them.
        """
        session_id = p.session_id()
        detach = p.boolean("detachForks")
        while (pending := self._opening.get(session_id)) is not None:
            await asyncio.shield(pending)
        live = self.live.get(session_id)
        if live is not None:
            if live.running:
                message = f'session "{session_id}" is running a turn; cancel it first'
                raise RpcError(CONFLICT, message, {"sessionId": session_id})
            self._release(live)
        self.live.forget(session_id)
        await asyncio.to_thread(self.store.delete, session_id, detach_forks=detach)
        return {}

    async def subscribe(self, p: Params, peer: Peer | None) -> Any:
        """``session.subscribe``: receive the notifications of ``sessionId`` (or, without it, of every session).

        Acts on the calling connection: over stdio that is the connection itself; over
        HTTP the request must name its event stream with ``X-Dshpy-Stream`` (-32602
        otherwise). Answers the subscription now in force.
        """
        session_id = p.session_id(required=False)
        if peer is None:
            raise RpcError(INVALID_PARAMS, "no notification stream to subscribe (open GET /events first)", {})
        peer.subscription.subscribe(session_id)
        return peer.subscription.to_json()

    async def unsubscribe(self, p: Params, peer: Peer | None) -> Any:
        """``session.unsubscribe``: stop the notifications of ``sessionId`` (or, without it, of all sessions).

        Same connection rules as :meth:`subscribe`; answers the subscription now in force.
        """
        session_id = p.session_id(required=False)
        if peer is None:
            raise RpcError(INVALID_PARAMS, "no notification stream to unsubscribe", {})
        peer.subscription.unsubscribe(session_id)
        return peer.subscription.to_json()
