"""Who may talk to the HTTP server: the checks every request passes before it is routed.

The trust model is plain: **one token = one trusted principal**. Whoever holds
the token (or, without a token, whoever can reach the loopback port) may do
everything the server can do — read any session, change the model settings
with ``initialize`` — except what is switched off below. What the guard keeps
out is *a web page* driving the server through a visitor's browser:

* ``Authorization: Bearer <token>`` when a token is set (``401`` otherwise);
* without a token, ``Host`` must be a loopback name (DNS rebinding, ``403``);
* ``Origin``, when a browser sends one, must be the server's own origin or in
  the configured allow-list (``403``); ``Sec-Fetch-Site: cross-site|same-site``
  without an allowed origin is refused too (``403``). Non-browser clients send
  neither header and pass. No CORS headers are ever sent, so a browser's
  preflight for a cross-origin JSON POST fails as well.

``Content-Type: application/json`` on ``POST /rpc`` (``415``) is checked by the
route: a ``text/plain`` form post is the classic way around CORS preflights.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from dshpy.errors import ConfigError

__all__ = ["InsecureBindError", "RequestGuard", "is_loopback", "normalize_origin"]

_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})
_CROSS_SITE = frozenset({"cross-site", "same-site"})


class InsecureBindError(ConfigError):
    """A non-loopback bind address without a token."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts local connections: ``localhost`` or a loopback IP (``[::1]`` too).

    Decides whether the server may run without a token; a name that is not an IP
    (other than ``localhost``) is not trusted to resolve to loopback.
    """
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def normalize_origin(origin: str) -> str:
    """``scheme://host[:port]`` lowercased without a trailing slash (browsers send exactly that)."""
    cleaned = origin.strip().rstrip("/").lower()
    if "://" not in cleaned or cleaned.count("/") != 2:
        raise ValueError(f"not an origin (scheme://host[:port]): {origin!r}")
    return cleaned


def _own_origins(host: str, port: int) -> set[str]:
    names = {"127.0.0.1", "localhost", "[::1]"}
    if host not in ("0.0.0.0", "::", ""):
        names.add(f"[{host}]" if ":" in host and not host.startswith("[") else host)
    return {f"http://{name}:{port}" for name in names}


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why the guard stopped a request: the HTTP ``status`` (401 or 403) and the ``message`` sent as ``{"error"}``."""

    status: int
    message: str


class RequestGuard:
    """Decides, from the headers alone, whether a request may be routed."""

    def __init__(self, *, token: str | None, host: str, port: int, allowed_origins: Iterable[str] = ()) -> None:
        if not token and not is_loopback(host):
            raise InsecureBindError(
                f"refusing to listen on {host} without a token: pass --token or set DSHPY_TOKEN "
                "(only loopback addresses may be served without one)"
            )
        self._token = token.encode() if token else None
        self._extra_origins = frozenset(normalize_origin(origin) for origin in allowed_origins)
        self._origins = frozenset(_own_origins(host, port)) | self._extra_origins
        self._host = host

    def bound(self, port: int) -> None:
        """Learn the real port (after binding port 0): the server's own origins depend on it."""
        self._origins = frozenset(_own_origins(self._host, port)) | self._extra_origins

    def check(self, headers: Mapping[str, str], *, token_required: bool = True) -> Refusal | None:
        """``None`` if the request may be routed, else the :class:`Refusal` to answer it with.

        The token is checked first, so a client without it learns nothing about the
        Host and Origin rules; the Host check applies only without a token (a token
        already defeats DNS rebinding). ``token_required=False`` is for what holds no
        data (the web UI's page and scripts, which a browser fetches without headers):
        Host and Origin are still checked.
        """
        if token_required and not self._authorized(headers.get("authorization", "")):
            return Refusal(401, "missing or wrong bearer token")
        if (self._token is None or not token_required) and not self._host_allowed(headers.get("host", "")):
            return Refusal(403, "Host header is not a loopback name")
        origin = headers.get("origin")
        if origin is not None:
            try:
                allowed = normalize_origin(origin) in self._origins
            except ValueError:
                allowed = False
            if not allowed:
                return Refusal(403, f"cross-origin request refused (Origin {origin[:100]!r} is not allowed)")
        elif headers.get("sec-fetch-site", "").lower() in _CROSS_SITE:
            return Refusal(403, "cross-site request refused")
        return None

    def _authorized(self, header: str) -> bool:
        if self._token is None:
            return True
        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer":
            return False
        return hmac.compare_digest(given.strip().encode(), self._token)

    @staticmethod
    def _host_allowed(host: str) -> bool:
        if not host:
            return True
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        return name.lower() in _LOOPBACK_NAMES or is_loopback(name)
