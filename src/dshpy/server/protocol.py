"""JSON-RPC 2.0 frames, error codes and parameter checks shared by every transport.

Error codes (``error.code``; ``error.data`` says more where noted):

=========  ===========================================================================
-32700     the frame is not JSON (``id`` null)
-32600     not a request: not an object, bad ``jsonrpc``/``method``/``id``, a batch,
           or a frame over the size limit (``data: {"limit": bytes}``)
-32601     unknown method
-32602     invalid params; ``data: {"field": name}`` names the failing field (integers:
           non-negative safe integers, at most 2**53 - 1, unless a method says otherwise)
-32603     internal error (a bug; logged on the server's stderr)
-32001     session not found (``data: {"sessionId"}``)
-32002     conflict: the session is busy, already exists, or another writer holds it
-32003     fork refused; ``data: {"code": "INVALID_BOUNDARY" | "OPEN_TURN" | …}``
-32004     corrupt or unsupported stored session
-32005     other store error
-32006     model not configured (no API key)
-32007     a server limit is reached, nothing was done; retry later. ``data: {"limit", "max",
           "sessionId"?}``, ``limit`` one of ``"queuedPrompts"`` (per session),
           ``"queuedBytes"`` (all queues) or ``"liveSessions"`` (every live session busy)
-32000     any other dshpy error
=========  ===========================================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from dshpy.core.ids import check_session_id
from dshpy.core.json import MAX_SAFE_INTEGER
from dshpy.core.json import dumps as json_dumps
from dshpy.core.json import loads as json_loads
from dshpy.errors import (
    ConflictError,
    CorruptSessionError,
    DshError,
    ForkError,
    FormatVersionError,
    InvalidSessionIdError,
    SessionExistsError,
    SessionNotFound,
    StoreError,
)

__all__ = [
    "CONFLICT",
    "CORRUPT",
    "DEFAULT_MAX_REQUEST_BYTES",
    "DOMAIN_ERROR",
    "FORK_ERROR",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "LIMIT_EXCEEDED",
    "METHOD_NOT_FOUND",
    "MODEL_NOT_CONFIGURED",
    "PARSE_ERROR",
    "SESSION_NOT_FOUND",
    "STORE_ERROR",
    "FrameError",
    "Params",
    "Request",
    "RpcError",
    "dumps",
    "error_frame",
    "notification_frame",
    "parse_frame",
    "result_frame",
    "rpc_error_of",
]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
DOMAIN_ERROR = -32000
SESSION_NOT_FOUND = -32001
CONFLICT = -32002
FORK_ERROR = -32003
CORRUPT = -32004
STORE_ERROR = -32005
MODEL_NOT_CONFIGURED = -32006
LIMIT_EXCEEDED = -32007

DEFAULT_MAX_REQUEST_BYTES = 1 << 20
MAX_ID_LENGTH = 256
MAX_METHOD_LENGTH = 128

RequestId = str | int | None


class RpcError(DshError):
    """An error answered to the caller as ``{code, message, data?}``."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_json(self) -> dict[str, Any]:
        """The ``error`` object of a response frame; ``data`` is left out when there is none."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


def dumps(value: Any) -> bytes:
    """A frame's bytes, as ``JSON.stringify`` writes them (lone surrogates escaped, see :mod:`dshpy.core.json`)."""
    return json_dumps(value)


def result_frame(request_id: RequestId, result: Any) -> bytes:
    """The bytes of a successful response to ``request_id``."""
    return dumps({"jsonrpc": "2.0", "id": request_id, "result": result})


def error_frame(request_id: RequestId, error: RpcError) -> bytes:
    """The bytes of an error response; ``request_id`` is ``None`` when the request's id could not be read."""
    return dumps({"jsonrpc": "2.0", "id": request_id, "error": error.to_json()})


def notification_frame(method: str, params: Any) -> bytes:
    """The bytes of a notification (no ``id``: clients never answer it)."""
    return dumps({"jsonrpc": "2.0", "method": method, "params": params})


class Request:
    """A parsed request (``is_notification`` when it has no ``id``: never answered)."""

    __slots__ = ("id", "is_notification", "method", "params")

    def __init__(self, request_id: RequestId, method: str, params: dict[str, Any], is_notification: bool) -> None:
        self.id = request_id
        self.method = method
        self.params = params
        self.is_notification = is_notification


