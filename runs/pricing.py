"""What model tokens cost, in USD per million tokens.

Order of precedence: the model configuration's own prices, then the JSON file named by the
``LLM_PRICE_TABLE`` setting, then the built-in table below. A model found nowhere (a local
vLLM or Ollama model, say) costs nothing, so a configuration with a cost budget must name a
price for it (``ModelConfig.clean``; the gateway will not start such a budget either). Names
match exactly, then without a provider prefix (``openai/gpt-4o`` -> ``gpt-4o``), then by the
longest known prefix (``gpt-4o-2024-08-06``).

The file format::

    {"my-model": {"input_per_mtok": 0.5, "output_per_mtok": 1.5}, ...}
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


class Priced(Protocol):
    """What ``price_for`` reads of a model: an agent's ``ModelSettings``, or ``PriceQuery``."""

    @property
    def model_name(self) -> str: ...

    @property
    def price_input_per_mtok(self) -> float | None: ...

    @property
    def price_output_per_mtok(self) -> float | None: ...


@dataclass(frozen=True, slots=True)
class PriceQuery:
    """A model name and the prices its configuration sets, if any (the gateway's question)."""

    model_name: str
    price_input_per_mtok: float | None = None
    price_output_per_mtok: float | None = None


@dataclass(frozen=True, slots=True)
class Price:
    input_per_mtok: float
    output_per_mtok: float

    def cost(self, tokens_in: int, tokens_out: int) -> float:
        return (tokens_in * self.input_per_mtok + tokens_out * self.output_per_mtok) / 1e6


# List prices (standard tier, prompts under 200k tokens, no cache or batch discounts); override
# them with LLM_PRICE_TABLE. Sources: OpenAI's https://openai.com/api/pricing and Anthropic's
# https://docs.claude.com/en/docs/about-claude/pricing, as listed in November 2025; Gemini:
# https://ai.google.dev/gemini-api/docs/pricing. Names match by their longest known prefix,
# so a family that changed price (Opus 4.5) needs its own entry.
DEFAULT_PRICES: dict[str, Price] = {
    # OpenAI
    "gpt-5": Price(1.25, 10.0),
    "gpt-5-codex": Price(1.25, 10.0),
    "gpt-5-mini": Price(0.25, 2.0),
    "gpt-5-nano": Price(0.05, 0.4),
    "gpt-5-pro": Price(15.0, 120.0),
    "gpt-4o": Price(2.5, 10.0),
    "gpt-4o-mini": Price(0.15, 0.6),
    "gpt-4.1": Price(2.0, 8.0),
    "gpt-4.1-mini": Price(0.4, 1.6),
    "gpt-4.1-nano": Price(0.1, 0.4),
    "o1": Price(15.0, 60.0),
    "o1-mini": Price(1.1, 4.4),
    "o3": Price(2.0, 8.0),
    "o3-pro": Price(20.0, 80.0),
    "o3-mini": Price(1.1, 4.4),
    "o4-mini": Price(1.1, 4.4),
    # Anthropic (dotted and dashed spellings of the 3.x names)
    "claude-opus-4": Price(15.0, 75.0),
    "claude-opus-4-1": Price(15.0, 75.0),
    "claude-opus-4-5": Price(5.0, 25.0),
    "claude-sonnet-4": Price(3.0, 15.0),
    "claude-sonnet-4-5": Price(3.0, 15.0),
    "claude-haiku-4-5": Price(1.0, 5.0),
    "claude-3.7-sonnet": Price(3.0, 15.0),
    "claude-3-7-sonnet": Price(3.0, 15.0),
    "claude-3.5-sonnet": Price(3.0, 15.0),
    "claude-3-5-sonnet": Price(3.0, 15.0),
    "claude-3.5-haiku": Price(0.8, 4.0),
    "claude-3-5-haiku": Price(0.8, 4.0),
    "claude-3-opus": Price(15.0, 75.0),
    "claude-3-haiku": Price(0.25, 1.25),
    # Others
    "deepseek-chat": Price(0.27, 1.1),
    "gemini-2.0-flash": Price(0.1, 0.4),
    "gemini-2.5-pro": Price(1.25, 10.0),
    "gemini-2.5-flash": Price(0.3, 2.5),
}


class PriceTableError(ValueError):
    """The price table file is unreadable or malformed; the message names the entry."""


def load_price_table(path: str | Path | None) -> dict[str, Price]:
    """The built-in table updated with the entries of the JSON file at ``path`` (if any)."""
    table = dict(DEFAULT_PRICES)
    if not path:
        return table
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise PriceTableError(f"{path}: cannot read the price table: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise PriceTableError(f"{path}:{exc.lineno}: invalid JSON: {exc.msg}") from exc
    if not isinstance(raw, dict):
        raise PriceTableError(f"{path}: expected an object mapping model names to prices")
    for name, entry in raw.items():
        if not isinstance(entry, dict):
            raise PriceTableError(f"{path}: {name}: expected an object with the two prices")
        values = []
        for key in ("input_per_mtok", "output_per_mtok"):
            value = entry.get(key)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise PriceTableError(f"{path}: {name}.{key}: expected a number >= 0")
            values.append(float(value))
        table[name] = Price(*values)
    return table


def price_for(model: Priced, table: dict[str, Price]) -> Price | None:
    if model.price_input_per_mtok is not None or model.price_output_per_mtok is not None:
        return Price(model.price_input_per_mtok or 0.0, model.price_output_per_mtok or 0.0)
    name = model.model_name
    for candidate in (name, name.rsplit("/", 1)[-1]):
        if candidate in table:
            return table[candidate]
    short = name.rsplit("/", 1)[-1]
    prefixes = [key for key in table if short.startswith(key)]
    return table[max(prefixes, key=len)] if prefixes else None
