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
    """The messages derived from a prefix of one session's surface, caught up on demand."""

    __slots__ = ("_messages", "_produced", "_replayed", "_shared")

    def __init__(self) -> None:
        self._messages: list[Message] = []
        self._produced = bytearray()
        """1 for each derived surface node that produced a message, else 0: the derived prefix is this long.

        Bytes rather than the messages themselves, so counting the messages before a
        node is a C-speed byte count with no comparisons of message objects."""
        self._replayed = 0
        """How many of the surface's replacements the prefix already reflects."""
        self._shared = False
        """Whether a view over ``_messages`` has been handed out (a replace must then copy it)."""

    def derive(self, surface: Surface, log: Sequence[SessionEvent]) -> LogView[Message]:
        """The history of ``surface`` over ``log``, as an immutable snapshot."""
        replacements = surface.replacements
        if self._replayed < len(replacements):
            if self._produced:  # an empty prefix has nothing to replace; the new nodes derive below
                for plan in itertools.islice(replacements, self._replayed, None):
                    self._replace(plan, log)
            self._replayed = len(replacements)
        nodes = surface.nodes
        produced = self._produced
        if len(produced) < len(nodes):
            messages = self._messages
            for seq in nodes[len(produced) :]:
                message = message_of(log[seq])
                if message is None:
                    produced.append(0)
                else:
                    produced.append(1)
                    messages.append(message)
        self._shared = True
        return LogView(self._messages)

    def _replace(self, plan: SurfacePlan, log: Sequence[SessionEvent]) -> None:
        """Apply one committed replacement to the derived prefix.

        Nodes past the prefix were never derived, so only the shadowed nodes inside
        it are removed. A replacement reaching past the prefix leaves its own node as
        the prefix's last: every node after it is still to derive.
        """
        produced = self._produced
        start = plan.start_index
        if start >= len(produced):
            return
        end = min(plan.end_index + 1, len(produced))
        at = produced.count(1, 0, start)
        removed = produced.count(1, start, end)
        message = message_of(log[plan.seq])
        inserted = [] if message is None else [message]
        produced[start:end] = b"\x01" if inserted else b"\x00"
        if self._shared:
            messages = self._messages
            self._messages = messages[:at] + inserted + messages[at + removed :]
            self._shared = False
        else:
            self._messages[at : at + removed] = inserted
