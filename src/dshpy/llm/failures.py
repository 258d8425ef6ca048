"""Why a model call failed, as dsh's ``LlmFailure`` ``{message, code, status?, providerRetryAfterMs?, requestId?}``.

A failure is data, not just an exception: it is stored in the attempt's ``finish``
chunk, in ``llm/retry`` and in ``turn/end {kind: "error"}``, so the code must say
what happened in words a later reader (or a retry policy) can act on:

======================  =========  ===============================================
code                    retryable  when
======================  =========  ===============================================
RATE_LIMITED            yes        429 (``Retry-After`` honoured)
SERVER                  yes        5xx, or DeepSeek's ``insufficient_system_resource``
TIMEOUT                 yes        no connection / answer / chunk / whole answer in time
STREAM_INTERRUPTED      yes        the stream broke off before it finished
CONNECTION              yes        the server could not be reached
UNKNOWN_HOST            no         the base URL's host name does not resolve (a
                                   configuration error: retrying cannot help)
CONTEXT_WINDOW_EXCEEDED no         the prompt is longer than the model's window
INVALID_CREDENTIAL      no         401/403: fails fast, naming ``DEEPSEEK_API_KEY``
QUOTA                   no         402 (DeepSeek: insufficient balance)
INVALID_REQUEST         no         any other 4xx
CONTENT_FILTERED        no         the provider's filter stopped the answer
UNKNOWN                 no         anything else
======================  =========  ===============================================
"""

from __future__ import annotations

import email.utils
import re
import socket
import time
from collections.abc import Mapping
from typing import Any

import httpx2 as httpx
import openai

from dshpy.errors import DshError

__all__ = [
    "RETRYABLE_CODES",
    "LlmError",
    "classify_anthropic_error",
    "classify_exception",
    "classify_status",
    "parse_retry_after",
    "timeout_failure",
]

RETRYABLE_CODES = frozenset({"RATE_LIMITED", "SERVER", "TIMEOUT", "STREAM_INTERRUPTED", "CONNECTION"})

_CONTEXT_PATTERN = re.compile(
    r"context[ _]length|context[ _]window|maximum context|prompt is too long|too many tokens|reduce the length",
    re.IGNORECASE,
)


class LlmError(DshError):
    """A failed model call; :attr:`failure` is the ``LlmFailure`` to log."""

    def __init__(self, failure: dict[str, Any]) -> None:
        super().__init__(failure["message"])
        self.failure = failure

    @property
    def code(self) -> str:
        return str(self.failure["code"])

    @property
    def retryable(self) -> bool:
        return self.code in RETRYABLE_CODES

    @property
    def retry_after_ms(self) -> int | None:
        value = self.failure.get("providerRetryAfterMs")
        return value if isinstance(value, int) else None


def _failure(
    message: str,
    code: str,
    *,
    status: int | None = None,
    retry_after_ms: int | None = None,
    request_id: str | None = None,
) -> dict[str, Any]:
    failure: dict[str, Any] = {"message": message, "code": code}
    if status is not None:
        failure["status"] = status
    if retry_after_ms is not None:
        failure["providerRetryAfterMs"] = retry_after_ms
    if request_id:
        failure["requestId"] = request_id
    return failure


def parse_retry_after(headers: Mapping[str, str] | None, *, now: float | None = None) -> int | None:
    """Milliseconds the server asked us to wait: ``retry-after-ms``, or ``Retry-After`` (seconds or HTTP date)."""
    if not headers:
        return None
    lowered = {key.lower(): value for key, value in headers.items()}
    raw_ms = lowered.get("retry-after-ms")
    if raw_ms is not None:
        try:
            return max(0, round(float(raw_ms)))
        except ValueError:
            pass
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    try:
        return max(0, round(float(raw) * 1000))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    current = time.time() if now is None else now
    return max(0, round((when.timestamp() - current) * 1000))


