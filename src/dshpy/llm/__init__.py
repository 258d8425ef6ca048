"""The model clients (layer L5): OpenAI-compatible chat and Anthropic-format Messages, in dsh's stream vocabulary.

* :mod:`~dshpy.llm.client` — :class:`ChatClient` (chat completions; :class:`ResponseInfo`, what the server names
  besides chunks);
* :mod:`~dshpy.llm.anthropic` — :class:`AnthropicClient` (Messages API, provider ``deepseek-official``);
* :mod:`~dshpy.llm.anthropic_mapping` / :mod:`~dshpy.llm.anthropic_messages` — its stream and history mapping;
* :mod:`~dshpy.llm.protocol` — :class:`ModelClient`, :func:`make_client` (picks one by provider);
* :mod:`~dshpy.llm.config` — :class:`ModelConfig` (``DEEPSEEK_*`` environment), :class:`ModelTimeouts`;
* :mod:`~dshpy.llm.chunks` — dsh's ``StreamChunk`` vocabulary;
* :mod:`~dshpy.llm.mapping` — chat-completions chunks → ``StreamChunk`` s;
* :mod:`~dshpy.llm.stream` — packing chunks into ``AssistantStreamRecord`` runs (and back);
* :mod:`~dshpy.llm.surrogates` — rejoining surrogate pairs split between chunks;
* :mod:`~dshpy.llm.usage` — provider usage → ``TokenUsage`` buckets;
* :mod:`~dshpy.llm.failures` — :class:`LlmError` and the ``LlmFailure`` codes;
* :mod:`~dshpy.llm.retry` — :class:`RetryPolicy` (backoff honouring ``Retry-After``);
* :mod:`~dshpy.llm.messages` — derived messages → chat-completions messages.
"""

from dshpy.llm.anthropic import AnthropicClient
from dshpy.llm.client import ChatClient, ResponseInfo
from dshpy.llm.config import (
    DEFAULT_BASE_URL,
    DEFAULT_MODEL,
    MissingApiKeyError,
    ModelConfig,
    ModelConfigError,
    ModelTimeouts,
)
from dshpy.llm.failures import RETRYABLE_CODES, LlmError
from dshpy.llm.messages import to_chat_messages
from dshpy.llm.protocol import ModelClient, make_client
from dshpy.llm.retry import RetryPolicy
from dshpy.llm.stream import AssistantStreamAccumulator, expand_stream, pack_stream
from dshpy.llm.usage import token_usage

__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_MODEL",
    "RETRYABLE_CODES",
    "AnthropicClient",
    "AssistantStreamAccumulator",
    "ChatClient",
    "LlmError",
    "MissingApiKeyError",
    "ModelClient",
    "ModelConfig",
    "ModelConfigError",
    "ModelTimeouts",
    "ResponseInfo",
    "RetryPolicy",
    "expand_stream",
    "make_client",
    "pack_stream",
    "to_chat_messages",
    "token_usage",
]
