"""What model tokens cost, in USD per million tokens, per token class as providers bill them.

A call's usage is four classes (``TokenClasses``): input read fresh, input written to the
prompt cache, input read from the cache, and output. Anthropic reports the cached classes
apart from ``input_tokens`` (``cache_creation_input_tokens``, ``cache_read_input_tokens``);
OpenAI counts its ``cached_tokens`` inside the prompt and bills no cache writes. Each class
has its own price (``Price``); the cost of a call is ``Price.breakdown(classes)``, a
``CostBreakdown`` whose ``total`` is None, with ``reason``, when a class with tokens has no
price: an unknown cost is said to be unknown, never shown as $0.

Where prices come from, first found wins: the model configuration's own prices (input and
output only), the JSON file named by the ``LLM_PRICE_TABLE`` setting (kept for old set-ups;
``manage.py import_prices`` loads it into the table), then the price table's rows effective
on the call's date (``PriceRow``: the ``runs.PriceEntry`` model, edited in the admin; a
gateway used without Django reads ``LIST_PRICES``, the list prices shipped with the code). A
model found nowhere (a local vLLM or Ollama model, say) has no price: its cost is unknown,
and a configuration with a cost budget must name a price for it (``ModelConfig.clean``; the
gateway will not start such a budget either). Names match exactly, then without a provider
prefix (``openai/gpt-4o`` -> ``gpt-4o``), then by the longest matching prefix
(``gpt-4o-2024-08-06``).

The file format::

    {"my-model": {"input_per_mtok": 0.5, "output_per_mtok": 1.5,
                  "cache_write_per_mtok": 0.625, "cache_read_per_mtok": 0.05}, ...}

(the cache prices are optional).
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

# What a budget counts an unpriced cache class at, as a multiple of the input price: the
# highest any provider lists for a cache class (Anthropic's 1-hour cache write, 2x input), so
# a cost budget is never undercounted by a price nobody entered. The cost shown stays unknown.
UNPRICED_CACHE_BUDGET_FACTOR = 2.0


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
class TokenClasses:
    """One call's (or many calls') tokens by how they are billed. ``input`` excludes cached
    input; ``cache_write_1h`` is the part of ``cache_write`` written for an hour (Anthropic's
    ``cache_creation.ephemeral_1h_input_tokens``), billed at its own price."""

    input: int = 0
    cache_write: int = 0
    cache_read: int = 0
    output: int = 0
    cache_write_1h: int = 0

    @property
    def input_total(self) -> int:
        """Every input token, cached or not (the figure ``tokens_in`` has always shown)."""
        return self.input + self.cache_write + self.cache_read

    def __add__(self, other: TokenClasses) -> TokenClasses:
        return TokenClasses(
            self.input + other.input,
            self.cache_write + other.cache_write,
            self.cache_read + other.cache_read,
            self.output + other.output,
            self.cache_write_1h + other.cache_write_1h,
        )


@dataclass(frozen=True, slots=True)
class CostBreakdown:
    """USD per class; ``total`` None (with ``reason``) when some class with tokens is unpriced."""

    input: float = 0.0
    cache_write: float = 0.0
    cache_read: float = 0.0
    output: float = 0.0
    reason: str = ""  # "no price for <model>", "no cache read price for <model>"

    @property
    def known(self) -> bool:
        return not self.reason

    @property
    def total(self) -> float | None:
        if self.reason:
            return None
        return self.input + self.cache_write + self.cache_read + self.output

    def __add__(self, other: CostBreakdown) -> CostBreakdown:
        return CostBreakdown(
            self.input + other.input,
            self.cache_write + other.cache_write,
            self.cache_read + other.cache_read,
            self.output + other.output,
            self.reason or other.reason,
        )

    def as_record(self) -> dict[str, float | str | None]:
        """The breakdown as model_calls.jsonl and the summaries write it."""
        return {
            "input": round(self.input, 8),
            "cache_write": round(self.cache_write, 8),
            "cache_read": round(self.cache_read, 8),
            "output": round(self.output, 8),
            "total": None if self.total is None else round(self.total, 8),
            "reason": self.reason or None,
        }


@dataclass(frozen=True, slots=True)
class AttemptCost:
    """An attempt's tokens by class and their cost (``cost.reason`` set: unknown), as the
    attempt row keeps them (runs.lifecycle.attempt_finish)."""

    tokens: TokenClasses
    cost: CostBreakdown

    def __add__(self, other: AttemptCost) -> AttemptCost:
        return AttemptCost(self.tokens + other.tokens, self.cost + other.cost)


def unpriced(model: str) -> CostBreakdown:
    return CostBreakdown(reason=f"no price for {model or 'an unnamed model'}")


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens of each class. A cache price None: not listed (a configuration's
    own prices name input and output only)."""

    input_per_mtok: float
    output_per_mtok: float
    cache_write_per_mtok: float | None = None
    cache_read_per_mtok: float | None = None
    cache_write_1h_per_mtok: float | None = None

    def cost(self, tokens_in: int, tokens_out: int) -> float:
        """Uncached input and output only: what a call's reservation is estimated at."""
        return (tokens_in * self.input_per_mtok + tokens_out * self.output_per_mtok) / 1e6

    def breakdown(self, tokens: TokenClasses, model: str = "") -> CostBreakdown:
        missing = []
        write_5m = tokens.cache_write - tokens.cache_write_1h
        for count, price, what in (
            (write_5m, self.cache_write_per_mtok, "cache write"),
            (tokens.cache_write_1h, self.cache_write_1h_per_mtok, "1-hour cache write"),
            (tokens.cache_read, self.cache_read_per_mtok, "cache read"),
        ):
            if count and price is None:
                missing.append(what)
        write = write_5m * (self.cache_write_per_mtok or 0.0) + tokens.cache_write_1h * (
            self.cache_write_1h_per_mtok or 0.0
        )
        return CostBreakdown(
            input=tokens.input * self.input_per_mtok / 1e6,
            cache_write=write / 1e6,
            cache_read=tokens.cache_read * (self.cache_read_per_mtok or 0.0) / 1e6,
            output=tokens.output * self.output_per_mtok / 1e6,
            reason=f"no {' or '.join(missing)} price for {model}" if missing else "",
        )

    def budget_cost(self, tokens: TokenClasses) -> float:
        """What the classes count against a cost budget: their cost, an unpriced cache class
        at ``UNPRICED_CACHE_BUDGET_FACTOR`` times the input price (module docstring)."""
        bound = self.input_per_mtok * UNPRICED_CACHE_BUDGET_FACTOR
        filled = Price(
            self.input_per_mtok,
            self.output_per_mtok,
            bound if self.cache_write_per_mtok is None else self.cache_write_per_mtok,
            bound if self.cache_read_per_mtok is None else self.cache_read_per_mtok,
            bound if self.cache_write_1h_per_mtok is None else self.cache_write_1h_per_mtok,
        )
        return filled.breakdown(tokens).total or 0.0


