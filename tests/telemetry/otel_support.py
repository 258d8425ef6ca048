"""Helpers for the telemetry tests (imported by name: tests/ has no packages)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import dshpy
from dshpy.agent import Agent, TurnResult
from dshpy.llm import ChatClient, ModelConfig
from dshpy.llm.retry import RetryPolicy
from dshpy.testing.fake_model import FakeModelServer, Reply


class Recorded:
    """An SDK tracer provider and meter provider whose output the test reads back."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def spans(self, prefix: str = "") -> list[ReadableSpan]:
        return [span for span in self.exporter.get_finished_spans() if span.name.startswith(prefix)]

    def one(self, prefix: str) -> ReadableSpan:
        found = self.spans(prefix)
        assert len(found) == 1, [span.name for span in self.exporter.get_finished_spans()]
        return found[0]

    def points(self, name: str) -> list[Any]:
        """The data points of metric ``name`` (empty if it was never recorded)."""
        data = self.reader.get_metrics_data()
        if data is None:
            return []
        return [
            point
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == name
            for point in metric.data.data_points
        ]

    def total(self, name: str, **attributes: Any) -> float:
        """The sum of a counter's (or a histogram's) points whose attributes include ``attributes``."""
        found = 0.0
        for point in self.points(name):
            if all(point.attributes.get(key) == value for key, value in attributes.items()):
                found += point.value if hasattr(point, "value") else point.sum
        return found


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def span_id(span: ReadableSpan) -> int:
    context = span.get_span_context()
    assert context is not None
    return context.span_id


def run_turn(
    session: dshpy.Session,
    replies: Sequence[Reply],
    prompt: str = "hi",
    *,
    tools: Sequence[Any] = (),
    retry: RetryPolicy | None = None,
    max_tokens: int | None = None,
) -> TurnResult:
    """One agent turn on ``session`` against a FakeModelServer answering ``replies``."""

    async def turn() -> TurnResult:
        with FakeModelServer(replies) as server:
            config = ModelConfig.from_env(base_url=server.base_url, api_key="test", env={})
            async with ChatClient(config) as client:
                agent = Agent(
                    session,
                    client,
                    tools=tools,
                    retry=retry or RetryPolicy(base_delay=0.001, jitter=0),
                    max_tokens=max_tokens,
                )
                return await agent.run(prompt)

    return asyncio.run(turn())
