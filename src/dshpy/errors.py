"""Every error dshpy raises on purpose, in one tree.

Callers catch the branch that matches what they can do about it. The classes below
the store branch live beside the code that raises them (module in brackets) and
import their base from here, so this module stays the lowest layer::

    DshError                      anything dshpy refused or could not do
    ├── EventError                an event (or its data) is malformed; nothing was appended
    │   ├── SurfaceError          a surface rule refused it (surfaceOp, sourceEventSeqs, replace)
    │   ├── InvariantError        a lifecycle rule refused it (turn/step nesting, tool pairing)
    │   └── LifecycleError        the session state machine refused it (illegal transition)
    │       └── SessionArchivedError  the session is archived: it takes no more events
    ├── ForkError                 a fork was refused; ``.code`` says why (dsh's codes)
    │   └── DelegationDepthError  a sub-agent session deeper than the store's ``max_delegation_depth``
    ├── ReadOnlySessionError      the session handle cannot append (inspect view, closed, archived)
    ├── ProjectionError           a projection was misregistered, unknown, or its cached state unusable
    ├── CompactionError           compaction or pruning refused or failed; nothing was written; ``.code``
    │   ├── NothingToCompactError     no span can be compacted (empty session, one indivisible tool pair, …)
    │   ├── CompactionBusyError       another compaction bracket is still open in this lifecycle
    │   ├── UnbalancedSpanError       the span would separate a tool call from its result
    │   ├── CompactionChangedError    the span changed while its summary was being written
    │   ├── SummaryFailedError        the summarizer raised (the cause is chained)
    │   ├── SummaryRejectedError      the summary cannot replace the span (image output)
    │   │   ├── EmptySummaryError     the summary holds no text
    │   │   └── SummaryTooLargeError  the framed summary is not smaller than what it would shadow
    │   ├── ContextStillFullError     still over the threshold after every allowed compaction round
    │   └── PruneOutsideTurnError     a tool result can only be pruned inside an open turn
    ├── NotJsonError              a value cannot be stored as lossless JSON; ``.path`` locates it [core.json]
    ├── StoreError                persistence failed or refused
    │   ├── ConflictError         another writer got there first (expected seq was stale)
    │   │   └── SessionBusyError  the session is open for writing in another process (names the holder)
    │   ├── SessionNotFound       no session with that id
    │   ├── SessionExistsError    create() with an id that is already taken
    │   ├── InvalidSessionIdError the id is not a safe session id
    │   ├── StoreUnavailableError the store could not be reached or the connection broke mid-request
    │   ├── StoreFullError        the disk (or the database's quota) is full; the failing batch left nothing
    │   ├── ReadOnlyStoreError    the store can be read but not written (read-only filesystem or permissions)
    │   ├── CorruptSessionError   stored bytes are damaged before the recoverable tail
    │   └── FormatVersionError    stored data uses a format this build cannot read
    │       ├── UnknownEventTypeError  a required (non-ignorable) event type we do not know
    │       └── MigrationRefusedError  an upgrade edge cannot convert an old log; it stays as stored
    │                                  [log.formats.chain]
    ├── FormatError               a stored record lacks the shape its format version requires; a store
    │                             reports it as CorruptSessionError, an upgrade edge as its refusal
    │                             [log.formats.chain]
    ├── ZstdFrameError            a complete zstd frame is damaged; the JSONL backend reports it as
    │                             CorruptSessionError, it never reaches a store's caller [storage.jsonl.zstd_frames]
    ├── BodyError                 a stored event body the SQLite backend cannot decode; it reports it as
    │   │                         CorruptSessionError naming the row [storage.sqlite_bodies]
    │   └── UnknownDictionary     the body needs a compression dictionary this handle has not read yet; the
    │                             backend loads the store's dictionaries and retries [storage.sqlite_bodies]
    ├── ResumeError               a stored resume point is unusable; the store replays the log instead, it never
    │                             reaches a store's caller [log.resume]
    ├── QueryError                a session query was refused; ``.code`` is dsh's SESSION_QUERY_* [query.errors]
    │   ├── InvalidQueryError     the request is malformed (filter, cursor, limit, window, query text) [query.errors]
    │   ├── StaleCursorError      what the cursor paged changed (a session deleted, the index rebuilt) [query.errors]
    │   ├── QueryNotFoundError    no such session or event [query.errors]
    │   └── SemanticUnavailableError  semantic search without dshpy[semantic], or its model failing [query.embedding]
    ├── ConfigError               a setting (config file, flag, environment variable) is unusable; names it
    │   ├── CompactionConfigError a compaction policy that does not fit the model's context window
    │   ├── ModelConfigError      the model route or time limits are unusable [llm.config]
    │   │   └── MissingApiKeyError  no API key; says how to set one [llm.config]
    │   ├── ProfileError          the SDK/server profile is unknown or its file invalid [sdk.profiles]
    │   ├── PluginError           a plugin cannot be loaded or applied; names the plugin and where [plugins.host]
    │   ├── PatchError            a dsh patch file (the SDK's patches=) cannot be read or followed [server.dsh_patches]
    │   ├── PriceError            the price table for cost estimates is malformed [cli.prices]
    │   ├── PermissionConfigError a permission preset, approval policy or sandbox opt-out is unknown
    │   │                         [agent.permissions]
    │   ├── ToolSetError          a built-in tool set names no known set or tool [agent.builtin]

    │   ├── SystemPromptError     a --system-file cannot be used (missing, not UTF-8, too large) [agent.system_prompt]
    │   ├── InsecureBindError     a non-loopback HTTP bind without a token [server.http_guard]
    │   ├── TelemetryUnavailable  telemetry was asked for, OpenTelemetry is not installed [telemetry.switch]
    │   └── TelemetryConfigError  the ``OTEL_*`` settings name an exporter dshpy cannot set up [telemetry.providers]
    ├── LlmError                  a model call failed; ``.failure`` is dsh's LlmFailure [llm.failures]
    ├── AgentSetupError           the session cannot take this agent's configuration [agent.prologue]
    ├── AgentBusyError            a turn is already running on this agent [agent.loop]
    ├── JobError                  an unknown job id, too many running jobs, removing a running one [agent.jobs]
    ├── RpcError                  an error answered to a JSON-RPC caller (``code``, ``message``) [server.protocol]
    ├── FrameError                a JSON-RPC frame is not a valid request [server.protocol]
    ├── HarnessError              the server answered a client's request with an error [sdk.transport]
    │   ├── HarnessSessionNotFound  -32001: no such session (also a SessionNotFound) [sdk.transport]
    │   └── TransportClosedError  the connection to the server is gone [sdk.transport]
    └── CliError                  a ``dshpy`` command failed: one line on stderr, exit 1 [cli.app]
        └── DataError             damaged or unreadable data: exit 2 [cli.app]

Classes that were ``ValueError`` before they joined the tree still are
(``NotJsonError``, ``ZstdFrameError``, ``FormatError``, every ``ConfigError``), as are
``EventError``, ``InvalidSessionIdError`` and ``InvalidQueryError``; ``SessionNotFound`` is a
``KeyError`` (``QueryNotFoundError`` a ``LookupError``) and ``CliError`` a
``click.ClickException``, so older ``except`` clauses keep working.
Driver errors (``sqlite3``, ``psycopg``, ``OSError``) never leave a store raw: each
backend translates them in one place (``storage/sqlite_errors.py``,
``storage/postgres_connect.py``, ``storage/jsonl.py``).

``InvariantError`` and ``SurfaceError`` both carry the offending ``seq`` so that a log
loaded from disk points at the exact event that broke a rule.
"""

