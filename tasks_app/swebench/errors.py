"""The one error type every SWE-bench input problem raises, naming where and which field."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with the input: ``where`` is "line 3", "index 2", "row 5" or a path."""

    where: str
    message: str
    field: str = ""

    def __str__(self) -> str:
        field = f", field {self.field}" if self.field else ""
        return f"{self.where}{field}: {self.message}"


class SwebenchInputError(ValueError):
    """Bad input file: nothing was stored. ``problems`` lists every problem found."""

    def __init__(self, problems: list[Problem], source: str = ""):
        self.problems = list(problems)
        self.source = source
        prefix = f"{source}: " if source else ""
        shown = "; ".join(str(p) for p in self.problems[:5])
        more = f" (and {len(self.problems) - 5} more)" if len(self.problems) > 5 else ""
        super().__init__(f"{prefix}{shown}{more}")

    def lines(self) -> list[str]:
        prefix = f"{self.source}: " if self.source else ""
        return [f"{prefix}{p}" for p in self.problems]
