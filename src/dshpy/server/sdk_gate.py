"""dsh's SDK runtime rules for dsh's own methods, which ``dshpy-runtime`` follows (dsh-v4 §5).

dsh's ``HarnessSdkJsonRpcServer`` holds every session it serves in a per-process
table, and its methods refuse what that table does not allow. :class:`SdkGate` keeps
the same table and the same refusals, with dsh's messages and dshpy's error codes:

* before ``initialize``, ``session/prompt``, ``session/resume``, ``session/wait`` and
  ``session/working-directory/get|set`` fail with ``SDK server is not initialized``
  (-32600);
* ``session/prompt`` and the working-directory methods *create* a session this process
  has not opened; when a log with that id already exists they fail with
  ``session "<id>" already exists`` (-32002) — a stored session has to be resumed first;
* ``session/resume`` of a session this process already opened fails with
  ``SDK session is already open or opening: <id>`` (-32002);
* an unknown method is ``unknown DeepSeek Harness SDK runtime method: <m>``.

``dshpy serve`` leaves the gate off: its clients (dshpy's own SDK, the web UI, scripts)
may prompt any stored session directly, and dshpy's ``session.*`` methods are never gated.
"""

from __future__ import annotations

from dshpy.storage.contract import SessionStore

from .protocol import CONFLICT, INVALID_REQUEST, RpcError

__all__ = ["GATED_METHODS", "SdkGate"]

GATED_METHODS = frozenset(
    {
        "session/prompt",
        "session/resume",
        "session/wait",
        "session/working-directory/get",
        "session/working-directory/set",
    }
)


class SdkGate:
    """Which sessions this process opened through dsh's methods, and whether ``initialize`` came."""

    def __init__(self, store: SessionStore, *, enabled: bool) -> None:
        self.store = store
        self.enabled = enabled
        self.initialized = False
        self._opened: set[str] = set()

    def unknown_method_message(self, method: str) -> str:
        """The error message for a method nobody serves (dsh's wording when the gate is on)."""
        if self.enabled:
            return f"unknown DeepSeek Harness SDK runtime method: {method}"
        return f"method not found: {method}"

    def check_initialized(self, method: str) -> None:
        """Refuse one of dsh's methods before ``initialize``."""
        if self.enabled and not self.initialized and method in GATED_METHODS:
            raise RpcError(INVALID_REQUEST, "SDK server is not initialized")

    def check_create(self, session_id: str) -> None:
        """A prompt or working-directory call: refused for a stored session this process has not opened."""
        if self.enabled and session_id not in self._opened and self.store.exists(session_id):
            raise RpcError(CONFLICT, f'session "{session_id}" already exists', {"sessionId": session_id})

    def check_resume(self, session_id: str) -> None:
        """Refuse to resume a session this process already opened."""
        if self.enabled and session_id in self._opened:
            raise RpcError(CONFLICT, f"SDK session is already open or opening: {session_id}", {"sessionId": session_id})

    def opened(self, session_id: str) -> None:
        """Record that this process now holds ``session_id`` (so it is neither re-created nor re-resumed)."""
        self._opened.add(session_id)
