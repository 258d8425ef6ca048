"""Persistence: the caller's contract, the backend's contract, store URLs and the backends."""

from dshpy.storage.backend import (
    CAPABILITIES,
    BulkListing,
    ChangeFeed,
    IndexedReads,
    MetadataQueries,
    OwnWriters,
    PagedListing,
    ProjectionCache,
    StorageBackend,
    WriterLeases,
    ZeroCopyForks,
)
from dshpy.storage.base import BaseStore, events_digest
from dshpy.storage.contract import SessionStore
from dshpy.storage.listing_page import PageRequest
from dshpy.storage.memory import MemoryStore
from dshpy.storage.records import SessionInfo, StoredRecord
from dshpy.storage.urls import StoreURL, open_store, parse_store_url, register_backend

__all__ = [
    "CAPABILITIES",
    "BaseStore",
    "BulkListing",
    "ChangeFeed",
    "IndexedReads",
    "MemoryStore",
    "MetadataQueries",
    "OwnWriters",
    "PageRequest",
    "PagedListing",
    "ProjectionCache",
    "SessionInfo",
    "SessionStore",
    "StorageBackend",
    "StoreURL",
    "StoredRecord",
    "WriterLeases",
    "ZeroCopyForks",
    "events_digest",
    "open_store",
    "parse_store_url",
    "register_backend",
]
