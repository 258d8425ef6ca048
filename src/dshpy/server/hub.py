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
    """The sessions whose notifications one peer receives: all of them (``everything``) or ``sessions``."""

    everything: bool = True
    sessions: set[str] = field(default_factory=set)

    def wants(self, session_ids: Iterable[str]) -> bool:
        """Whether a notification about ``session_ids`` goes to this peer.

        A notification may concern several sessions (``subagent.started`` names the
        parent and the child); carrying any one of them is enough.
        """
        return self.everything or any(sid in self.sessions for sid in session_ids)

    def subscribe(self, session_id: str | None) -> None:
        """``session.subscribe``: ``None`` widens to everything; a session id narrows to an explicit set and adds it.

        Subscribing to one session while receiving everything therefore *stops* the
        other sessions' notifications: the client asked for that session specifically.
        """
        if session_id is None:
            self.everything = True
        else:
            self.everything = False
            self.sessions.add(session_id)

    def unsubscribe(self, session_id: str | None) -> None:
        """``session.unsubscribe``: drop one session, or (``None``) all of them.

        Either way the peer no longer receives everything, so unsubscribing from one
        session of an unrestricted peer leaves it with the sessions it had named.
        """
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
        """A subscription carrying only ``session_ids``: how an HTTP event stream starts, so clients stay apart."""
        return cls(everything=False, sessions=set(session_ids))

    def to_json(self) -> dict[str, Any]:
        """The answer to ``session.subscribe`` / ``session.unsubscribe``: ``{"all", "sessionIds"}`` (ids sorted)."""
        return {"all": self.everything, "sessionIds": sorted(self.sessions)}


class Peer(Protocol):
    """What the hub needs from a connection: its subscription and a way to hand it a frame.

    ``send`` runs on the event loop, inside the append that produced the
    notification, so it must not wait on the client; a peer that cannot keep up
    drops or buffers, it does not block the turn.
    """

    subscription: Subscription

    def send(self, frame: bytes) -> None:
        """Deliver one encoded notification frame (JSON bytes, no newline)."""


class Hub:
    """Fans notifications out to the peers that want them (encoding each once)."""

    def __init__(self) -> None:
        self.peers: list[Peer] = []

    def add(self, peer: Peer) -> None:
        """Start sending notifications to ``peer`` (filtered by its subscription)."""
        self.peers.append(peer)

    def remove(self, peer: Peer) -> None:
        """Stop sending to ``peer``; a no-op if it is not there, so transports may call it on every exit path."""
        if peer in self.peers:
            self.peers.remove(peer)

    def publish(self, method: str, params: dict[str, Any], session_ids: tuple[str, ...]) -> None:
        """Send ``method``/``params`` to every peer that wants one of ``session_ids``.

        The frame is encoded at most once however many peers receive it, and not at all
        when none does. Iterates over a copy, so a peer may be removed while it is sent to.
        """
        frame: bytes | None = None
        for peer in list(self.peers):
            if peer.subscription.wants(session_ids):
                if frame is None:
                    frame = notification_frame(method, params)
                peer.send(frame)
