"""dshpy: the session data plane of DeepSeek Harness in Python.

An agent's conversation is an append-only, typed event log per session (dsh format
v4); the model's message history is derived from it, never stored beside it.
"""

from typing import TYPE_CHECKING, Any

from dshpy.compaction import (
    BasicPolicy,
    BasicStrategy,
    CompactionEngine,
    CompactionResult,
    CompactionStrategy,
    ContextUsage,
    SummaryOutput,
    SummaryRequest,
    TokenMeter,
    ToolResultPruner,
    compact,
    context_usage,
    needs_compaction,
)
from dshpy.core.event_data import EVENT_DATA_SHAPES
from dshpy.core.events import SessionEvent, SurfaceOp, SurfaceReplace, decode_event, encode_event
from dshpy.core.ids import check_session_id, new_message_id, new_session_id
from dshpy.core.json import FrozenDict, FrozenList, freeze_json, thaw
from dshpy.core.vocabulary import KNOWN_EVENT_TYPES, SURFACE_EVENT_TYPES
from dshpy.errors import (
    CompactionBusyError,
    CompactionError,
    ConflictError,
    CorruptSessionError,
    DelegationDepthError,
    DshError,
    EventError,
    ForkError,
    FormatVersionError,
    InvalidSessionIdError,
    InvariantError,
    LifecycleError,
    NothingToCompactError,
    ProjectionError,
    ReadOnlySessionError,
    ReadOnlyStoreError,
    SessionArchivedError,
    SessionBusyError,
    SessionExistsError,
    SessionNotFound,
    StoreError,
    StoreFullError,
    StoreUnavailableError,
    SurfaceError,
    UnknownEventTypeError,
)
from dshpy.log.fork import ForkPlan, plan_fork
from dshpy.log.header import FORMAT_VERSION, SessionHeader
from dshpy.log.invariants import Lifecycle, validate
from dshpy.log.messages import Message
from dshpy.log.repair import interrupted_turn_closers, open_turn_closers
from dshpy.log.resume import ResumePoint
from dshpy.log.session import Session
from dshpy.log.versions import DEFAULT_CHAIN, Migration, MigrationChain
from dshpy.projections import (
    CachedState,
    ProjectionDefinition,
    ProjectionRegistry,
    ProjectionRunner,
    ProjectionState,
    set_lifecycle,
    snapshot,
    state_of,
)
from dshpy.query import (
    InvalidQueryError,
    QueryError,
    QueryNotFoundError,
    SearchHit,
    SearchPage,
    SessionFilter,
    SessionQuery,
    StaleCursorError,
)
from dshpy.sdk import AsyncHarnessClient, HarnessClient
from dshpy.storage import BaseStore, MemoryStore, PageRequest, SessionInfo, SessionStore, open_store

if TYPE_CHECKING:
    from dshpy.plugins import PluginContext, PluginError, PluginHost, load_plugins

__version__ = "0.1.0.dev0"

_LAZY = frozenset({"PluginContext", "PluginError", "PluginHost", "load_plugins"})
"""Names imported on first use: plugins sit on the agent runtime, which would make ``import dshpy`` load the
model client (and ``openai``) for every program that only stores sessions."""


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from dshpy import plugins

        return getattr(plugins, name)
    raise AttributeError(f"module 'dshpy' has no attribute {name!r}")

__all__ = [
    "DEFAULT_CHAIN",
    "EVENT_DATA_SHAPES",
    "FORMAT_VERSION",
    "KNOWN_EVENT_TYPES",
    "SURFACE_EVENT_TYPES",
    "AsyncHarnessClient",
    "BaseStore",
    "BasicPolicy",
    "BasicStrategy",
    "CachedState",
    "CompactionBusyError",
    "CompactionEngine",
    "CompactionError",
    "CompactionResult",
    "CompactionStrategy",
    "ConflictError",
    "ContextUsage",
    "CorruptSessionError",
    "DelegationDepthError",
    "DshError",
    "EventError",
    "ForkError",
    "ForkPlan",
    "FormatVersionError",
    "FrozenDict",
    "FrozenList",
    "HarnessClient",
    "InvalidQueryError",
    "InvalidSessionIdError",
    "InvariantError",
    "Lifecycle",
    "LifecycleError",
    "MemoryStore",
    "Message",
    "Migration",
    "MigrationChain",
    "NothingToCompactError",
    "PageRequest",
    "PluginContext",
    "PluginError",
    "PluginHost",
    "ProjectionDefinition",
    "ProjectionError",
    "ProjectionRegistry",
    "ProjectionRunner",
    "ProjectionState",
    "QueryError",
    "QueryNotFoundError",
    "ReadOnlySessionError",
    "ReadOnlyStoreError",
    "ResumePoint",
    "SearchHit",
    "SearchPage",
    "Session",
    "SessionArchivedError",
    "SessionBusyError",
    "SessionEvent",
    "SessionExistsError",
    "SessionFilter",
    "SessionHeader",
    "SessionInfo",
    "SessionNotFound",
    "SessionQuery",
    "SessionStore",
    "StaleCursorError",
    "StoreError",
    "StoreFullError",
    "StoreUnavailableError",
    "SummaryOutput",
    "SummaryRequest",
    "SurfaceError",
    "SurfaceOp",
    "SurfaceReplace",
    "TokenMeter",
    "ToolResultPruner",
    "UnknownEventTypeError",
    "__version__",
    "check_session_id",
    "compact",
    "context_usage",
    "decode_event",
    "encode_event",
    "freeze_json",
    "interrupted_turn_closers",
    "load_plugins",
    "needs_compaction",
    "new_message_id",
    "new_session_id",
    "open_store",
    "open_turn_closers",
    "plan_fork",
    "set_lifecycle",
    "snapshot",
    "state_of",
    "thaw",
    "validate",
]
