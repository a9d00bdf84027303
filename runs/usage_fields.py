"""An attempt's usage columns (cost, tokens, calls, wall time) that read any stored value.

Older imports and raw SQL left numbers no attempt can have in these columns: a cost of 1e308
or an infinity (SQLite keeps any REAL in a NUMERIC column), a negative cost, 9e18 tokens or
calls, an infinite duration. Reading one raised in Django's SQLite decimal converter (the
value does not fit the column's precision) or in SQLite's ``sum()`` ("integer overflow"), and
every page listing the row answered 500 for everyone.

Decision: a stored value outside its column's range reads as ``None``, the same "unknown"
("—") as a usage nobody recorded, and ``VALID`` keeps it out of means and totals. Clamping
would show a made-up number and carry it into a model's mean cost; a wrong value is no
measurement. The pages stay up, and the row is still listed with its outcome.

The columns are the ones Django's fields make: ``deconstruct`` names Django's own class, so
migrations see no change (no schema change, no migration to merge).
"""

from __future__ import annotations

import decimal
import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from functools import cached_property
from typing import Any

from django.db import models
from django.db.models import Q

# What one attempt can hold; above is a broken record. Sums of valid values stay far inside a
# 64-bit integer (SQLite's sum() raises past it): 10^12 tokens x 9 million attempts.
COST_MAX_USD = Decimal("999999.999999")  # the column's own maximum (12 digits, 6 decimals)
TOKENS_MAX = 10**12
COUNT_MAX = 10**9  # model calls, tool calls
SECONDS_MAX = 1e9  # about 31 years


def _in_range(value: Any, top: float | Decimal) -> bool:
    try:
        return (
            value is not None
            and 0 <= value <= top
            and not (isinstance(value, float) and math.isnan(value))
        )
    except (TypeError, decimal.InvalidOperation):  # Decimal("NaN") cannot be compared
        return False


class UsageCostField(models.DecimalField):
    """A cost in USD; a stored value that is not a number in [0, column maximum] reads None."""

    @cached_property
    def context(self) -> decimal.Context:
        # Django's SQLite converter quantizes with this context: without traps, a value that
        # does not fit becomes NaN (read as None below) instead of raising.
        return decimal.Context(prec=self.max_digits, traps=[])

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Decimal | None:
        if value is None:
            return None
        if not isinstance(value, Decimal):
            try:
                value = self.context.create_decimal_from_float(float(value))
            except (TypeError, ValueError):
                return None
        return value if value.is_finite() and _in_range(value, COST_MAX_USD) else None

    def deconstruct(self) -> tuple[str, str, Sequence[Any], dict[str, Any]]:
        name, _, args, kwargs = super().deconstruct()
        return name, "django.db.models.DecimalField", args, kwargs


class UsageTokensField(models.PositiveBigIntegerField):
    """A token count; a stored value that is not an integer in [0, TOKENS_MAX] reads None."""

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> int | None:
        return _integer(value, TOKENS_MAX)

    def deconstruct(self) -> tuple[str, str, Sequence[Any], dict[str, Any]]:
        name, _, args, kwargs = super().deconstruct()
        return name, "django.db.models.PositiveBigIntegerField", args, kwargs


class UsageCountField(models.PositiveIntegerField):
    """A count of calls; a stored value that is not an integer in [0, COUNT_MAX] reads None."""

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> int | None:
        return _integer(value, COUNT_MAX)

    def deconstruct(self) -> tuple[str, str, Sequence[Any], dict[str, Any]]:
        name, _, args, kwargs = super().deconstruct()
        return name, "django.db.models.PositiveIntegerField", args, kwargs


class UsageSecondsField(models.FloatField):
    """A duration; a stored value that is not a number in [0, SECONDS_MAX] reads None."""

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> float | None:
        if value is None:
            return None
        try:
            value = float(value)
        except (TypeError, ValueError):
            return None
        return value if _in_range(value, SECONDS_MAX) else None

    def deconstruct(self) -> tuple[str, str, Sequence[Any], dict[str, Any]]:
        name, _, args, kwargs = super().deconstruct()
        return name, "django.db.models.FloatField", args, kwargs


def _integer(value: Any, top: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, float | Decimal):
        # SQLite keeps an integer too large for 64 bits as a REAL.
        if not (_in_range(value, top) and value == int(value)):
            return None
        value = int(value)
    return value if isinstance(value, int) and _in_range(value, top) else None