def _valid_id(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return -(2**53) < value < 2**53
    if isinstance(value, str):
        return len(value) <= MAX_ID_LENGTH
    return value is None


class FrameError(DshError):
    """A frame that is not a valid request: answer ``error`` to ``request_id`` unless ``silent``."""

    def __init__(self, error: RpcError, request_id: RequestId = None, *, silent: bool = False) -> None:
        super().__init__(error.message)
        self.error = error
        self.request_id = request_id
        self.silent = silent


def parse_frame(raw: bytes | str) -> Request:
    """Parse one frame into a :class:`Request`, or raise :class:`FrameError`."""
    try:
        frame = json_loads(raw)  # accepts JSON.stringify's escapes of lone surrogates
    except (orjson.JSONDecodeError, UnicodeDecodeError, TypeError) as error:
        raise FrameError(RpcError(PARSE_ERROR, f"parse error: {str(error)[:200]}")) from None
    if not isinstance(frame, dict):
        message = "invalid request: a frame must be a JSON object (batches are not supported)"
        raise FrameError(RpcError(INVALID_REQUEST, message))
    request_id = frame.get("id")
    if not _valid_id(request_id):
        message = "invalid request: id must be a string (at most 256 characters), a safe integer or null"
        raise FrameError(RpcError(INVALID_REQUEST, message))
    method = frame.get("method")
    if frame.get("jsonrpc", "2.0") != "2.0":
        raise FrameError(RpcError(INVALID_REQUEST, 'invalid request: jsonrpc must be "2.0"'), request_id)
    if not isinstance(method, str) or not method or len(method) > MAX_METHOD_LENGTH:
        message = "invalid request: method must be a non-empty string (this server takes no responses)"
        raise FrameError(RpcError(INVALID_REQUEST, message), request_id)
    is_notification = "id" not in frame
    params = frame.get("params")
    if params is None:
        params = {}
    elif not isinstance(params, dict):
        bad = RpcError(INVALID_PARAMS, "invalid params: params must be an object", {"field": "params"})
        raise FrameError(bad, request_id, silent=is_notification)
    return Request(request_id, method, params, is_notification)


def invalid(field: str, message: str) -> RpcError:
    """The -32602 error for a bad parameter; ``data.field`` names it so a client can point at the argument."""
    return RpcError(INVALID_PARAMS, f"invalid params: {field} {message}", {"field": field})


_MISSING = object()


class Params:
    """Typed access to a request's params; every failure is -32602 naming the field."""

    def __init__(self, params: Mapping[str, Any]) -> None:
        self.raw = params

    def _get(self, name: str, required: bool) -> Any:
        value = self.raw.get(name, _MISSING)
        if value is _MISSING or value is None:
            if required:
                raise invalid(name, "is required")
            return None
        return value

    def string(self, name: str, *, required: bool = True, empty: bool = False, max_length: int = 1 << 20) -> Any:
        """A string param (``None`` when optional and absent or null).

        Missing, null, a non-string, an empty string (unless ``empty``) or one longer
        than ``max_length`` characters is -32602 naming the field.
        """
        value = self._get(name, required)
        if value is None:
            return None
        if not isinstance(value, str):
            raise invalid(name, "must be a string")
        if not empty and not value:
            raise invalid(name, "must not be empty")
        if len(value) > max_length:
            raise invalid(name, f"is longer than {max_length} characters")
        return value

    def integer(
        self, name: str, *, required: bool = False, minimum: int | None = 0, maximum: int = MAX_SAFE_INTEGER
    ) -> Any:
        """An integer param, by default a non-negative safe integer (JSON peers lose precision past 2**53)."""
        value = self._get(name, required)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise invalid(name, "must be an integer")
        low = -MAX_SAFE_INTEGER if minimum is None else minimum
        if value < low:
            raise invalid(name, f"must be at least {low}")
        if value > maximum:
            raise invalid(name, f"must be at most {maximum}")
        return value

    def boolean(self, name: str, default: bool = False) -> bool:
        """A boolean param; absent or null gives ``default``, anything but ``true``/``false`` is -32602."""
        value = self._get(name, False)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise invalid(name, "must be a boolean")
        return value

    def session_id(self, name: str = "sessionId", *, required: bool = True) -> Any:
        """A session id param, checked as the stores check it, so a bad id is -32602 before any store is touched."""
        value = self._get(name, required)
        if value is None:
            return None
        try:
            return check_session_id(value)
        except InvalidSessionIdError as error:
            raise RpcError(INVALID_PARAMS, f"invalid params: {error}", {"field": name}) from None

    def str_list(self, name: str, *, max_items: int = 1000) -> list[str] | None:
        """An optional list of strings (at most ``max_items``), returned as a copy; anything else is -32602."""
        value = self._get(name, False)
        if value is None:
            return None
        if not isinstance(value, list) or len(value) > max_items or not all(isinstance(v, str) for v in value):
            raise invalid(name, f"must be a list of at most {max_items} strings")
        return list(value)

    def content_blocks(self, name: str = "contentBlocks") -> list[dict[str, Any]]:
        """dsh's ``contentBlocks``: a non-empty list of text blocks, returned as fresh ``{"type", "text"}`` dicts.

        Other keys of a block are dropped, and any other block type is -32602 naming
        its index: dshpy sends only text to the model.
        """
        value = self._get(name, True)
        if not isinstance(value, list) or not value:
            raise invalid(name, "must be a non-empty list of content blocks")
        blocks: list[dict[str, Any]] = []
        for index, block in enumerate(value):
            field = f"{name}[{index}]"
            if not isinstance(block, dict) or not isinstance(block.get("type"), str):
                raise invalid(field, "must be an object with a string type")
            if block["type"] == "text":
                if not isinstance(block.get("text"), str):
                    raise invalid(f"{field}.text", "must be a string")
                blocks.append({"type": "text", "text": block["text"]})
            else:
                raise invalid(f"{field}.type", f"{block['type']!r} is not supported (only text blocks)")
        return blocks


def rpc_error_of(error: BaseException) -> RpcError | None:
    """The documented error for a domain exception; ``None`` for a bug (answered -32603)."""
    if isinstance(error, RpcError):
        return error
    if isinstance(error, InvalidSessionIdError):
        return RpcError(INVALID_PARAMS, f"invalid params: {error}", {"field": "sessionId"})
    if isinstance(error, ForkError):
        return RpcError(FORK_ERROR, str(error), {"code": error.code})
    if isinstance(error, SessionNotFound):
        return RpcError(SESSION_NOT_FOUND, str(error).strip("'\""))
    if isinstance(error, ConflictError | SessionExistsError):
        return RpcError(CONFLICT, str(error))
    if isinstance(error, CorruptSessionError | FormatVersionError):
        return RpcError(CORRUPT, str(error))
    if isinstance(error, StoreError):
        return RpcError(STORE_ERROR, str(error))
    if isinstance(error, DshError):
        return RpcError(DOMAIN_ERROR, str(error), {"error": type(error).__name__})
    return None
