"""Store URLs, in SQLAlchemy's style: ``memory:``, ``sqlite:///path.db``, ``jsonl:///dir``, ``postgresql://…``.

``dsh:`` is a shorthand for dsh's own session root, so dshpy and dsh share one store:
``$DSH_HOME/sessions`` (``~/.dsh/sessions`` without ``DSH_HOME``), laid out and
compressed as the runtime writes it (zstd); ``dsh:///path/to/dsh-home`` names another
harness home, ``?compression=none`` a root that dsh was patched to write plain.

Backends register a factory per scheme; :func:`open_store` parses the URL and hands
the factory the path and the query options, so adding a backend never touches callers.
The URL value and its parser live in :mod:`dshpy.storage.store_url` (re-exported here):
a backend reads its options from it without importing this module, which imports the backends.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from dshpy.errors import StoreError
from dshpy.storage.base import BaseStore
from dshpy.storage.delegation import checked_maximum
from dshpy.storage.store_url import StoreURL, parse_store_url

__all__ = [
    "StoreURL",
    "check_relative_reading",
    "default_store_url",
    "dsh_home",
    "dsh_sessions_root",
    "dshpy_home",
    "open_store",
    "parse_store_url",
    "register_backend",
    "store_location",
]


Factory = Callable[[StoreURL], BaseStore]
_BACKENDS: dict[str, Factory] = {}


def register_backend(scheme: str, factory: Factory) -> None:
    """Make ``open_store`` build ``scheme:`` URLs with ``factory``."""
    _BACKENDS[scheme] = factory


def _memory(url: StoreURL) -> BaseStore:
    from dshpy.storage.memory import MemoryStore

    return MemoryStore()


def _sqlite(url: StoreURL) -> BaseStore:
    from dshpy.storage.sqlite import SqliteStore

    timeout = url.options.get("busy_timeout_ms")
    return SqliteStore(url.location, busy_timeout_ms=int(timeout) if timeout else 10_000)


def _jsonl(url: StoreURL) -> BaseStore:
    from dshpy.storage.jsonl import JsonlStore

    return JsonlStore.from_url(url)


def _postgresql(url: StoreURL) -> BaseStore:
    from dshpy.storage.postgres import PostgresStore  # needs the [postgres] extra, so imported on use

    return PostgresStore.from_url(url)


def dsh_home() -> Path:
    """dsh's harness home: ``$DSH_HOME``, default ``~/.dsh`` (as the runtime resolves it)."""
    configured = os.environ.get("DSH_HOME", "").strip()
    return Path(configured).expanduser() if configured else Path.home() / ".dsh"


def dsh_sessions_root(url: StoreURL) -> Path:
    """The session root a ``dsh:`` URL names: ``<dsh home>/sessions``."""
    rest = url.raw.split("?", 1)[0][len("dsh:") :]
    if rest in ("", "//", "///"):
        return (dsh_home() / "sessions").resolve()
    if not rest.startswith("///"):
        raise StoreError(f"invalid store URL {url.raw!r}: write dsh: (for $DSH_HOME) or dsh:///path/to/dsh-home")
    return (Path(rest[3:]).expanduser() / "sessions").resolve()


def _dsh(url: StoreURL) -> BaseStore:
    from dshpy.storage.jsonl import JsonlStore

    unknown = sorted(set(url.options) - {"compression"})
    if unknown:
        raise StoreError(f"unknown dsh store option {unknown[0]!r} in {url.raw!r} (known: compression)")
    return JsonlStore(dsh_sessions_root(url), compression=url.options.get("compression", "zstd"))


def store_location(url: StoreURL) -> Path | None:
    """Where a file-backed store lives on disk (``None`` for a server or memory store)."""
    if url.scheme in ("sqlite", "jsonl"):
        return Path(url.location)
    if url.scheme == "dsh":
        return dsh_sessions_root(url)
    return None


register_backend("memory", _memory)
register_backend("sqlite", _sqlite)
register_backend("jsonl", _jsonl)
register_backend("postgresql", _postgresql)
register_backend("dsh", _dsh)


def dshpy_home() -> Path:
    """``$DSHPY_HOME``, default ``~/.dshpy``: where the default store and config live."""
    return Path(os.environ.get("DSHPY_HOME") or Path.home() / ".dshpy")


def default_store_url() -> str:
    """``$DSHPY_STORE`` if set, else the embedded default ``sqlite:///$DSHPY_HOME/sessions.db``."""
    configured = os.environ.get("DSHPY_STORE")
    if configured:
        return configured
    return f"sqlite:///{(dshpy_home() / 'sessions.db').resolve()}"


def check_relative_reading(url: StoreURL) -> None:
    """Refuse a three-slash file URL that reads as a relative path nobody meant.

    Store URLs follow SQLAlchemy: ``jsonl:///tmp/x`` is the *relative* path ``tmp/x``
    and ``jsonl:////tmp/x`` the absolute ``/tmp/x``. Most people expect the first to be
    absolute; silently creating ``./tmp/x`` would hide their sessions. So a relative
    path whose first directory does not exist here but does exist at the root (the
    absolute reading) is refused with the four-slash form to write instead. A plain
    relative name (``sqlite:///sessions.db``) or one under an existing directory is
    never refused.
    """
    if url.scheme not in ("sqlite", "jsonl") or url.location.startswith("/"):
        return
    relative = Path(url.location)
    if len(relative.parts) < 2 or relative.exists() or Path(relative.parts[0]).exists():
        return
    absolute = Path("/") / relative
    if not Path("/", relative.parts[0]).exists():
        return
    query = url.raw.split("?", 1)[1] if "?" in url.raw else ""
    four = f"{url.scheme}:///{absolute}" + (f"?{query}" if query else "")
    raise StoreError(
        f"store URL {url.raw!r} names the relative path {url.location!r} (three slashes, then a path relative to "
        f"the current directory), which does not exist; for {str(absolute)!r} write {four}"
    )


def open_store(url: str) -> BaseStore:
    """Open the store a URL names. Unknown schemes list the available ones."""
    parsed = parse_store_url(url)
    check_relative_reading(parsed)
    factory = _BACKENDS.get(parsed.scheme)
    if factory is None:
        known = ", ".join(f"{scheme}:" for scheme in sorted(_BACKENDS))
        raise StoreError(f"no store backend for {parsed.scheme!r} in {url!r} (available: {known})")
    depth = parsed.options.get("max_delegation_depth")  # every backend's option, so taken before its factory
    if depth is None:
        return factory(parsed)
    try:
        maximum = checked_maximum(depth)
    except ValueError as error:
        raise StoreError(f"invalid store URL {url!r}: {error}") from None
    options = {k: v for k, v in parsed.options.items() if k != "max_delegation_depth"}
    store = factory(replace(parsed, options=options))
    store.max_delegation_depth = maximum
    return store
