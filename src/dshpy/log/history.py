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

A session resumed from a checkpoint (:mod:`dshpy.log.resume`) starts with a history
it has not derived: the checkpoint lists the surface nodes and which of them derive
no message, and :class:`LazyMessages` stands in for the message list, deriving each
message from its event (read from the store) only when it is read.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import overload

from dshpy.core.events import SessionEvent
from dshpy.errors import CorruptSessionError
from dshpy.log.messages import LogView, Message, message_of
from dshpy.log.surface import Surface, SurfacePlan

__all__ = ["DerivedHistory", "LazyMessages"]

_DERIVE_BATCH = 256
"""Messages derived together when one that was never read is asked for (its neighbours are read next)."""


class LazyMessages(Sequence[Message]):
    """A message list given by the seqs of the events that derive them, each derived on first read.

    It supports what :class:`DerivedHistory` does to its list (append, a splice in
    place, a spliced copy) and what a :class:`~dshpy.log.messages.LogView` reads
    (length, index, slice). Derived messages are kept by seq, shared by every copy: a
    message is a pure function of its immutable event, so a copy may reuse it, and the
    same message object is handed out on every read.
    """

    __slots__ = ("_log", "_memo", "_seqs")

    def __init__(self, seqs: list[int], log: Sequence[SessionEvent], memo: dict[int, Message] | None = None) -> None:
        self._seqs = seqs
        self._log = log
        self._memo: dict[int, Message] = {} if memo is None else memo

    def __len__(self) -> int:
        return len(self._seqs)

    @overload
    def __getitem__(self, index: int) -> Message: ...
    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...
    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self._seqs)))]
        seq = self._seqs[index]
        message = self._memo.get(seq)
        if message is None:
            message = self._derive(index if index >= 0 else index + len(self._seqs))
        return message

    def append(self, message: Message) -> None:
        self._seqs.append(message.seq)
        self._memo[message.seq] = message

    def __setitem__(self, index: slice, messages: list[Message]) -> None:
        self._seqs[index] = [message.seq for message in messages]
        for message in messages:
            self._memo[message.seq] = message

    def spliced(self, at: int, removed: int, inserted: list[Message]) -> LazyMessages:
        """A copy with ``removed`` messages at ``at`` replaced by ``inserted`` (this list stays as it is)."""
        for message in inserted:
            self._memo[message.seq] = message
        seqs = self._seqs[:at] + [message.seq for message in inserted] + self._seqs[at + removed :]
        return LazyMessages(seqs, self._log, self._memo)

    def _derive(self, index: int) -> Message:
        memo = self._memo
        log = self._log
        first: Message | None = None
        for seq in self._seqs[index : index + _DERIVE_BATCH]:
            if seq in memo:
                continue
            message = message_of(log[seq])
            if message is None:
                raise CorruptSessionError(f"event {seq} was checkpointed as a message but derives none")
            memo[seq] = message
            if first is None:
                first = message
        assert first is not None
        return first


class DerivedHistory:
    """The messages derived from a prefix of one session's surface.

    It holds the session's live surface and log (never copies) and catches up with
    them in :meth:`derive`, so appends and replaces cost nothing here until then.
    """

    __slots__ = ("_log", "_messages", "_produced", "_replayed", "_shared", "_surface")

    def __init__(self, surface: Surface, log: Sequence[SessionEvent]) -> None:
        self._surface = surface
        self._log = log
        self._messages: list[Message] | LazyMessages = []
        self._produced = bytearray()
        """1 for each derived surface node that produced a message, else 0: the derived prefix is this long.

        Bytes rather than the messages themselves, so counting the messages before a
        node is a C-speed byte count with no comparisons of message objects."""
        self._replayed = 0
        """How many of the surface's replacements the prefix already reflects."""
        self._shared = False
        """Whether a view over ``_messages`` has been handed out (a replace must then copy it)."""

    @classmethod
    def resumed(
        cls, surface: Surface, log: Sequence[SessionEvent], message_seqs: list[int], silent: Sequence[int]
    ) -> DerivedHistory:
        """The history of a resumed session: ``surface`` derived, its messages (at ``message_seqs``) not yet read.

        ``silent`` are the indexes of the surface nodes that derive no message.
        """
        history = cls(surface, log)
        produced = bytearray(b"\x01") * len(surface.nodes)
        for index in silent:
            produced[index] = 0
        history._produced = produced
        history._messages = LazyMessages(message_seqs, log)
        return history

    @property
    def silent(self) -> list[int]:
        """Indexes of the derived surface nodes that produced no message (what :meth:`resumed` takes back)."""
        produced = self._produced
        found: list[int] = []
        at = produced.find(0)
        while at >= 0:
            found.append(at)
            at = produced.find(0, at + 1)
        return found

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
            if isinstance(messages, LazyMessages):
                self._messages = messages.spliced(at, removed, inserted)
            else:
                self._messages = messages[:at] + inserted + messages[at + removed :]
            self._shared = False
        else:
            self._messages[at : at + removed] = inserted