def _server_message(body: Any, fallback: str) -> tuple[str, str | None]:
    """The error ``message`` and ``code`` of an OpenAI/DeepSeek error body."""
    error = body.get("error", body) if isinstance(body, dict) else None
    if isinstance(error, dict):
        message = error.get("message")
        code = error.get("code")
        return (message if isinstance(message, str) and message else fallback), (
            code if isinstance(code, str) else None
        )
    if isinstance(body, str) and body:
        return body, None
    return fallback, None


def classify_status(
    status: int, body: Any, headers: Mapping[str, str] | None = None, request_id: str | None = None
) -> LlmError:
    """The failure for an HTTP error answer."""
    message, server_code = _server_message(body, f"HTTP {status}")
    retry_after = parse_retry_after(headers)
    if status == 429:
        return LlmError(
            _failure(
                f"rate limited (HTTP 429): {message}",
                "RATE_LIMITED",
                status=status,
                retry_after_ms=retry_after,
                request_id=request_id,
            )
        )
    if status >= 500:
        return LlmError(
            _failure(
                f"server error (HTTP {status}): {message}",
                "SERVER",
                status=status,
                retry_after_ms=retry_after,
                request_id=request_id,
            )
        )
    if status in (401, 403):
        return LlmError(
            _failure(
                f"the model server refused the API key (HTTP {status}: {message}); set DEEPSEEK_API_KEY to a valid key",
                "INVALID_CREDENTIAL",
                status=status,
                request_id=request_id,
            )
        )
    if status == 402:
        return LlmError(
            _failure(f"quota exhausted (HTTP 402): {message}", "QUOTA", status=status, request_id=request_id)
        )
    if server_code == "context_length_exceeded" or _CONTEXT_PATTERN.search(message):
        return LlmError(
            _failure(
                f"context window exceeded: {message}", "CONTEXT_WINDOW_EXCEEDED", status=status, request_id=request_id
            )
        )
    return LlmError(
        _failure(f"request refused (HTTP {status}): {message}", "INVALID_REQUEST", status=status, request_id=request_id)
    )


_TIMEOUT_KINDS = {"ConnectTimeout": "connect", "ReadTimeout": "read", "WriteTimeout": "write", "PoolTimeout": "pool"}
"""The HTTP library's timeout exceptions, by the limit that expired (``write`` and ``pool`` use the read limit)."""


def _server(base_url: str | None) -> str:
    return "the model server" if base_url is None else f"the model server at {base_url}"


_NO_SUCH_NAME = frozenset(
    code for code in (getattr(socket, "EAI_NONAME", None), getattr(socket, "EAI_NODATA", None)) if code is not None
)
"""``getaddrinfo`` answers that mean the name does not exist (``EAI_AGAIN``, a resolver hiccup, is not one)."""


