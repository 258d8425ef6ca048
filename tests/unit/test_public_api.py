"""Pins the public API: additions are deliberate, removals break this test."""

import dshpy

PROJECTIONS = {
    "CachedState",
    "LifecycleError",
    "ProjectionDefinition",
    "ProjectionError",
    "ProjectionRegistry",
    "ProjectionRunner",
    "ProjectionState",
    "SessionArchivedError",
    "set_lifecycle",
    "snapshot",
    "state_of",
}

COMPACTION = {
    "BasicPolicy",
    "BasicStrategy",
    "CompactionBusyError",
    "CompactionEngine",
    "CompactionError",
    "CompactionResult",
    "CompactionStrategy",
    "ContextUsage",
    "NothingToCompactError",
    "SummaryOutput",
    "SummaryRequest",
    "TokenMeter",
    "ToolResultPruner",
    "compact",
    "context_usage",
    "needs_compaction",
}

QUERY = {
    "InvalidQueryError",
    "QueryError",
    "QueryNotFoundError",
    "SearchHit",
    "SearchPage",
    "SessionFilter",
    "SessionQuery",
    "StaleCursorError",
}

PLUGINS = {
    "DelegationDepthError",
    "PluginContext",
    "PluginError",
    "PluginHost",
    "load_plugins",
}

EXPECTED = (
    PROJECTIONS
    | COMPACTION
    | QUERY
    | PLUGINS
    | {
        "DEFAULT_CHAIN",
        "EVENT_DATA_SHAPES",
        "FORMAT_VERSION",
        "KNOWN_EVENT_TYPES",
        "SURFACE_EVENT_TYPES",
        "BaseStore",
        "ConflictError",
        "CorruptSessionError",
        "DshError",
        "EventError",
        "ForkError",
        "ForkPlan",
        "FormatVersionError",
        "FrozenDict",
        "FrozenList",
        "InvalidSessionIdError",
        "InvariantError",
        "Lifecycle",
        "MemoryStore",
        "Message",
        "Migration",
        "MigrationChain",
        "ReadOnlySessionError",
        "ResumePoint",
        "Session",
        "SessionEvent",
        "SessionExistsError",
        "SessionHeader",
        "PageRequest",
        "SessionInfo",
        "SessionNotFound",
        "SessionStore",
        "StoreError",
        "StoreUnavailableError",
        "HarnessClient",
        "AsyncHarnessClient",
        "SessionBusyError",
        "StoreFullError",
        "ReadOnlyStoreError",
        "SurfaceError",
        "SurfaceOp",
        "SurfaceReplace",
        "UnknownEventTypeError",
        "__version__",
        "check_session_id",
        "decode_event",
        "encode_event",
        "freeze_json",
        "interrupted_turn_closers",
        "new_message_id",
        "new_session_id",
        "open_store",
        "open_turn_closers",
        "plan_fork",
        "thaw",
        "validate",
    }
)


def test_all_is_pinned():
    assert set(dshpy.__all__) == EXPECTED
    assert len(dshpy.__all__) == len(set(dshpy.__all__))


def test_every_exported_name_exists():
    for name in dshpy.__all__:
        assert getattr(dshpy, name) is not None, name


def test_error_tree():
    assert issubclass(dshpy.ConflictError, dshpy.StoreError)
    assert issubclass(dshpy.SessionNotFound, dshpy.StoreError)
    assert issubclass(dshpy.CorruptSessionError, dshpy.StoreError)
    assert issubclass(dshpy.FormatVersionError, dshpy.StoreError)
    assert issubclass(dshpy.StoreUnavailableError, dshpy.StoreError)
    assert issubclass(dshpy.UnknownEventTypeError, dshpy.FormatVersionError)
    assert issubclass(dshpy.StoreError, dshpy.DshError)
    assert issubclass(dshpy.InvariantError, dshpy.DshError)
    assert issubclass(dshpy.ForkError, dshpy.DshError)
    assert issubclass(dshpy.LifecycleError, dshpy.EventError)
    assert issubclass(dshpy.SessionArchivedError, dshpy.LifecycleError)
    assert issubclass(dshpy.SessionArchivedError, dshpy.ReadOnlySessionError)
    assert issubclass(dshpy.ProjectionError, dshpy.DshError)
    assert issubclass(dshpy.SessionBusyError, dshpy.ConflictError)
    assert issubclass(dshpy.StoreFullError, dshpy.StoreError)
    assert issubclass(dshpy.ReadOnlyStoreError, dshpy.StoreError)
    assert issubclass(dshpy.QueryError, dshpy.DshError)
    assert issubclass(dshpy.InvalidQueryError, dshpy.QueryError)
    assert issubclass(dshpy.InvalidQueryError, ValueError)
    assert issubclass(dshpy.StaleCursorError, dshpy.QueryError)
    assert issubclass(dshpy.QueryNotFoundError, dshpy.QueryError)
    assert issubclass(dshpy.CompactionError, dshpy.DshError)
    assert issubclass(dshpy.CompactionBusyError, dshpy.CompactionError)
    assert issubclass(dshpy.NothingToCompactError, dshpy.CompactionError)


def test_open_store_rejects_unknown_schemes_clearly():
    import pytest

    with pytest.raises(dshpy.StoreError, match=r"available: .*memory:"):
        dshpy.open_store("ftp://x/y")
    with pytest.raises(dshpy.StoreError, match="invalid store URL"):
        dshpy.open_store("no-scheme")
    assert isinstance(dshpy.open_store("memory:"), dshpy.MemoryStore)
