"""The numbers an imported trajectory may record, checked before anything is stored.

A trajectory is input: an ATIF file's ``"total_cost_usd": 1e308`` was imported and then broke
every page listing the attempt; a negative cost ($-5,000) was shown as spent; an integer too
large for the database answered 500 after the model configuration was created. Each reader of
``trajectories`` takes its numbers through one ``Numbers`` per file, which keeps a number in
range, reads an absent or non-numeric field as unknown (as before), and lists every number out
of range as a ``Problem`` naming the file, the field (with the step or message index) and the
range; ``done()`` raises them together (``BadValues``), so the import refuses the file.

The ranges are far beyond any real attempt and inside what the attempt's columns hold and the
results pages sum (``runs.usage_fields``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from tasks_app.swebench.errors import Problem

Kind = Literal["cost", "tokens", "count", "seconds", "time", "index"]


@dataclass(frozen=True, slots=True)
class Range:
    top: float
    what: str
    integral: bool


RANGES: dict[str, Range] = {
    "cost": Range(10_000.0, "a cost in USD", False),  # one attempt
    "tokens": Range(10**10, "a token count", True),
    "count": Range(10**7, "a count", True),  # model calls, tool calls
    "seconds": Range(10**7, "a duration in seconds", False),  # about 115 days
    "time": Range(32_503_680_000, "a unix time", False),  # up to the year 3000
    "index": Range(1000, "an epoch or sample number", True),
}


class BadValues(ValueError):
    """Numbers out of range in one file; ``problems`` names each field."""

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        super().__init__("; ".join(str(p) for p in self.problems))


class Numbers:
    """The numbers of one file (``where``); see the module doc."""

    def __init__(self, where: str):
        self.where = where
        self.problems: list[Problem] = []

    def get(self, value: Any, field: str, kind: Kind) -> float | None:
        """``value`` when it is a number in the kind's range; None when absent or not a
        number (unknown); None and a problem when it is a number out of range."""
        if not isinstance(value, int | float) or isinstance(value, bool):
            return None
        return self.total(value, field, kind)

    def number(self, value: Any, field: str, kind: Kind) -> float:
        """``get``, with 0 for unknown."""
        got = self.get(value, field, kind)
        return 0.0 if got is None else got

    def total(self, value: float, field: str, kind: Kind) -> float | None:
        """A number the reader computed (a sum, a difference): in range, or a problem."""
        limit = RANGES[kind]
        if _in_range(value, limit):
            return value
        whole = "a whole number " if limit.integral else ""
        self.problems.append(
            Problem(
                self.where,
                f"{_shown(value)} is not {limit.what} ({whole}from 0 to {_shown(limit.top)})",
                field,
            )
        )
        return None

    def done(self) -> None:
        if self.problems:
            raise BadValues(self.problems)


def _in_range(value: float, limit: Range) -> bool:
    if isinstance(value, float) and not math.isfinite(value):
        return False
    if not 0 <= value <= limit.top:
        return False
    return not limit.integral or isinstance(value, int) or float(value).is_integer()


def _shown(value: float) -> str:
    if isinstance(value, int) and abs(value) < 10**15:
        return f"{value:,}"
    if isinstance(value, int):
        return f"{float(value):.3g}"
    return f"{value:.6g}" if math.isfinite(value) else str(value)
