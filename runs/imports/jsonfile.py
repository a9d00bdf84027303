"""Reading one JSON document with errors that say where: line, column, and a trailing comma."""

from __future__ import annotations

import json
from typing import Any

from tasks_app.swebench.errors import Problem


class JsonFileError(ValueError):
    """One file that is not valid JSON; ``problem`` names it, the line and the column."""

    def __init__(self, problem: Problem):
        self.problem = problem
        super().__init__(str(problem))


def parse_json(content: bytes, where: str) -> Any:
    """``content`` decoded; raises ``JsonFileError`` naming ``where``, line and column."""
    try:
        text = content.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise JsonFileError(Problem(where, f"not UTF-8 text (byte {exc.start})")) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        hint = (
            f" (a trailing comma before the closing {text[exc.pos]!r})"
            if _trailing_comma(text, exc.pos)
            else ""
        )
        raise JsonFileError(
            Problem(
                where, f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}{hint}"
            )
        ) from None


def _trailing_comma(text: str, pos: int) -> bool:
    """Whether the parser stopped on a closing bracket that follows a comma."""
    if pos >= len(text) or text[pos] not in "]}":
        return False
    before = text[:pos].rstrip()
    return before.endswith(",")