# The values the results pages' sums and means count (selection._usage): each usage column's
# valid range, in SQL, so a broken row neither overflows a sum nor moves a mean.
VALID = {
    "cost_usd": Q(cost_usd__gte=0, cost_usd__lte=COST_MAX_USD),
    "tokens": Q(tokens_in__gte=0, tokens_in__lte=TOKENS_MAX)
    & Q(tokens_out__gte=0, tokens_out__lte=TOKENS_MAX),
    "steps": Q(steps__gte=0, steps__lte=COUNT_MAX),
    "duration_sec": Q(duration_sec__gte=0, duration_sec__lte=SECONDS_MAX),
    # The cost broken down by class (all four in range: a row counts whole or not at all).
    "cost_classes": Q(cost_input_usd__gte=0, cost_input_usd__lte=COST_MAX_USD)
    & Q(cost_cache_write_usd__gte=0, cost_cache_write_usd__lte=COST_MAX_USD)
    & Q(cost_cache_read_usd__gte=0, cost_cache_read_usd__lte=COST_MAX_USD)
    & Q(cost_output_usd__gte=0, cost_output_usd__lte=COST_MAX_USD),
}


class CostBasis(models.TextChoices):
    """Where an attempt's cost comes from. Blank: an attempt from before costs were broken
    down (its ``cost_usd`` as it was computed then)."""

    PRICED = "priced", "priced from the price table"
    UNKNOWN = "unknown", "unknown: a price is missing"
    REPORTED = "reported", "reported by the imported run"


COST_CLASSES = ("input", "cache_write", "cache_read", "output")
# The columns ShownUsage reads beside the usage columns (a list that loads ``.only()`` some
# fields names these too, or each row costs a query).
COST_DETAIL_FIELDS = (
    "cost_basis",
    "cost_note",
    "tokens_cache_write",
    "tokens_cache_read",
    "cost_input_usd",
    "cost_cache_write_usd",
    "cost_cache_read_usd",
    "cost_output_usd",
)


@dataclass(frozen=True)
class ShownUsage:
    """An attempt's usage as every surface shows it (pages, API, CSV/JSON exports): each
    figure, or None ("—") where the attempt has none (``Attempt.usage_recorded``: a queued
    attempt's zeros, a stub never attempted). One place, so no surface re-applies the rule.

    The cost says where it comes from (``cost_basis``): priced by class, ``unknown`` (a price
    is missing: ``cost_usd`` None, shown "unknown", never $0, ``cost_note`` says which) or
    ``reported`` by an imported run."""

    cost_usd: float | None
    tokens_in: int | None
    tokens_out: int | None
    steps: int | None
    tool_calls: int | None
    cost_basis: str = ""
    cost_note: str = ""
    tokens_cache_write: int | None = None
    tokens_cache_read: int | None = None
    # USD by class (COST_CLASSES), None where the cost was not broken down.
    cost_classes: tuple[float | None, ...] = (None, None, None, None)

    @classmethod
    def of(cls, attempt: Any) -> ShownUsage:
        if not attempt.usage_recorded:
            return cls(None, None, None, None, None)
        cost = attempt.cost_usd
        basis = attempt.cost_basis
        return cls(
            None if cost is None or basis == CostBasis.UNKNOWN else float(cost),
            attempt.tokens_in,
            attempt.tokens_out,
            attempt.steps,
            attempt.tool_calls,
            basis,
            attempt.cost_note,
            attempt.tokens_cache_write,
            attempt.tokens_cache_read,
            tuple(
                None if value is None else float(value)
                for value in (
                    attempt.cost_input_usd,
                    attempt.cost_cache_write_usd,
                    attempt.cost_cache_read_usd,
                    attempt.cost_output_usd,
                )
            ),
        )

    @property
    def tokens(self) -> int | None:
        """In and out together; None when neither is known."""
        if self.tokens_in is None and self.tokens_out is None:
            return None
        return (self.tokens_in or 0) + (self.tokens_out or 0)

    @property
    def cost_unknown(self) -> bool:
        return self.cost_basis == CostBasis.UNKNOWN

    @property
    def cost_reported(self) -> bool:
        return self.cost_basis == CostBasis.REPORTED

    @property
    def cost_breakdown(self) -> dict[str, float | None]:
        """USD by class: input (not cached), cache write, cache read, output."""
        return dict(zip(COST_CLASSES, self.cost_classes, strict=True))

    @property
    def has_breakdown(self) -> bool:
        return any(value is not None for value in self.cost_classes)

    def cost_record(self) -> dict[str, Any]:
        """The cost fields every export writes beside ``cost_usd`` (API, CSV, CLI)."""
        return {
            "cost_basis": self.cost_basis or None,
            "cost_note": self.cost_note or None,
            **{f"cost_{name}_usd": value for name, value in self.cost_breakdown.items()},
            "tokens_cache_write": self.tokens_cache_write,
            "tokens_cache_read": self.tokens_cache_read,
        }
