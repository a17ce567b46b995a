"""What a turn cost: a small, dated price table, overridable, and "unknown" rather than a guess.

The table (``prices.json`` beside this module) lists the common hosted models in US dollars per
million tokens, with the date it was read and its sources. Prices change, so the date goes with
every cost computed from it, and a model that is not in the table has an unknown cost: a name is
matched exactly, after dropping a provider prefix (``openai/gpt-4.1``) and a release-date or
``-latest`` suffix (``claude-sonnet-4-5-20250929``), never by likeness (``gpt-4.1-mini`` is not
``gpt-4.1``). A prompt above a model's ``max_input`` (a long-context price tier) is unknown too.

The user's own prices come first: a JSON file of the same shape named by ``NB_AGENT_PRICES``
(read on each lookup, so a changed file applies at once), then :func:`set_price`.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from nb_agent.errors import UsageError

TABLE = Path(__file__).resolve().parent / "prices.json"
ENV = "NB_AGENT_PRICES"
_SUFFIX = re.compile(r"(?:[-@](?:\d{8}|\d{4}-\d{2}-\d{2})|-latest)$")


@dataclass(frozen=True)
class Price:
    """Per million tokens, in ``currency``; ``cached_input`` / ``cache_write`` ``None``: not priced apart."""

    model: str
    input: float
    output: float
    cached_input: float | None = None
    cache_write: float | None = None
    max_input: int | None = None
    currency: str = "USD"
    source: str = ""  # "price table 2025-11-25", "NB_AGENT_PRICES (file)", "set_price"


@dataclass(frozen=True)
class Cost:
    amount: float
    currency: str
    source: str


_own: dict[str, Price] = {}


def _entries(data: Any, source: str, where: str) -> dict[str, Price]:
    if not isinstance(data, dict) or not isinstance(data.get("models"), dict):
        raise UsageError(f'{where}: a price table is a JSON object with a "models" object')
    currency = str(data.get("currency") or "USD")
    out: dict[str, Price] = {}
    for name, row in data["models"].items():
        try:
            price = Price(
                model=str(name),
                input=float(row["input"]),
                output=float(row["output"]),
                cached_input=None if row.get("cached_input") is None else float(row["cached_input"]),
                cache_write=None if row.get("cache_write") is None else float(row["cache_write"]),
                max_input=None if row.get("max_input") is None else int(row["max_input"]),
                currency=currency,
                source=source,
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            raise UsageError(f'{where}: the price of {name!r} needs numbers for "input" and "output"') from None
        for key in (str(name), *[str(a) for a in row.get("aliases") or ()]):
            out[key.lower()] = price
    return out


@cache
def packaged() -> tuple[str, dict[str, Price]]:
    """The package's table: (its date, its prices by model name)."""
    data = json.loads(TABLE.read_text())
    as_of = str(data.get("as_of", "undated"))
    return as_of, _entries(data, f"price table {as_of}", str(TABLE))


def _from_file(path: str) -> dict[str, Price]:
    try:
        data = json.loads(Path(path).expanduser().read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(f"{ENV}={path}: cannot read the price table: {exc}") from None
    return _entries(data, f"{ENV} ({Path(path).name})", f"{ENV}={path}")


def set_price(
    model: str, *, input: float, output: float, cached_input: float | None = None, cache_write: float | None = None
) -> None:
    """Your price for ``model`` (per million tokens, USD), over the table's."""
    _own[model.lower()] = Price(model, input, output, cached_input, cache_write, source="set_price")


def _keys(model: str) -> list[str]:
    name = model.strip().lower()
    bare = name.rsplit("/", 1)[-1]
    keys = [name, bare]
    for key in (name, bare):
        stripped = _SUFFIX.sub("", key)
        if stripped != key:
            keys.append(stripped)
    return list(dict.fromkeys(keys))


def price_for(model: str | None) -> Price | None:
    """The price of ``model``: yours (``NB_AGENT_PRICES``, then :func:`set_price`), else the table's."""
    if not model:
        return None
    tables: list[dict[str, Price]] = []
    if path := os.environ.get(ENV):
        tables.append(_from_file(path))
    tables += [_own, packaged()[1]]
    for table in tables:
        for key in _keys(model):
            if key in table:
                return table[key]
    return None


def cost_of(
    model: str | None,
    *,
    input_tokens: int | None,
    output_tokens: int | None,
    cached_tokens: int | None = None,
    cache_write_tokens: int | None = None,
) -> Cost | str:
    """The cost of a turn, or why it is unknown. ``cached_tokens`` and ``cache_write_tokens`` are
    parts of ``input_tokens``; without a price of their own they are priced as input."""
    if input_tokens is None or output_tokens is None:
        return "tokens not reported"
    price = price_for(model)
    if price is None:
        return f"no price for {model}" if model else "the model is not known"
    if price.max_input is not None and input_tokens > price.max_input:
        return f"{price.model} above {price.max_input:,} input tokens is priced differently"
    cached = min(cached_tokens or 0, input_tokens)
    written = min(cache_write_tokens or 0, input_tokens - cached)
    plain = input_tokens - cached - written
    amount = (
        plain * price.input
        + cached * (price.input if price.cached_input is None else price.cached_input)
        + written * (price.input if price.cache_write is None else price.cache_write)
        + output_tokens * price.output
    ) / 1_000_000
    return Cost(amount, price.currency, price.source)


__all__ = ["ENV", "Cost", "Price", "cost_of", "packaged", "price_for", "set_price"]
