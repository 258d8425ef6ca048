"""The agent runtime (layer L5): a turn/step loop that writes dsh v4's events, tools, hooks.

* :mod:`~dshpy.agent.loop` — :class:`Agent`: turns, steps, retries, cancellation, checkpoints;
* :mod:`~dshpy.agent.tools` — ``@tool``, :class:`Tool`, :class:`ToolOutput`, :class:`ToolContext`;
* :mod:`~dshpy.agent.builtin` — :func:`builtin_tools`: ``read``, ``write``, ``edit``, ``glob``, ``grep``,
  ``bash``, ``job_output``, ``job_list``, ``job_kill``, ``todo_write`` with dsh's names and schemas;
* :mod:`~dshpy.agent.jobs` — :class:`JobRegistry`: dsh's jobs (``job/registered`` … ``job/settled``);
* :mod:`~dshpy.agent.runtime_context`, :mod:`~dshpy.agent.fallback_title`, :mod:`~dshpy.agent.session_log` —
  dsh's runtime-context snapshot, fallback ``session/title`` and session-log upload;
* :mod:`~dshpy.agent.permissions` — :class:`Permissions` (dsh's presets), :func:`record_permissions`,
  audited approvals (:class:`ApprovalRequest`);
* :mod:`~dshpy.agent.hooks` — ``turn-start``, ``pre-step``, ``tool-call``, ``turn-stopping`` and the observing
  ``model-request``, ``tool-start``, ``tool-end``, ``turn-end``;
* :mod:`~dshpy.agent.compaction` — :class:`~dshpy.agent.compaction.AgentCompaction`: the pressure check
  before each request, overflow recovery, the summary call on the session's route;
* :mod:`~dshpy.agent.compact_command` — dsh's ``/compact`` (``command/run`` … ``command/done``);
* :mod:`~dshpy.agent.prologue` — system prompt, ``request/header``, ``request/context`` bookkeeping;
* :mod:`~dshpy.agent.records` — the event payloads, in dsh's shapes;
* :mod:`~dshpy.agent.updates` — live :class:`ChunkUpdate` / :class:`EventUpdate`, :class:`TurnResult`.

::

    store = dshpy.open_store("sqlite:///sessions.db")
    async with Agent(store.create(), ChatClient(), system_prompt="Be brief.", tools=[read_file]) as agent:
        result = await agent.run("What does a.txt say?", on_chunk=lambda u: print(u.text, end=""))
"""

from dshpy.agent.builtin import BUILTIN_TOOL_NAMES, builtin_tools
from dshpy.agent.hooks import (
    HOOK_NAMES,
    ModelRequest,
    PreStep,
    RequestError,
    ToolCallHook,
    ToolEnd,
    ToolStart,
    TurnEnd,
    TurnStart,
    TurnStopping,
)
from dshpy.agent.jobs import JobError, JobRegistry, jobs_of
from dshpy.agent.loop import DEFAULT_MAX_STEPS, Agent, AgentBusyError, AgentSetupError
from dshpy.agent.permissions import ApprovalRequest, PermissionConfigError, Permissions, record_permissions
from dshpy.agent.tools import Tool, ToolContext, ToolOutcome, ToolOutput, tool
from dshpy.agent.updates import ChunkUpdate, EventUpdate, TurnResult, Update

__all__ = [
    "BUILTIN_TOOL_NAMES",
    "DEFAULT_MAX_STEPS",
    "HOOK_NAMES",
    "Agent",
    "AgentBusyError",
    "AgentSetupError",
    "ApprovalRequest",
    "ChunkUpdate",
    "EventUpdate",
    "JobError",
    "JobRegistry",
    "ModelRequest",
    "PermissionConfigError",
    "Permissions",
    "PreStep",
    "RequestError",
    "Tool",
    "ToolCallHook",
    "ToolContext",
    "ToolEnd",
    "ToolOutcome",
    "ToolOutput",
    "ToolStart",
    "TurnEnd",
    "TurnResult",
    "TurnStart",
    "TurnStopping",
    "Update",
    "builtin_tools",
    "jobs_of",
    "record_permissions",
    "tool",
]