def price_record(price: Price) -> dict[str, float | None]:
    """A price as model_calls.jsonl writes it (``price``)."""
    return {
        "input_per_mtok": price.input_per_mtok,
        "output_per_mtok": price.output_per_mtok,
        "cache_write_per_mtok": price.cache_write_per_mtok,
        "cache_read_per_mtok": price.cache_read_per_mtok,
        "cache_write_1h_per_mtok": price.cache_write_1h_per_mtok,
    }


@dataclass(frozen=True, slots=True)
class PriceRow:
    """One row of the price table: a model name (or name prefix) and its prices from
    ``effective_from`` up to, not including, ``effective_to`` (None: still in effect)."""

    pattern: str
    price: Price
    effective_from: dt.date
    effective_to: dt.date | None = None
    source: str = ""

    def in_effect(self, day: dt.date) -> bool:
        return self.effective_from <= day and (self.effective_to is None or day < self.effective_to)


# The list prices shipped with the code, and by migration 0023 into the price table (standard
# tier, prompts under 200k tokens, no batch discount). Sources: Anthropic's
# https://docs.claude.com/en/docs/about-claude/pricing and OpenAI's
# https://platform.openai.com/docs/pricing, as listed on 2025-11-01 (written from the team's
# knowledge of those pages, not fetched: check them and edit the table in the admin). OpenAI
# bills no cache write (its cached prompt is written at the input price); Anthropic's 5-minute
# cache write is 1.25x input, its 1-hour write 2x, a cache read 0.1x. Gemini and DeepSeek
# cache prices are left unlisted (a cached read of theirs shows "unknown").
LISTED_ON = dt.date(2025, 11, 1)
ANTHROPIC_SOURCE = "https://docs.claude.com/en/docs/about-claude/pricing (as listed on 2025-11-01)"
OPENAI_SOURCE = "https://platform.openai.com/docs/pricing (as listed on 2025-11-01)"
GOOGLE_SOURCE = "https://ai.google.dev/gemini-api/docs/pricing (as listed on 2025-11-01)"
DEEPSEEK_SOURCE = "https://api-docs.deepseek.com/quick_start/pricing (as listed on 2025-11-01)"


