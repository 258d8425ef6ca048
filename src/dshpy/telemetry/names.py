"""The names dshpy's telemetry emits: OpenTelemetry's GenAI semantic conventions first, then the seed's, then ours.

Model calls and tool executions follow the GenAI conventions (``gen_ai.*``, span
names ``chat {model}``, ``execute_tool {tool}``, ``invoke_agent {agent}``; metrics
``gen_ai.client.token.usage``, ``gen_ai.client.operation.duration``,
``gen_ai.client.operation.time_to_first_chunk`` with the buckets the conventions
give). The per-event record keeps the seed's names (dsh's ``session.event`` with
``session.id``, ``event.type``, ``event.seq``; ``session.id`` is also OpenTelemetry's
session attribute). What neither defines — steps, store flushes, compactions, tool
counts — is namespaced ``dshpy.*``. Kept as plain strings, so naming a span costs no
OpenTelemetry import.
"""

from __future__ import annotations

# -- GenAI semantic conventions -------------------------------------------------------------
GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK = "gen_ai.response.time_to_first_chunk"
GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS = "gen_ai.usage.cache_read.input_tokens"
GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
GEN_AI_USAGE_REASONING_OUTPUT_TOKENS = "gen_ai.usage.reasoning.output_tokens"
GEN_AI_CONVERSATION_ID = "gen_ai.conversation.id"
GEN_AI_AGENT_NAME = "gen_ai.agent.name"
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID = "gen_ai.tool.call.id"
GEN_AI_TOOL_TYPE = "gen_ai.tool.type"
GEN_AI_TOOL_DESCRIPTION = "gen_ai.tool.description"
GEN_AI_TOKEN_TYPE = "gen_ai.token.type"
GEN_AI_INPUT_MESSAGES = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES = "gen_ai.output.messages"
GEN_AI_TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT = "gen_ai.tool.call.result"
ERROR_TYPE = "error.type"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"

OPERATION_CHAT = "chat"
OPERATION_EXECUTE_TOOL = "execute_tool"
OPERATION_INVOKE_AGENT = "invoke_agent"

METRIC_TOKEN_USAGE = "gen_ai.client.token.usage"
METRIC_OPERATION_DURATION = "gen_ai.client.operation.duration"
METRIC_TIME_TO_FIRST_CHUNK = "gen_ai.client.operation.time_to_first_chunk"
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)
DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)

# -- the seed's per-event record (dsh-ch09 §9.9) -----------------------------------------------
SESSION_EVENT = "session.event"
SESSION_ID = "session.id"
EVENT_TYPE = "event.type"
EVENT_SEQ = "event.seq"

# -- dshpy's own ------------------------------------------------------------------------------
TURN = "dshpy.turn"
STEP = "dshpy.step"
ATTEMPT = "dshpy.llm.attempt"
"""Which try of the step's model request (1, then one more per retry)."""
TURN_REASON = "dshpy.turn.reason"
PARENT_SESSION_ID = "dshpy.session.parent_id"
STORE_BACKEND = "dshpy.store.backend"
FLUSH_EVENTS = "dshpy.store.flush.events"
FLUSH_BYTES = "dshpy.store.flush.bytes"
FLUSH_FIRST_SEQ = "dshpy.store.flush.first_seq"
FLUSH_EVENT_TYPES = "dshpy.store.flush.event_types"
"""The batch's event types in seq order: event ``i`` is seq ``first_seq + i`` (the seed's ``session.event``)."""
FLUSH_FSYNC_MS = "dshpy.store.flush.fsync_ms"
"""Milliseconds of the flush spent in the backend's durable step (its fsync, or its commit)."""
RETRY_DELAY_MS = "dshpy.llm.retry.delay_ms"
COMPACTION_REASON = "dshpy.compaction.reason"

SPAN_STEP = "dshpy.step"
SPAN_FLUSH = "dshpy.store.flush"
SPAN_COMPACTION = "dshpy.compaction"
EVENT_ATTEMPT_FAILED = "dshpy.llm.attempt_failed"
EVENT_RETRY = "dshpy.llm.retry"

METRIC_EVENTS = "dshpy.session.events"
METRIC_TOOL_CALLS = "dshpy.tool.calls"
METRIC_TOOL_DURATION = "dshpy.tool.duration"
METRIC_RETRIES = "dshpy.llm.retries"
METRIC_FLUSH_DURATION = "dshpy.store.flush.duration"
METRIC_FLUSH_EVENTS = "dshpy.store.flush.events"
METRIC_COMPACTIONS = "dshpy.compactions"
FLUSH_DURATION_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
FLUSH_EVENT_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096)

INSTRUMENTATION_SCOPE = "dshpy"
