"""The surface: which logged events the model currently sees, in order.

Surface events carry ``surfaceOp``: ``"append"`` pushes the event, a replace swaps a
span of the *current* surface for the new event (compaction, pruning, a changed
system prompt). Validation is split into :meth:`Surface.plan` (pure, raises) and
:meth:`Surface.commit` so that a refused event leaves nothing behind.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from dshpy.core.events import SessionEvent, SurfaceReplace
from dshpy.core.vocabulary import KNOWN_EVENT_TYPES, MESSAGE_PROJECTION_EVENT_TYPES, SURFACE_EVENT_TYPES
from dshpy.errors import SurfaceError

__all__ = ["Surface", "SurfacePlan"]


class SurfacePlan(NamedTuple):
    """A validated change: append ``seq``, or replace ``nodes[start_index..end_index]`` by it.

    A named tuple rather than a frozen dataclass: one is built for every surface event
    appended, and a tuple is built in C.
    """

    seq: int
    start_index: int = -1
    end_index: int = -1
    system: bool = False

    @property
    def is_replace(self) -> bool:
        return self.start_index >= 0


def _error(event: SessionEvent, detail: str) -> SurfaceError:
    return SurfaceError(detail, event_type=event.type, seq=event.seq)


class Surface:
    """Incremental surface fold over one log (seqs of the visible events, in model order)."""

    __slots__ = ("nodes", "protected_head", "replacements")

    def __init__(self) -> None:
        self.nodes: list[int] = []
        self.replacements: list[SurfacePlan] = []
        """Every committed replace, in order: a derived cache catches up by replaying the ones it has not seen."""
        self.protected_head: int | None = None
        """Seq of the system prompt holding surface node 0, if the surface started with one."""

    def copy(self) -> Surface:
        clone = Surface()
        clone.nodes = list(self.nodes)
        clone.replacements = list(self.replacements)
        clone.protected_head = self.protected_head
        return clone

    def plan(self, event: SessionEvent, log: Sequence[SessionEvent]) -> SurfacePlan | None:
        """Check ``event`` (the next entry of ``log``) against the surface rules.

        Returns ``None`` for events that do not touch the surface. ``log`` is the log
        before ``event``; replaced nodes are looked up in it.
        """
        op = event.surface_op
        if event.type not in SURFACE_EVENT_TYPES:
            if event.type in MESSAGE_PROJECTION_EVENT_TYPES:
                raise _error(event, f'session event "{event.type}" requires a message projection dshpy does not have')
            if event.type not in KNOWN_EVENT_TYPES and event.ignorable:
                # Unknown ignorable records keep their metadata opaque and never reach the model.
                return None
            if op is not None:
                raise _error(event, f'session event "{event.type}" is not surface-eligible and cannot carry surfaceOp')
            if event.source_event_seqs is not None:
                raise _error(
                    event, f'session event "{event.type}" is not surface-eligible and cannot carry sourceEventSeqs'
                )
            return None
        if op is None:
            raise _error(event, f'session event "{event.type}" is surface-eligible and requires a surfaceOp marker')
        if event.ignorable:
            raise _error(event, f'surface event "{event.type}" cannot be ignorable: the model saw it')
        sources = self._check_sources(event)
        system = event.type == "system/message"
        if system and self.nodes and self.protected_head is None:
            raise _error(event, "system/message requires a protected first surface head")
        if op == "append":
            return SurfacePlan(event.seq, system=system)
        assert isinstance(op, SurfaceReplace)
        if op.start_seq >= event.seq or op.end_seq >= event.seq:
            raise _error(
                event, f"surface replace at seq {event.seq}: startSeq and endSeq must reference earlier events"
            )
        start = self._index_of(event, op.start_seq, "start")
        end = self._index_of(event, op.end_seq, "end")
        if start > end:
            raise _error(
                event,
                f"surface replace: start seq {op.start_seq} (index {start}) is after "
                f"end seq {op.end_seq} (index {end})",
            )
        shadowed = self.nodes[start : end + 1]
        missing = [seq for seq in shadowed if seq not in sources]
        if missing:
            listed = ", ".join(str(seq) for seq in missing)
            raise _error(
                event, f"surface replace: sourceEventSeqs must include every shadowed surface node; missing {listed}"
            )
        if event.type == "tool/result":
            self._check_tool_result_rewrite(event, shadowed, log)
        if self.protected_head is not None and self.protected_head in shadowed and (not system or len(shadowed) != 1):
            raise _error(
                event,
                "surface replacement cannot shadow the protected system head: only a system/message over exactly "
                "that node may rewrite it",
            )
        return SurfacePlan(event.seq, start, end, system)

    def commit(self, plan: SurfacePlan | None) -> None:
        """Apply a plan returned by :meth:`plan` for the event just appended."""
        if plan is None:
            return
        if plan.is_replace:
            if plan.system and self.nodes[plan.start_index] == self.protected_head:
                self.protected_head = plan.seq
            self.nodes[plan.start_index : plan.end_index + 1] = [plan.seq]
            self.replacements.append(plan)
        else:
            if plan.system and not self.nodes:
                self.protected_head = plan.seq
            self.nodes.append(plan.seq)

    def _index_of(self, event: SessionEvent, seq: int, which: str) -> int:
        try:
            return self.nodes.index(seq)
        except ValueError:
            raise _error(event, f"surface replace: {which} seq {seq} not found in surface") from None

    @staticmethod
    def _check_sources(event: SessionEvent) -> frozenset[int]:
        sources = event.source_event_seqs
        if sources is None:
            return frozenset()
        if event.type == "assistant/message":
            raise _error(event, "assistant/message embeds its source stream and cannot carry sourceEventSeqs")
        if not sources:
            raise _error(event, "sourceEventSeqs must not be empty")
        unique = frozenset(sources)
        if len(unique) != len(sources):
            raise _error(event, "sourceEventSeqs must not contain duplicates")
        if max(sources) >= event.seq:
            late = next(seq for seq in sources if seq >= event.seq)
            raise _error(event, f"sourceEventSeqs must reference earlier events: {late} >= current seq {event.seq}")
        return unique

    @staticmethod
    def _check_tool_result_rewrite(event: SessionEvent, shadowed: list[int], log: Sequence[SessionEvent]) -> None:
        if len(shadowed) != 1:
            raise _error(event, "tool/result surface replacement must rewrite exactly one current node")
        original = log[shadowed[0]]
        if original.type != "tool/result":
            raise _error(event, "tool/result surface replacement must target a current tool/result")

        def without_content(data: dict[str, object]) -> dict[str, object]:
            message = dict(data["message"])  # type: ignore[call-overload]
            message["content"] = None
            return {**data, "message": message}

        if without_content(original.data) != without_content(event.data):
            raise _error(event, "tool/result surface replacement may change only content")