from __future__ import annotations

__all__ = [
    "CompactionBusyError",
    "CompactionChangedError",
    "CompactionConfigError",
    "CompactionError",
    "ConfigError",
    "ConflictError",
    "ContextStillFullError",
    "CorruptSessionError",
    "DelegationDepthError",
    "DshError",
    "EmptySummaryError",
    "EventError",
    "ForkError",
    "FormatVersionError",
    "InvalidSessionIdError",
    "InvariantError",
    "LifecycleError",
    "NothingToCompactError",
    "ProjectionError",
    "PruneOutsideTurnError",
    "ReadOnlySessionError",
    "ReadOnlyStoreError",
    "SessionArchivedError",
    "SessionBusyError",
    "SessionExistsError",
    "SessionNotFound",
    "StoreError",
    "StoreFullError",
    "StoreUnavailableError",
    "SummaryFailedError",
    "SummaryRejectedError",
    "SummaryTooLargeError",
    "SurfaceError",
    "UnbalancedSpanError",
    "UnknownEventTypeError",
]


class DshError(Exception):
    """Root of every error dshpy raises deliberately."""


class EventError(DshError, ValueError):
    """An event or its data was refused; the log is unchanged.

    ``event_type`` and ``seq`` name the candidate that was refused (``seq`` is the
    position it would have taken, or held in a stored log).
    """

    def __init__(self, message: str, *, event_type: str | None = None, seq: int | None = None) -> None:
        super().__init__(message)
        self.event_type = event_type
        self.seq = seq