def _anthropic(input_per_mtok: float, output_per_mtok: float) -> Price:
    return Price(
        input_per_mtok,
        output_per_mtok,
        cache_write_per_mtok=round(input_per_mtok * 1.25, 6),
        cache_read_per_mtok=round(input_per_mtok * 0.1, 6),
        cache_write_1h_per_mtok=round(input_per_mtok * 2, 6),
    )


def _openai(input_per_mtok: float, output_per_mtok: float, cached: float | None) -> Price:
    return Price(input_per_mtok, output_per_mtok, input_per_mtok, cached)


_LISTED: dict[str, tuple[Price, str]] = {
    # OpenAI: input, output, cached input (None: the model offers no cache discount listed)
    "gpt-5": (_openai(1.25, 10.0, 0.125), OPENAI_SOURCE),
    "gpt-5-codex": (_openai(1.25, 10.0, 0.125), OPENAI_SOURCE),
    "gpt-5-mini": (_openai(0.25, 2.0, 0.025), OPENAI_SOURCE),
    "gpt-5-nano": (_openai(0.05, 0.4, 0.005), OPENAI_SOURCE),
    "gpt-5-pro": (_openai(15.0, 120.0, None), OPENAI_SOURCE),
    "gpt-4o": (_openai(2.5, 10.0, 1.25), OPENAI_SOURCE),
    "gpt-4o-mini": (_openai(0.15, 0.6, 0.075), OPENAI_SOURCE),
    "gpt-4.1": (_openai(2.0, 8.0, 0.5), OPENAI_SOURCE),
    "gpt-4.1-mini": (_openai(0.4, 1.6, 0.1), OPENAI_SOURCE),
    "gpt-4.1-nano": (_openai(0.1, 0.4, 0.025), OPENAI_SOURCE),
    "o1": (_openai(15.0, 60.0, 7.5), OPENAI_SOURCE),
    "o1-mini": (_openai(1.1, 4.4, 0.55), OPENAI_SOURCE),
    "o3": (_openai(2.0, 8.0, 0.5), OPENAI_SOURCE),
    "o3-pro": (_openai(20.0, 80.0, None), OPENAI_SOURCE),
    "o3-mini": (_openai(1.1, 4.4, 0.55), OPENAI_SOURCE),
    "o4-mini": (_openai(1.1, 4.4, 0.275), OPENAI_SOURCE),
    # Anthropic (dotted and dashed spellings of the 3.x names)
    "claude-opus-4": (_anthropic(15.0, 75.0), ANTHROPIC_SOURCE),
    "claude-opus-4-1": (_anthropic(15.0, 75.0), ANTHROPIC_SOURCE),
    "claude-opus-4-5": (_anthropic(5.0, 25.0), ANTHROPIC_SOURCE),
    "claude-sonnet-4": (_anthropic(3.0, 15.0), ANTHROPIC_SOURCE),
    "claude-sonnet-4-5": (_anthropic(3.0, 15.0), ANTHROPIC_SOURCE),
    "claude-haiku-4-5": (_anthropic(1.0, 5.0), ANTHROPIC_SOURCE),
    "claude-3.7-sonnet": (_anthropic(3.0, 15.0), ANTHROPIC_SOURCE),
    "claude-3-7-sonnet": (_anthropic(3.0, 15.0), ANTHROPIC_SOURCE),
    "claude-3.5-sonnet": (_anthropic(3.0, 15.0), ANTHROPIC_SOURCE),
    "claude-3-5-sonnet": (_anthropic(3.0, 15.0), ANTHROPIC_SOURCE),
    "claude-3.5-haiku": (_anthropic(0.8, 4.0), ANTHROPIC_SOURCE),
    "claude-3-5-haiku": (_anthropic(0.8, 4.0), ANTHROPIC_SOURCE),
    "claude-3-opus": (_anthropic(15.0, 75.0), ANTHROPIC_SOURCE),
    "claude-3-haiku": (
        Price(0.25, 1.25, cache_write_per_mtok=0.3, cache_read_per_mtok=0.03),
        ANTHROPIC_SOURCE,
    ),
    # Others
    "deepseek-chat": (Price(0.27, 1.1), DEEPSEEK_SOURCE),
    "gemini-2.0-flash": (Price(0.1, 0.4), GOOGLE_SOURCE),
    "gemini-2.5-pro": (Price(1.25, 10.0), GOOGLE_SOURCE),
    "gemini-2.5-flash": (Price(0.3, 2.5), GOOGLE_SOURCE),
}
LIST_PRICES: tuple[PriceRow, ...] = tuple(
    PriceRow(name, price, LISTED_ON, None, source) for name, (price, source) in _LISTED.items()
)
DEFAULT_PRICES: dict[str, Price] = {row.pattern: row.price for row in LIST_PRICES}


