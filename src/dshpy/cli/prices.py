"""Model prices for cost estimates: USD per million tokens, per model, from the user's configuration.

The ``usage`` projection counts tokens, never money (prices change, tokens do not),
so ``dshpy sessions stats`` prices them here, and only when the user said what they
pay. Prices come from ``$DSHPY_HOME/config.toml``::

    [prices."deepseek-chat"]      # USD per 1M tokens
    input = 0.27                  # uncached input tokens (a cache miss)
    cache_read = 0.07             # input tokens served from the provider's cache (default: input)
    cache_write = 0.27            # input tokens written to the cache (default: input)
    output = 1.10                 # output tokens, reasoning included

and from ``$DSHPY_PRICES``, a JSON object of the same shape
(``{"deepseek-chat": {"input": 0.27, "output": 1.10}}``), whose models replace the
file's. A table key is a model name, or ``provider/model`` to price one provider's
model apart (the more specific key wins). Reasoning tokens are part of the output
tokens and are not priced again. Tokens of a model without a price are reported as
unpriced, and the total is then marked incomplete rather than guessed.
"""

from __future__ import annotations

import math
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from dshpy.errors import ConfigError
from dshpy.storage.urls import dshpy_home

__all__ = ["CONFIG_FILENAME", "PRICES_ENV", "Price", "PriceError", "PriceTable", "estimate_cost", "load_prices"]

CONFIG_FILENAME = "config.toml"
PRICES_ENV = "DSHPY_PRICES"
_FIELDS = ("input", "cache_read", "cache_write", "output")
_PER_TOKENS = 1_000_000


class PriceError(ConfigError):
    """The price configuration is malformed (the message names the file or variable and the field)."""


@dataclass(frozen=True, slots=True)
class Price:
    """USD per 1M tokens of each bucket the ``usage`` projection counts."""

    input: float
    output: float
    cache_read: float
    cache_write: float

    def cost(self, tokens: Mapping[str, Any]) -> float:
        """USD for a ``TokenCounts`` JSON object (``inputTokens``, ``cacheReadTokens``, …)."""

        def count(name: str) -> int:
            value = tokens.get(name)
            return value if type(value) is int and value > 0 else 0

        return (
            count("inputTokens") * self.input
            + count("cacheReadTokens") * self.cache_read
            + count("cacheWriteTokens") * self.cache_write
            + count("outputTokens") * self.output
        ) / _PER_TOKENS


@dataclass(frozen=True, slots=True)
class PriceTable:
    """Prices by model key, and where they were read from."""

    prices: dict[str, Price]
    sources: tuple[str, ...]

    def __bool__(self) -> bool:
        return bool(self.prices)

    def price_of(self, provider: str | None, model: str | None) -> Price | None:
        if model is None:
            return None
        if provider is not None:
            specific = self.prices.get(f"{provider}/{model}")
            if specific is not None:
                return specific
        return self.prices.get(model)


def _number(value: Any, where: str) -> float:
    if type(value) not in (int, float) or not math.isfinite(value) or value < 0:
        raise PriceError(f"{where} must be a non-negative number (USD per 1M tokens), got {value!r}")
    return float(value)


def _parse(table: Any, origin: str) -> dict[str, Price]:
    if not isinstance(table, dict):
        raise PriceError(f"{origin}: prices must be a table of models")
    prices: dict[str, Price] = {}
    for model, fields in table.items():
        where = f'{origin}: prices."{model}"'
        if not isinstance(fields, dict):
            raise PriceError(f"{where} must be a table with input and output (USD per 1M tokens)")
        unknown = sorted(set(fields) - set(_FIELDS))
        if unknown:
            raise PriceError(f"{where} has unknown field {unknown[0]!r} (known: {', '.join(_FIELDS)})")
        missing = [name for name in ("input", "output") if name not in fields]
        if missing:
            raise PriceError(f"{where} lacks {missing[0]} (USD per 1M tokens)")
        base = _number(fields["input"], f"{where}.input")
        prices[str(model)] = Price(
            input=base,
            output=_number(fields["output"], f"{where}.output"),
            cache_read=_number(fields.get("cache_read", base), f"{where}.cache_read"),
            cache_write=_number(fields.get("cache_write", base), f"{where}.cache_write"),
        )
    return prices


def load_prices(home: Path | None = None, environ: Mapping[str, str] | None = None) -> PriceTable:
    """The configured prices (empty when nothing is configured); :class:`PriceError` if a source is malformed."""
    env = os.environ if environ is None else environ
    path = (dshpy_home() if home is None else home) / CONFIG_FILENAME
    prices: dict[str, Price] = {}
    sources: list[str] = []
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raw = None
    except OSError as error:
        raise PriceError(f"cannot read {path}: {error.strerror or error}") from None
    if raw is not None:
        try:
            config = tomllib.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
            raise PriceError(f"{path} is not valid TOML: {error}") from None
        if "prices" in config:
            prices.update(_parse(config["prices"], str(path)))
            sources.append(str(path))
    text = env.get(PRICES_ENV)
    if text:
        try:
            table = orjson.loads(text)
        except orjson.JSONDecodeError as error:
            raise PriceError(f"${PRICES_ENV} is not a JSON object: {error}") from None
        prices.update(_parse(table, f"${PRICES_ENV}"))
        sources.append(f"${PRICES_ENV}")
    return PriceTable(prices, tuple(sources))


def estimate_cost(usage: Mapping[str, Any], table: PriceTable) -> dict[str, Any]:
    """The cost of a ``usage`` projection value: ``{currency, total, complete, byModel, unpriced, sources}``.

    ``total`` sums the priced models; ``complete`` is false when some model that used
    tokens has no price (its entry in ``byModel`` has ``usd: null`` and it is named in
    ``unpriced``).
    """
    total = 0.0
    rows: list[dict[str, Any]] = []
    unpriced: list[str] = []
    entries = usage.get("byModel")
    for entry in entries if isinstance(entries, list) else ():
        if not isinstance(entry, dict):
            continue
        provider, model = entry.get("provider"), entry.get("model")
        found = entry.get("tokens")
        tokens: dict[str, Any] = found if isinstance(found, dict) else {}
        price = table.price_of(
            provider if isinstance(provider, str) else None, model if isinstance(model, str) else None
        )
        used = any(type(v) is int and v > 0 for v in tokens.values())
        usd = None if price is None else price.cost(tokens)
        if usd is not None:
            total += usd
        elif used:
            unpriced.append(model if isinstance(model, str) else "(unknown model)")
        rows.append({"provider": provider, "model": model, "usd": usd})
    return {
        "currency": "USD",
        "total": total,
        "complete": not unpriced,
        "byModel": rows,
        "unpriced": unpriced,
        "sources": list(table.sources),
    }