class SurfaceError(EventError):
    """A surface rule (dsh-v4 §2.2, §3.2) refused the event."""


class InvariantError(EventError):
    """A lifecycle invariant (turn/step nesting, numbering, tool pairing) was broken.

    ``rule`` is a short stable name of the broken rule, for tests and tooling.
    """

    def __init__(self, message: str, *, rule: str, event_type: str | None = None, seq: int | None = None):
        super().__init__(message, event_type=event_type, seq=seq)
        self.rule = rule


class LifecycleError(EventError):
    """The session lifecycle (created → active ⇄ paused → completed | failed → archived) refused the event.

    Raised at append by the ``lifecycle`` projection's guard: an illegal
    ``plugin:dshpy/session-state`` transition, or a ``turn/start`` while the session
    is not running. ``state`` is the session's state before the candidate and
    ``target`` the state it asked for (``None`` when the candidate was not a
    state record).
    """

    def __init__(
        self,
        message: str,
        *,
        state: str,
        target: str | None = None,
        event_type: str | None = None,
        seq: int | None = None,
    ) -> None:
        super().__init__(message, event_type=event_type, seq=seq)
        self.state = state
        self.target = target


class ForkError(DshError):
    """A fork was refused; nothing was created.

    ``code`` is one of ``SESSION_NOT_FOUND``, ``SESSION_ALREADY_EXISTS``,
    ``INVALID_BOUNDARY``, ``OPEN_TURN`` (the codes dsh uses).
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class DelegationDepthError(ForkError):
    """A sub-agent session would be deeper than the store allows (``code`` ``DELEGATION_DEPTH_EXCEEDED``).

    The seed's reason for ``delegationDepth``: stop a sub-agent that delegates to a
    sub-agent that delegates … from recursing without end. Raised by ``fork(...,
    origin="subagent")`` past the maximum, and by ``create(delegation_depth=n)`` with
    ``n`` above it; nothing is created. ``depth`` is what was asked, ``maximum`` the limit.
    """

    def __init__(self, message: str, *, depth: int, maximum: int) -> None:
        super().__init__("DELEGATION_DEPTH_EXCEEDED", message)
        self.depth = depth
        self.maximum = maximum


class ReadOnlySessionError(DshError):
    """The session handle is read-only (an ``inspect`` view, or a closed handle)."""


class SessionArchivedError(LifecycleError, ReadOnlySessionError):
    """The session is archived, which makes it read-only: every append is refused.

    It is a :class:`LifecycleError` (the state machine refused the event) and a
    :class:`ReadOnlySessionError` (the handle cannot append), so either catch works.
    """


class ProjectionError(DshError):
    """A projection request was refused: a key registered twice with a different
    definition or ``state_version``, an unknown key, or cached state that does not validate."""


class CompactionError(DshError):
    """Compaction or tool-result pruning was refused or failed, and nothing was appended.

    ``code`` is a stable name for the case. Where dsh's ``ManualCompactionError`` has
    a code for the same situation it is used (``busy``, ``changed``, ``summary``), so a
    ``/compact`` front end can word the outcome as dsh does.
    """

    code = "compaction"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class NothingToCompactError(CompactionError):
    """No span can be compacted: the session is empty, the whole surface must be kept,
    or the only candidate would split one indivisible tool call from its result."""

    code = "empty"


class CompactionBusyError(CompactionError):
    """A ``compaction/start`` is still unmatched in this lifecycle: another compaction owns the session."""

    code = "busy"


class UnbalancedSpanError(CompactionError):
    """The requested span starts or ends between a tool call and its result."""

    code = "unbalanced"


class CompactionChangedError(CompactionError):
    """The span the summary was written for is no longer the same current surface span."""

    code = "changed"


class SummaryFailedError(CompactionError):
    """The summarizer raised; the original error is the ``__cause__``."""

    code = "summary"


class SummaryRejectedError(CompactionError):
    """The summarizer answered, but its output cannot stand in for the span."""

    code = "summary"


class EmptySummaryError(SummaryRejectedError):
    """The summary has no non-blank text (reasoning or tool calls alone do not count)."""


class SummaryTooLargeError(SummaryRejectedError):
    """The framed checkpoint would cost at least as many tokens as the span it replaces."""


class ContextStillFullError(CompactionError):
    """The estimated context is still over the threshold after every allowed round.

    ``result`` is the last compaction that did land (``None`` if none did): the log
    holds it even though the context did not shrink enough.
    """

    code = "insufficient"

    def __init__(self, message: str, *, result: object = None) -> None:
        super().__init__(message)
        self.result = result


class PruneOutsideTurnError(CompactionError):
    """dsh only accepts a replacing ``tool/result`` inside an open turn, so pruning needs one."""

    code = "outside-turn"


class ConfigError(DshError, ValueError):
    """A setting is not usable; the message names the setting and where it came from.

    Raised when the setting is read, before it is used, so a typo in a config file or
    a flag is reported once instead of surfacing later as an unreachable server or a
    failed request (which an agent would retry).
    """


class CompactionConfigError(ConfigError):
    """A compaction policy leaves no room in the model's context window (the message names the numbers)."""


