"""Per-model context windows and the compaction switch, from ``$DSHPY_HOME/config.toml``.

::

    [models."deepseek-chat"]
    context_window = 131072       # tokens the model's context holds

    [compaction]
    auto = false                  # no automatic compaction (/compact and `sessions compact` still work)

The window a run uses is, first to last: ``--context-window`` (or the SDK's
``context_window=``), the model's ``[models."…"]`` table, dshpy's built-in table of
DeepSeek's models (:data:`dshpy.compaction.DEFAULT_CONTEXT_WINDOWS`). The agent logs
it in ``request/context.contextWindow`` and compacts against it; a model with no
known window is never compacted for pressure (only after the provider refuses a
request as too long). ``--no-auto-compact`` turns automatic compaction off for one
run whatever the file says.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dshpy.compaction.window import default_context_window

from .profiles import ProfileError, config_path

__all__ = ["ModelSettings", "load_model_settings"]


@dataclass(frozen=True, slots=True)
class ModelSettings:
    """The ``[models]`` windows and the ``[compaction]`` switch of one config file."""

    context_windows: Mapping[str, int] = field(default_factory=dict)
    auto_compact: bool = True

    def context_window(self, model: str, override: int | None = None) -> int | None:
        """The window for ``model``: ``override``, else the file's, else the built-in default."""
        if override is not None:
            return override
        return self.context_windows.get(model) or default_context_window(model)


def _document(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ProfileError(f"{path}: {error}") from None


def load_model_settings(home: Path | None = None) -> ModelSettings:
    """The settings in ``config.toml`` under ``home`` (default ``$DSHPY_HOME``); a missing file is all defaults."""
    path = config_path(home)
    document = _document(path)
    windows: dict[str, int] = {}
    models = document.get("models", {})
    if not isinstance(models, dict):
        raise ProfileError(f"{path}: [models] must be a table of models")
    for name, table in models.items():
        window = table.get("context_window") if isinstance(table, dict) else None
        if window is None:
            continue
        if type(window) is not int or window < 1:
            raise ProfileError(f'{path}: [models."{name}"] context_window must be a positive integer, not {window!r}')
        windows[name] = window
    compaction = document.get("compaction", {})
    auto = compaction.get("auto", True) if isinstance(compaction, dict) else True
    if not isinstance(auto, bool):
        raise ProfileError(f"{path}: [compaction] auto must be true or false, not {auto!r}")
    return ModelSettings(windows, auto)
