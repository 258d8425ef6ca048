"""``jsonl:///dir``: dsh v4's own on-disk layout, so dsh and dshpy share session roots."""

from dshpy.storage.jsonl.store import COMPRESSIONS, PROJECTION_CACHE_FILENAME, JsonlStore

__all__ = ["COMPRESSIONS", "PROJECTION_CACHE_FILENAME", "JsonlStore"]