class StoreError(DshError):
    """Persistence failed or refused the request."""


class ConflictError(StoreError):
    """A conditional append lost: the stored log did not end where the writer expected.

    ``expected_seq`` is the seq the writer wanted to write next and ``actual_seq``
    the stored log's next seq (when known).
    """

    def __init__(self, message: str, *, expected_seq: int | None = None, actual_seq: int | None = None):
        super().__init__(message)
        self.expected_seq = expected_seq
        self.actual_seq = actual_seq


class SessionBusyError(ConflictError):
    """The session is open for writing by another live handle (another process, or this one).

    Only one writer may hold a session; readers (``inspect``, ``read``) never need to.
    ``holder`` describes who holds it when the backend knows (``"pid 123 on host a"``);
    the error is a :class:`ConflictError` so code that already retries or reports
    conflicts handles it unchanged.
    """

    def __init__(self, message: str, *, holder: str | None = None) -> None:
        super().__init__(message)
        self.holder = holder


class SessionNotFound(StoreError, KeyError):
    """No session with this id exists in the store."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class SessionExistsError(StoreError):
    """A session with this id already exists."""


class InvalidSessionIdError(StoreError, ValueError):
    """The session id is not of the accepted shape; nothing was touched."""


class StoreUnavailableError(StoreError):
    """The store could not be reached, or the connection broke while a request was in flight.

    A write that raised this may or may not have committed (the reply can be lost after
    the commit). Retrying it is safe: an identical re-sent batch is recognized as already
    stored and succeeds without writing, and anything else gets :class:`ConflictError`.
    """


class StoreFullError(StoreError):
    """The disk or the database ran out of space while writing.

    The failing batch was not committed (nothing partial is left behind), so the
    session stays usable: free space and append again.
    """


class ReadOnlyStoreError(StoreError):
    """The store refused a write because it is read-only (read-only filesystem, file
    permissions, or a read-only database); reading it still works."""


class CorruptSessionError(StoreError):
    """Stored data is damaged in a committed region; nothing is repaired silently."""


class FormatVersionError(StoreError):
    """The stored format version cannot be read by this build (newer, or no upgrade path)."""


class UnknownEventTypeError(FormatVersionError):
    """A stored event has a type this build does not know and it is not marked ignorable."""
