"""The server's methods: dsh's SDK runtime protocol plus dshpy's ``session.*`` methods.

One :class:`Runtime` serves one store on one asyncio event loop, whatever the
transport. Every session it writes to is held live (single writer) with one
:class:`~dshpy.agent.Agent`; prompts queue per session and run one turn at a time
in a background task, so a long turn never blocks other requests or sessions.
Every appended event is published as ``session.event``; a session's worker going
busy/idle as ``session.status``; forks as ``subagent.started``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from itertools import islice
from typing import Any

from dshpy.agent import Agent, TurnResult
from dshpy.agent.prologue import system_head
from dshpy.agent.records import user_message
from dshpy.core.events import SessionEvent
from dshpy.llm.client import ChatClient, ModelConfig, ModelConfigError, ModelTimeouts
from dshpy.log.session import Session
from dshpy.storage.base import BaseStore

from .hub import Hub, Peer
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

__all__ = ["SERVER_NAME", "Runtime", "ServerSettings"]

log = logging.getLogger("dshpy.server")
SERVER_NAME = "dshpy"
PROVIDERS = frozenset({"deepseek-official", "deepseek", "openai", "openai-compatible"})
MAX_EVENTS_PAGE = 10_000


@dataclass(frozen=True, slots=True)
class ServerSettings:
    """Model and agent options (from the command line / profile; ``initialize`` may override)."""

    model: str | None = None
    base_url: str | None = None
    max_tokens: int | None = None
    reasoning_effort: str | None = None
    system_prompt: str | None = None
    max_steps: int = 25
    cwd: str = field(default_factory=os.getcwd)
    timeouts: ModelTimeouts = field(default_factory=ModelTimeouts)


@dataclass(slots=True)
class _Queued:
    message: dict[str, Any]
    future: asyncio.Future[TurnResult] | None = None


@dataclass(slots=True)
class _Live:
    session: Session
    cwd: str
    agent: Agent | None = None
    queue: deque[_Queued] = field(default_factory=deque)
    worker: asyncio.Task[None] | None = None
    failure: BaseException | None = None
    unsubscribe: Callable[[], None] | None = None

    @property
    def running(self) -> bool:
        return self.worker is not None and not self.worker.done()


def _current_cwd(session: Session) -> str | None:
    for event in reversed(session.events):
        if event.type == "working-directory/change" and isinstance(event.data, dict):
            cwd = event.data.get("cwd")
            if isinstance(cwd, str):
                return cwd
    return session.header.cwd


Handler = Callable[[Params, Peer | None], Awaitable[Any]]


class Runtime:
    """Sessions, agents and the method table of one server."""

    def __init__(self, store: BaseStore, settings: ServerSettings | None = None, hub: Hub | None = None) -> None:
        self.store = store
        self.settings = settings or ServerSettings()
        self.hub = hub or Hub()
        self.sessions: dict[str, _Live] = {}
        self.closed = asyncio.Event()
        self._client: ChatClient | None = None
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
        }

    # -- dispatch -----------------------------------------------------------------

    async def handle_frame(self, raw: bytes, peer: Peer | None) -> bytes | None:
        """Answer one frame (``None`` for a notification). Never raises for bad input."""
        try:
            request = parse_frame(raw)
        except FrameError as error:
            return None if error.silent else error_frame(error.request_id, error.error)
        method = self._methods.get(request.method)
        try:
            if method is None:
                raise RpcError(METHOD_NOT_FOUND, f"method not found: {request.method}")
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

    def _adopt(self, session: Session, *, resume: bool) -> _Live:
        if resume and len(session) and session.events[-1].type != "session/end-seed":
            session.append("session/end-seed", {})  # as the agent would, but before publishing starts
            session.flush()
        live = _Live(session, _current_cwd(session) or self.settings.cwd)
        live.unsubscribe = session.subscribe(self._on_event)
        self.sessions[session.id] = live
        return live

    def _open(self, session_id: str, *, create: bool) -> _Live:
        """The live session ``session_id``: held already, reopened from the store, or (``create``) new."""
        live = self.sessions.get(session_id)
        if live is not None:
            return live
        if self.store.exists(session_id):
            return self._adopt(self.store.open(session_id), resume=True)
        if not create:
            raise RpcError(SESSION_NOT_FOUND, f'session "{session_id}" not found', {"sessionId": session_id})
        return self._adopt(self.store.create(session_id=session_id, cwd=self.settings.cwd), resume=False)

    def _model_client(self) -> ChatClient:
        if self._client is None:
            settings = self.settings
            try:
                config = ModelConfig.from_env(
                    base_url=settings.base_url, model=settings.model, timeouts=settings.timeouts
                )
                self._client = ChatClient(config)
            except ModelConfigError as error:  # no API key, a malformed base URL: never worth retrying
                raise RpcError(MODEL_NOT_CONFIGURED, str(error)) from None
        return self._client

    def _agent(self, live: _Live) -> Agent:
        if live.agent is None:
            settings = self.settings
            system = settings.system_prompt
            if system is None:
                head = system_head(live.session)
                content = head.data["message"]["content"] if head is not None else []
                system = "".join(str(b["text"]) for b in content if b.get("type") == "text")
            live.agent = Agent(
                live.session,
                self._model_client(),
                system_prompt=system,
                max_steps=settings.max_steps,
                max_tokens=settings.max_tokens,
                reasoning_effort=settings.reasoning_effort,
                resume_marker=False,
            )
        return live.agent

    def _enqueue(self, live: _Live, item: _Queued) -> None:
        self._agent(live)
        live.queue.append(item)
        if not live.running:
            name = f"dshpy-serve-{live.session.id}"
            live.worker = asyncio.get_running_loop().create_task(self._work(live), name=name)

    async def _work(self, live: _Live) -> None:
        sid = live.session.id
        self._publish("session.status", {"sessionId": sid, "status": "running"}, sid)
        try:
            while live.queue:
                item = live.queue.popleft()
                agent = self._agent(live)
                try:
                    result = await agent.run(item.message)
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
                if item.future is not None and not item.future.done():
                    item.future.set_result(result)
        finally:
            self._drop_queue(live, "the session stopped before this prompt ran")
            self._publish("session.status", {"sessionId": sid, "status": "idle"}, sid)

    @staticmethod
    def _drop_queue(live: _Live, why: str) -> int:
        dropped = 0
        while live.queue:
            item = live.queue.popleft()
            dropped += 1
            if item.future is not None and not item.future.done():
                item.future.set_exception(RpcError(CONFLICT, why, {"sessionId": live.session.id}))
        return dropped

    def _release(self, live: _Live) -> None:
        if live.unsubscribe is not None:
            live.unsubscribe()
        self.sessions.pop(live.session.id, None)
        try:
            live.session.close()
        except Exception:
            log.exception("closing %s failed", live.session.id)

    async def close(self) -> None:
        """Cancel running turns (logged ``aborted``), close every session and the model client."""
        lives = list(self.sessions.values())
        for live in lives:
            self._drop_queue(live, "the server is shutting down")
            if live.agent is not None:
                live.agent.cancel("disposed")
        workers = [live.worker for live in lives if live.worker is not None and not live.worker.done()]
        if workers:
            _done, pending = await asyncio.wait(workers, timeout=5)
            for task in pending:
                task.cancel()
        for live in lives:
            self._release(live)
        if self._client is not None:
            with contextlib.suppress(Exception):
                await self._client.close()
            self._client = None
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
        if effort is not None:
            changes["reasoning_effort"] = effort
        if max_tokens is not None:
            changes["max_tokens"] = max_tokens
        if changes:
            self.settings = replace(self.settings, **changes)
            if "model" in changes and self._client is not None and not any(x.running for x in self.sessions.values()):
                await self._client.close()
                self._client = None
                for live in self.sessions.values():
                    live.agent = None
        from dshpy import __version__

        return {"serverInfo": {"name": SERVER_NAME, "version": __version__}}

    async def prompt(self, p: Params, _peer: Peer | None) -> Any:
        session_id = p.session_id()
        blocks = p.content_blocks()
        live = self._open(session_id, create=True)
        message = user_message(blocks)
        self._enqueue(live, _Queued(message))
        return {"messageId": message["id"]}

    async def resume(self, p: Params, _peer: Peer | None) -> Any:
        self._open(p.session_id(), create=False)
        return {}

    async def wait(self, p: Params, _peer: Peer | None) -> Any:
        session_id = p.session_id()
        live = self.sessions.get(session_id)
        if live is None:
            raise RpcError(SESSION_NOT_FOUND, f"unknown SDK session: {session_id}", {"sessionId": session_id})
        while live.worker is not None and not live.worker.done():
            await asyncio.shield(live.worker)
        if live.failure is not None:
            raise RpcError(INTERNAL_ERROR, f"the turn failed: {type(live.failure).__name__}: {live.failure}")
        return {}

    async def get_cwd(self, p: Params, _peer: Peer | None) -> Any:
        live = self._open(p.session_id(), create=True)
        if not os.path.isdir(live.cwd):  # recover a vanished directory to the session's origin
            live.cwd = live.session.header.cwd or self.settings.cwd
        return {"cwd": live.cwd}

    async def set_cwd(self, p: Params, _peer: Peer | None) -> Any:
        session_id = p.session_id()
        path = p.string("path", max_length=4096)
        live = self._open(session_id, create=True)
        target = os.path.abspath(os.path.join(live.cwd, os.path.expanduser(path)))
        if not os.path.isdir(target):
            raise RpcError(INVALID_PARAMS, f"invalid params: path {target!r} is not a directory", {"field": "path"})
        if target != live.cwd:
            before = live.cwd
            live.session.append("working-directory/change", {"cwd": target})
            live.cwd = target
            notice = f"The working directory changed from {before} to {target}."
            with contextlib.suppress(RpcError):  # no model configured: the change is logged, no notice
                self._agent(live).inject(notice, source={"kind": "working-directory"})
            live.session.flush()
        return {"cwd": target}

    async def shutdown(self, _p: Params, _peer: Peer | None) -> Any:
        await self.close()
        return {}

    # -- dshpy's methods ----------------------------------------------------------

    async def create(self, p: Params, _peer: Peer | None) -> Any:
        session_id = p.session_id(required=False)
        cwd = p.string("cwd", required=False, max_length=4096)
        session = self.store.create(session_id=session_id, cwd=os.path.abspath(cwd) if cwd else self.settings.cwd)
        return self._info(self._adopt(session, resume=False).session)

    async def list(self, _p: Params, _peer: Peer | None) -> Any:
        return {"sessions": [info.to_dict() for info in self.store.list()]}

    async def get(self, p: Params, _peer: Peer | None) -> Any:
        session_id = p.session_id()
        live = self.sessions.get(session_id)
        session = live.session if live is not None else self.store.inspect(session_id)
        try:
            result = self._info(session)
            result["header"] = session.header.to_record()
            result["running"] = live is not None and live.running
            result["openTurn"] = session.open_turn
            result["messages"] = len(session.derive_messages())
            if p.boolean("projections", default=True):
                from dshpy.projections import snapshot

                result["projections"] = snapshot(session)
            return result
        finally:
            if live is None:
                session.close()

    async def send(self, p: Params, _peer: Peer | None) -> Any:
        session_id = p.session_id()
        text = p.string("text", empty=True)
        with_events = p.boolean("events", default=True)
        live = self._open(session_id, create=p.boolean("create", default=True))
        message = user_message(text)
        future: asyncio.Future[TurnResult] = asyncio.get_running_loop().create_future()
        self._enqueue(live, _Queued(message, future))
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
        session_id = p.session_id()
        from_seq = p.integer("fromSeq", minimum=0) or 0
        limit = p.integer("limit", minimum=1, maximum=MAX_EVENTS_PAGE) or 1000
        types = p.str_list("types")
        wanted = None if types is None else frozenset(types)
        live = self.sessions.get(session_id)
        source = iter(live.session.events[from_seq:]) if live is not None else self.store.read(session_id, from_seq)
        if wanted is not None:
            source = (event for event in source if event.type in wanted)
        page = list(islice(source, limit + 1))
        more = len(page) > limit
        page = page[:limit]
        next_seq = page[-1].seq + 1 if page else from_seq
        return {"events": [event.to_wire() for event in page], "nextSeq": next_seq, "more": more}

    async def fork(self, p: Params, _peer: Peer | None) -> Any:
        session_id = p.session_id()
        boundary = p.integer("boundary", minimum=0)
        child_id = p.session_id("childSessionId", required=False)
        close_open = p.boolean("closeOpenTurn")
        source = self.sessions.get(session_id)
        if source is not None:
            source.session.flush()
        child = self.store.fork(session_id, boundary, child_id=child_id, close_open_turn=close_open)
        live = self._adopt(child, resume=False)
        params = {"parentSessionId": session_id, "childSessionId": child.id}
        self._publish("subagent.started", params, session_id, child.id)
        return self._info(live.session)

    async def cancel(self, p: Params, _peer: Peer | None) -> Any:
        session_id = p.session_id()
        live = self.sessions.get(session_id)
        if live is None:
            return {"cancelled": False, "dropped": 0}
        dropped = self._drop_queue(live, "cancelled")
        cancelled = live.agent.cancel("user") if live.agent is not None else False
        return {"cancelled": cancelled, "dropped": dropped}

    async def delete(self, p: Params, _peer: Peer | None) -> Any:
        session_id = p.session_id()
        detach = p.boolean("detachForks")
        live = self.sessions.get(session_id)
        if live is not None:
            if live.running:
                message = f'session "{session_id}" is running a turn; cancel it first'
                raise RpcError(CONFLICT, message, {"sessionId": session_id})
            self._release(live)
        self.store.delete(session_id, detach_forks=detach)
        return {}

    async def subscribe(self, p: Params, peer: Peer | None) -> Any:
        session_id = p.session_id(required=False)
        if peer is None:
            raise RpcError(INVALID_PARAMS, "no notification stream to subscribe (open GET /events first)", {})
        peer.subscription.subscribe(session_id)
        return peer.subscription.to_json()

    async def unsubscribe(self, p: Params, peer: Peer | None) -> Any:
        session_id = p.session_id(required=False)
        if peer is None:
            raise RpcError(INVALID_PARAMS, "no notification stream to unsubscribe", {})
        peer.subscription.unsubscribe(session_id)
        return peer.subscription.to_json()
