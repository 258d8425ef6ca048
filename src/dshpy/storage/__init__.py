"""Persistence: the store contract, store URLs and the backends."""

from dshpy.storage.base import BaseStore, SessionInfo, SessionStore, events_digest
from dshpy.storage.memory import MemoryStore
from dshpy.storage.urls import StoreURL, open_store, parse_store_url, register_backend

__all__ = [
    "BaseStore",
    "MemoryStore",
    "SessionInfo",
    "SessionStore",
    "StoreURL",
    "events_digest",
    "open_store",
    "parse_store_url",
    "register_backend",
]
