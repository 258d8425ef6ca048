"""What a model server says about its answer outside the stream chunks (the model that answered, the answer's id).

Both model clients fill it in, so telemetry's ``gen_ai.response.model`` does not depend on the wire format.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["ResponseInfo"]


@dataclass(slots=True)
class ResponseInfo:
    """What the server said about its answer besides the chunks: dsh's stream vocabulary has no place for it.

    Pass one to a client's ``stream`` and read it as the stream goes (telemetry's
    ``gen_ai.response.model`` comes from here): the server may answer with another
    model than the one asked for (an alias resolved, a dated snapshot).
    """

    model: str | None = None
    """The ``model`` of the first chunk that names one."""
    id: str | None = None
    """That chunk's ``id`` (the completion's)."""
    on_accepted: Callable[[], Any] | None = None
    """Called once when the server took the request (a success status, before the first chunk).

    dsh's request extensions hang off this point: the Messages client calls it, so
    the agent can log ``session-log-deepseek/delivery-accepted`` for the session log it sent.
    """
