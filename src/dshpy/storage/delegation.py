"""How deep sub-agents may delegate: the check behind the header's ``delegationDepth``.

The seed records ``delegationDepth`` in the header "to prevent endless recursion": a
session an agent forks for a sub-agent (``origin: "subagent"``) sits one level below
its parent. A store refuses a session deeper than its ``max_delegation_depth``
(:data:`DEFAULT_MAX_DELEGATION_DEPTH` unless configured — the store attribute, or the
``max_delegation_depth`` option of a store URL), before anything is written.
"""

from __future__ import annotations

from dshpy.core.events import is_seq
from dshpy.errors import DelegationDepthError

__all__ = ["DEFAULT_MAX_DELEGATION_DEPTH", "check_delegation_depth", "checked_maximum"]

DEFAULT_MAX_DELEGATION_DEPTH = 4
"""A sub-agent may delegate three more times below the first one (depth 1 … 4)."""


def checked_maximum(value: object) -> int:
    """``value`` as a maximum depth: a non-negative integer (a URL option's text too), else ``ValueError``."""
    number = int(value) if isinstance(value, str) and value.strip().isdigit() else value
    if not isinstance(number, int) or not is_seq(number):
        raise ValueError(f"max_delegation_depth must be a non-negative integer, not {value!r}")
    return number


def check_delegation_depth(depth: int, maximum: int, what: str) -> None:
    """Refuse ``what`` (a sentence naming the session) at ``depth`` beyond ``maximum``."""
    if depth > maximum:
        raise DelegationDepthError(
            f"{what} would be at delegation depth {depth}, deeper than this store's max_delegation_depth "
            f"{maximum} (a sub-agent delegating without end?); raise the limit if that depth is intended",
            depth=depth,
            maximum=maximum,
        )
