"""The store URL as a value: ``memory:``, ``sqlite:///path.db``, ``jsonl:///dir``, ``postgresql://…``.

Parsing lives apart from :mod:`dshpy.storage.urls`, which builds a store from a URL,
because the backends read their own options from a parsed URL: were the value type
beside the factory table, every backend would import the module that imports it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlsplit

from dshpy.errors import StoreError

__all__ = ["StoreURL", "parse_store_url"]

_FILE_SCHEMES = frozenset({"sqlite", "jsonl"})


@dataclass(frozen=True, slots=True)
class StoreURL:
    """A parsed store URL: ``scheme``, the path or DSN, and query ``options``."""

    scheme: str
    location: str
    options: dict[str, str] = field(default_factory=dict)
    raw: str = ""


def parse_store_url(url: str) -> StoreURL:
    """Split a store URL; ``sqlite:///rel.db`` is relative, ``sqlite:////abs.db`` absolute."""
    if not isinstance(url, str) or ":" not in url:
        raise StoreError(f"invalid store URL {url!r}: expected e.g. memory:, sqlite:///sessions.db, jsonl:///dir")
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    options = dict(parse_qsl(parts.query, keep_blank_values=True))
    if scheme in ("postgresql", "postgres"):
        return StoreURL("postgresql", url.split("?", 1)[0], options, url)
    if scheme == "memory":
        return StoreURL("memory", "", options, url)
    if scheme not in _FILE_SCHEMES:
        return StoreURL(scheme, url.split("?", 1)[0], options, url)
    if parts.netloc not in ("", "localhost"):
        raise StoreError(f"invalid store URL {url!r}: a {scheme} store is local; write {scheme}:///path")
    path = parts.path
    if path.startswith("/"):
        path = path[1:]  # sqlite:///rel -> "rel", sqlite:////abs -> "/abs"
    if not path:
        raise StoreError(f"invalid store URL {url!r}: no path")
    return StoreURL(scheme, path, options, url)
