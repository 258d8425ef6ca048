"""Reading what an OTLP receiver got: attribute values, the span tree (imported by name: tests/ has no packages)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def value_of(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [value_of(item) for item in any_value.array_value.values]
    return getattr(any_value, kind) if kind else None


def attributes(item: Any) -> dict[str, Any]:
    return {kv.key: value_of(kv.value) for kv in item.attributes}


def exporting_env(home: Path, endpoint: str, base_url: str | None = None, **extra: str) -> dict[str, str]:
    """A child's environment: a private home, the fake model, OTLP/HTTP to ``endpoint``, nothing else switched on."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DSHPY_", "DEEPSEEK_", "OTEL_"))}
    env.update(
        DSHPY_HOME=str(home),
        DEEPSEEK_API_KEY="test-key",
        OTEL_EXPORTER_OTLP_ENDPOINT=endpoint,
        OTEL_SERVICE_NAME="dshpy-e2e",
        OTEL_BSP_SCHEDULE_DELAY="50",
        OTEL_METRIC_EXPORT_INTERVAL="60000",
    )
    if base_url is not None:
        env["DEEPSEEK_BASE_URL"] = base_url
    env.update(extra)
    return env
