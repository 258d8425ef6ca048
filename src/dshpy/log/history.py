"""The model's message history, folded from the surface and kept up to date in place.

Deriving one message costs about a microsecond, so folding a 35k-message history
from scratch takes ~40 ms: too slow to redo after every compaction or prune. The
fold therefore remembers what each derived surface node produced (a message, or
nothing) and replays the surface's replacements onto that: a replace removes the
messages of the nodes it shadows and inserts the one its event derives, at a cost
of the shadowed nodes plus a copy of the message list, never a re-derivation.

The message list is handed out as a :class:`~dshpy.log.messages.LogView`, which is
only a snapshot of a list that never changes below its length. A replace therefore
edits a list no view has seen, copying it first if one has; appends may grow a seen
list, since a view's fixed length hides what follows.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from dshpy.core.events import SessionEvent
from dshpy.log.messages import LogView, Message, message_of
from dshpy.log.surface import Surface, SurfacePlan

__all__ = ["DerivedHistory"]


class DerivedHistory:
    """The messages derived from a prefix of one session's surface.

    It holds the session's live surface and log (never copies) and catches up with
    them in :meth:`derive`, so appends and replaces cost nothing here until then.
    """

    __slots__ = ("_log", "_messages", "_produced", "_replayed", "_shared", "_surface")

    def __init__(self, surface: Surface, log: Sequence[SessionEvent]) -> None:
        self._surface = surface
        self._log = log
        self._messages: list[Message] = []
        self._produced = bytearray()
        """1 for each derived surface node that produced a message, else 0: the derived prefix is this long.

        Bytes rather than the messages themselves, so counting the messages before a
        node is a C-speed byte count with no comparisons of message objects."""
        self._replayed = 0
        """How many of the surface's replacements the prefix already reflects."""
        self._shared = False
        """Whether a view over ``_messages`` has been handed out (a replace must then copy it)."""

    def derive(self) -> LogView[Message]:
        """The history of the surface over the log, as an immutable snapshot."""
        surface = self._surface
        if self._replayed != len(surface.replacements):
            self._replay(surface.replacements)
        nodes = surface.nodes
        produced = self._produced
        if len(produced) < len(nodes):
            log = self._log
            messages = self._messages
            for seq in nodes[len(produced) :]:
                message = message_of(log[seq])
                produced.append(message is not None)
                if message is not None:
                    messages.append(message)
        self._shared = True
        return LogView(self._messages)

    def _replay(self, replacements: list[SurfacePlan]) -> None:
        """Apply the replacements committed since the last derivation, in order."""
        if self._produced:  # an empty prefix has nothing to replace; the new nodes derive in derive()
            for plan in itertools.islice(replacements, self._replayed, None):
                self._replace(plan)
        self._replayed = len(replacements)

    def _replace(self, plan: SurfacePlan) -> None:
        """Apply one committed replacement to the derived prefix.

        Nodes past the prefix were never derived, so only the shadowed nodes inside
        it are removed. A replacement reaching past the prefix leaves its own node as
        the prefix's last: every node after it is still to derive.
        """
        produced = self._produced
        start = plan.start_index
        if start >= len(produced):
            return
        end = plan.end_index + 1  # counts and slices stop at the prefix's end by themselves
        at = produced.count(1, 0, start)
        removed = produced.count(1, start, end)
        message = message_of(self._log[plan.seq])
        inserted = [] if message is None else [message]
        produced[start:end] = b"\x01" if inserted else b"\x00"
        if self._shared:
            messages = self._messages
            self._messages = messages[:at] + inserted + messages[at + removed :]
            self._shared = False
        else:
            self._messages[at : at + removed] = inserted
