"""Helpers shipped for testing code built on dshpy.

* :mod:`~dshpy.testing.fake_model` — :class:`FakeModelServer`, a scripted chat-completions server (stdlib only);
* :mod:`~dshpy.testing.otlp_receiver` — :class:`OtlpReceiver`, a loopback OTLP/HTTP receiver (decoding needs
  ``opentelemetry-proto``);
* :mod:`~dshpy.testing.builders` — realistic event data and whole turns;
* :mod:`~dshpy.testing.strategies` — Hypothesis strategies of valid logs (needs ``hypothesis``);
* :mod:`~dshpy.testing.contract` — the backend contract suite (needs ``pytest``).
"""

from dshpy.testing.fake_model import FakeModelServer, Reply, ToolCall, Usage
from dshpy.testing.otlp_receiver import OtlpReceiver

__all__ = ["FakeModelServer", "OtlpReceiver", "Reply", "ToolCall", "Usage"]
