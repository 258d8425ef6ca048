"""Who gets which notification: every connection ("peer") has a subscription.

A peer starts subscribed to everything (dsh's runtime sends every notification to
its one client). ``session.subscribe {sessionId}`` narrows it to an explicit set of
sessions (adding that one); ``session.subscribe {}`` widens it back to everything;
``session.unsubscribe {sessionId}`` drops one session, ``session.unsubscribe {}``
drops them all.

An HTTP event stream (``GET /events``) starts *scoped* instead: it carries only the
sessions named in its URL, the sessions its client creates, prompts, resumes or
forks with ``X-Dshpy-Stream`` (:meth:`Subscription.follow`), and those it
subscribes to — so one client does not receive another's session events unless
it asks (``session.subscribe {}`` still widens a stream to everything).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from .protocol import notification_frame

__all__ = ["Hub", "Peer", "Subscription"]


@dataclass(slots=True)
class Subscription:
    everything: bool = True
    sessions: set[str] = field(default_factory=set)

    def wants(self, session_ids: Iterable[str]) -> bool:
        return self.everything or any(sid in self.sessions for sid in session_ids)

    def subscribe(self, session_id: str | None) -> None:
        if session_id is None:
            self.everything = True
        else:
            self.everything = False
            self.sessions.add(session_id)

    def unsubscribe(self, session_id: str | None) -> None:
        self.everything = False
        if session_id is None:
            self.sessions.clear()
        else:
            self.sessions.discard(session_id)

    def follow(self, session_id: str) -> bool:
        """Add a session its client just used; ``True`` if it was not carried before."""
        if self.everything or session_id in self.sessions:
            return False
        self.sessions.add(session_id)
        return True

    @classmethod
    def scoped(cls, session_ids: Iterable[str] = ()) -> Subscription:
        return cls(everything=False, sessions=set(session_ids))

    def to_json(self) -> dict[str, Any]:
        return {"all": self.everything, "sessionIds": sorted(self.sessions)}


class Peer(Protocol):
    subscription: Subscription

    def send(self, frame: bytes) -> None: ...


class Hub:
    """Fans notifications out to the peers that want them (encoding each once)."""

    def __init__(self) -> None:
        self.peers: list[Peer] = []

    def add(self, peer: Peer) -> None:
        self.peers.append(peer)

    def remove(self, peer: Peer) -> None:
        if peer in self.peers:
            self.peers.remove(peer)

    def publish(self, method: str, params: dict[str, Any], session_ids: tuple[str, ...]) -> None:
        frame: bytes | None = None
        for peer in list(self.peers):
            if peer.subscription.wants(session_ids):
                if frame is None:
                    frame = notification_frame(method, params)
                peer.send(frame)