def table_on(rows: Iterable[PriceRow], day: dt.date) -> dict[str, Price]:
    """The rows in effect on ``day``, by name (the admin refuses two for one name and day)."""
    return {row.pattern: row.price for row in rows if row.in_effect(day)}


class PriceTableError(ValueError):
    """The price table file is unreadable or malformed; the message names the entry."""


PRICE_KEYS = ("input_per_mtok", "output_per_mtok")
CACHE_PRICE_KEYS = ("cache_write_per_mtok", "cache_read_per_mtok", "cache_write_1h_per_mtok")


def read_price_file(path: str | Path) -> dict[str, Price]:
    """The entries of a JSON price file (the module docstring's format)."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise PriceTableError(f"{path}: cannot read the price table: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise PriceTableError(f"{path}:{exc.lineno}: invalid JSON: {exc.msg}") from exc
    if not isinstance(raw, dict):
        raise PriceTableError(f"{path}: expected an object mapping model names to prices")
    table = {}
    for name, entry in raw.items():
        if not isinstance(entry, dict):
            raise PriceTableError(f"{path}: {name}: expected an object with the two prices")
        values: list[float | None] = []
        for key in PRICE_KEYS + CACHE_PRICE_KEYS:
            value = entry.get(key)
            if value is None and key in CACHE_PRICE_KEYS:
                values.append(None)
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise PriceTableError(f"{path}: {name}.{key}: expected a number >= 0")
            values.append(float(value))
        table[name] = Price(*values)  # type: ignore[arg-type]
    return table


def load_price_table(path: str | Path | None) -> dict[str, Price]:
    """The shipped list prices updated with the entries of the JSON file at ``path`` (if any)."""
    table = dict(DEFAULT_PRICES)
    if path:
        table.update(read_price_file(path))
    return table


def price_table(
    rows: Iterable[PriceRow] | None, day: dt.date | None = None, path: str | Path | None = None
) -> dict[str, Price]:
    """The prices of ``day`` (UTC today by default): the rows in effect (None: the shipped
    ``LIST_PRICES``), under the entries of the JSON file at ``path`` (LLM_PRICE_TABLE)."""
    day = day or dt.datetime.now(dt.UTC).date()
    table = table_on(LIST_PRICES if rows is None else rows, day)
    if path:
        table.update(read_price_file(path))
    return table


def price_for(model: Priced, table: dict[str, Price]) -> Price | None:
    if model.price_input_per_mtok is not None or model.price_output_per_mtok is not None:
        return Price(model.price_input_per_mtok or 0.0, model.price_output_per_mtok or 0.0)
    return lookup(model.model_name, table)


def lookup(name: str, table: dict[str, Price]) -> Price | None:
    """``name``'s price: exactly, without a provider prefix, or by its longest known prefix."""
    short = name.rsplit("/", 1)[-1]
    for candidate in (name, short):
        if candidate in table:
            return table[candidate]
    prefixes = [key for key in table if short.startswith(key)]
    return table[max(prefixes, key=len)] if prefixes else None


def overlaps(rows: Sequence[PriceRow]) -> tuple[PriceRow, PriceRow] | None:
    """Two rows for one name whose date ranges overlap, if any (the admin refuses them)."""
    ordered = sorted(rows, key=lambda r: (r.pattern, r.effective_from))
    for a, b in itertools.pairwise(ordered):
        if a.pattern == b.pattern and (a.effective_to is None or b.effective_from < a.effective_to):
            return a, b
    return None
