"""Query-string parameters of the UI's JSON endpoints, checked with a message naming what is wrong."""

from __future__ import annotations

from dshpy.query.errors import InvalidQueryError

__all__ = ["MAX_PAGE", "page_size", "seq_param"]

MAX_PAGE = 1000
_INVALID = "SESSION_QUERY_INVALID_FILTER"


def page_size(value: str | None, default: int) -> int:
    """``limit``: an integer 1..:data:`MAX_PAGE` (``default`` when absent)."""
    if value is None or value == "":
        return default
    if not value.isdigit() or not 1 <= int(value) <= MAX_PAGE:
        raise InvalidQueryError(_INVALID, f"limit must be an integer 1..{MAX_PAGE}, not {value!r}")
    return int(value)


def seq_param(name: str, value: str | None) -> int:
    """A seq or position parameter: a non-negative integer (0 when absent)."""
    if value is None or value == "":
        return 0
    if not value.isdigit():
        raise InvalidQueryError(_INVALID, f"{name} must be a non-negative integer, not {value!r}")
    return int(value)
