"""In-memory OpenTelemetry for the telemetry tests: every span and metric dshpy records, readable by name."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from otel_support import Recorded

import dshpy.telemetry


@pytest.fixture
def otel() -> Iterator[Recorded]:
    """Telemetry on, reporting to in-memory exporters; off again after the test."""
    recorded = Recorded()
    dshpy.telemetry.enable(tracer_provider=recorded.tracer_provider, meter_provider=recorded.meter_provider)
    try:
        yield recorded
    finally:
        dshpy.telemetry.disable()


@pytest.fixture
def otel_per_event() -> Iterator[Recorded]:
    """As ``otel``, with every appended event also a ``session.event`` span event (``session_events="per-event"``)."""
    recorded = Recorded()
    dshpy.telemetry.enable(
        tracer_provider=recorded.tracer_provider, meter_provider=recorded.meter_provider, session_events="per-event"
    )
    try:
        yield recorded
    finally:
        dshpy.telemetry.disable()


@pytest.fixture
def otel_content() -> Iterator[Recorded]:
    """As ``otel``, with content capture on and a redactor that masks the word "secret"."""
    recorded = Recorded()

    def redact(_name: str, value: Any) -> Any:
        text = json.dumps(value)
        if "drop-me" in text:
            return None
        return json.loads(text.replace("secret", "[redacted]"))

    dshpy.telemetry.enable(
        tracer_provider=recorded.tracer_provider,
        meter_provider=recorded.meter_provider,
        capture_content=True,
        redact=redact,
    )
    try:
        yield recorded
    finally:
        dshpy.telemetry.disable()