def _unknown_host(error: BaseException) -> bool:
    """Whether the exception chain holds a DNS answer that the host does not exist."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, socket.gaierror) and current.errno in _NO_SUCH_NAME:
            return True
        current = current.__cause__ or current.__context__
    return False


def _seconds(value: float) -> str:
    return f"{value:g} s"


def timeout_failure(kind: str | None, base_url: str | None = None, seconds: float | None = None) -> LlmError:
    """A ``TIMEOUT`` failure naming the limit that expired (``connect``, ``read``, ``total``, …) and the server."""
    if kind is None:
        return LlmError(_failure(f"{_server(base_url)} did not answer in time", "TIMEOUT"))
    limit = f"the {kind} timeout" + ("" if seconds is None else f" ({_seconds(seconds)})")
    what = {
        "connect": f"could not connect to {_server(base_url)} within {limit}",
        "read": f"{_server(base_url)} sent nothing for longer than {limit}",
        "total": f"{_server(base_url)} did not finish its answer within {limit}",
    }.get(kind, f"{_server(base_url)} did not answer within {limit}")
    return LlmError(_failure(what, "TIMEOUT"))


def _interrupted(base_url: str | None, cause: object) -> LlmError:
    message = f"the stream from {_server(base_url)} broke off before it finished: {cause}"
    return LlmError(_failure(message, "STREAM_INTERRUPTED"))


def _timeout_kind(error: BaseException) -> str | None:
    for candidate in (error, error.__cause__, error.__context__):
        if candidate is not None and type(candidate).__name__ in _TIMEOUT_KINDS:
            return _TIMEOUT_KINDS[type(candidate).__name__]
    return None


def classify_exception(
    error: BaseException,
    *,
    streaming: bool,
    base_url: str | None = None,
    limits: Mapping[str, float] | None = None,
) -> LlmError:
    """The failure for an exception raised by the client; ``streaming`` if the answer had begun.

    ``base_url`` names the server in every connection and timeout message (a wrong
    URL is the usual cause, and the message is all a user sees); ``limits`` gives the
    seconds of each timeout kind, so a timeout message can say which limit expired.
    """
    if isinstance(error, LlmError):
        return error
    if isinstance(error, openai.APIStatusError):
        response = error.response
        return classify_status(error.status_code, error.body, dict(response.headers), error.request_id)
    name = type(error).__name__
    if isinstance(error, openai.APITimeoutError) or "Timeout" in name or isinstance(error, TimeoutError):
        kind = _timeout_kind(error)
        seconds = None if kind is None else (limits or {}).get(kind)
        return timeout_failure(kind, base_url, seconds)
    if isinstance(error, openai.APIConnectionError):
        cause = error.__cause__ or error
        if streaming:
            return _interrupted(base_url, cause)
        if _unknown_host(error):
            message = f"cannot reach {_server(base_url)}: its host name is unknown ({cause}); check the base URL"
            return LlmError(_failure(message, "UNKNOWN_HOST"))
        return LlmError(_failure(f"cannot reach {_server(base_url)}: {cause}", "CONNECTION"))
    if isinstance(error, openai.APIError):  # e.g. an ``error`` event inside the stream
        return LlmError(_failure(f"model API error: {error.message}", "SERVER" if streaming else "UNKNOWN"))
    if streaming:  # transport errors of the HTTP library while reading the body
        return _interrupted(base_url, str(error) or name)
    if isinstance(error, OSError | httpx.TransportError):
        return LlmError(_failure(f"cannot reach {_server(base_url)}: {error}", "CONNECTION"))
    return LlmError(_failure(f"{name}: {error}", "UNKNOWN"))


_ANTHROPIC_TYPES = {
    "rate_limit_error": 429,
    "overloaded_error": 529,
    "api_error": 500,
    "authentication_error": 401,
    "permission_error": 403,
    "invalid_request_error": 400,
    "request_too_large": 413,
    "not_found_error": 404,
}
"""Anthropic error ``type`` s by the HTTP status they come with (an in-band stream error has no status)."""


def classify_anthropic_error(
    body: Any, status: int | None, headers: Mapping[str, str] | None = None, request_id: str | None = None
) -> LlmError:
    """The failure for an Anthropic Messages error: an HTTP error answer, or an ``error`` event mid-stream.

    The body is ``{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}``.
    An HTTP error is classified by its status, as the chat-completions client does; an
    in-band error (``status`` ``None``) by its ``type``, and it is never stored with a
    status it did not have. ``overloaded_error`` (HTTP 529) is a retryable ``SERVER``.
    """
    error = body.get("error") if isinstance(body, dict) else None
    kind = error.get("type") if isinstance(error, dict) else None
    if status is not None:
        failed = classify_status(status, body, headers, request_id)
    else:
        failed = classify_status(_ANTHROPIC_TYPES.get(str(kind), 500), body, headers, request_id)
        failed.failure.pop("status", None)
    if kind == "overloaded_error":
        message, _code = _server_message(body, "Overloaded")
        failed.failure["message"] = f"the model server is overloaded: {message}"
    return failed
