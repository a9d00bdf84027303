"""Reading one JSON document with bounded memory and errors that say where.

An imported file is input from anyone who may import: a 39 KB zip held a 40 MB JSON array of
zeros that ``json.loads`` made 20 million list items, which the format check then turned into
20 million errors (a worker past 10 GB); a deeply nested one raised ``RecursionError`` (a 500).
So a document is read twice from its bytes or file, never as one decoded string: first as a
stream of parser events (ijson's C parser) counting values and nesting against ``JsonLimits``,
which refuses it before anything is built; then built by the same parser. Memory is bounded
by the limits and the file's size, whatever the document holds.

JSON as the standard defines it: ``NaN`` and ``Infinity`` are refused, and so are numbers past
a 64-bit integer or a double (the parser's "integer overflow"), each naming the file.
Small documents that do not parse are parsed again with ``json`` for its line, column and the
trailing-comma hint.
"""

from __future__ import annotations

import io
import json
import re
import sys
from dataclasses import dataclass, field
from typing import IO, Any

import ijson

from tasks_app.swebench.errors import Problem

# Below this size a document that does not parse is parsed again by ``json`` for its line and
# column (json.loads of 2 MB is at most some tens of MB of objects).
EXPLAIN_MAX_BYTES = 2 * 1024 * 1024
_BOM = b"\xef\xbb\xbf"
_OPEN = frozenset({"start_map", "start_array"})
_CLOSE = frozenset({"end_map", "end_array"})
_TEXT = frozenset({"string", "map_key"})
# UTF-8 lead bytes of characters CPython stores in 4 bytes (past U+FFFF) and in 2 (past U+00FF).
_WIDE4 = re.compile(rb"[\xf0-\xf4]")
_WIDE2 = re.compile(rb"[\xc4-\xef]")
# What each parser event costs once built (CPython 3.11, 64-bit), beyond a text's own size:
# the object, its slot in its container, a dict entry per key.
_COST = {
    "start_map": 64,
    "start_array": 56,
    "map_key": 48,
    "string": 8,
    "number": 32,
    "boolean": 8,
    "null": 8,
}


class JsonFileError(ValueError):
    """One file that is not valid JSON; ``problem`` names it, the line and the column."""

    def __init__(self, problem: Problem):
        self.problem = problem
        super().__init__(str(problem))


@dataclass
class JsonLimits:
    """How deep and how many parser events (values, keys, ends) one import may read.

    One ``JsonLimits`` may be shared by the documents of one file (the lines of a JSONL file):
    ``used`` counts the events read so far against ``max_items``.
    """

    max_depth: int = 100
    max_items: int = 200_000
    # What the built document may take in memory, as counted while it streams: a string's
    # size counts as CPython stores it (one emoji makes every character of it 4 bytes).
    max_memory: int = 48 * 1024 * 1024
    used: int = field(default=0)
    memory: int = field(default=0)

    def fresh(self) -> JsonLimits:
        return JsonLimits(self.max_depth, self.max_items, self.max_memory)


def parse_json(content: bytes | IO[bytes], where: str, limits: JsonLimits | None = None) -> Any:
    """The document in ``content`` (bytes, or a binary file read from where it stands);
    raises ``JsonFileError`` naming ``where``: not JSON (line and column when small), nested
    deeper than ``limits.max_depth``, or more than ``limits.max_items`` events."""
    limits = limits or JsonLimits()
    stream = io.BytesIO(content) if isinstance(content, bytes | bytearray) else content
    start = stream.tell()
    if stream.read(3) != _BOM:
        stream.seek(start)
    start = stream.tell()
    try:
        _check(stream, where, limits)
        stream.seek(start)
        return next(ijson.items(stream, "", use_float=True))
    except (ijson.JSONError, ValueError, StopIteration) as exc:
        if isinstance(exc, JsonFileError):
            raise
        stream.seek(start)
        raise JsonFileError(_explain(stream, where, exc)) from None


def _check(stream: IO[bytes], where: str, limits: JsonLimits) -> None:
    _check_width(stream, where, limits)
    depth = 0
    used, max_items, max_depth = limits.used, limits.max_items, limits.max_depth
    memory, max_memory, sizeof = limits.memory, limits.max_memory, sys.getsizeof
    for event, value in ijson.basic_parse(stream, use_float=True):
        used += 1
        memory += _COST.get(event, 0) + (sizeof(value) if event in _TEXT else 0)
        if memory > max_memory:
            raise JsonFileError(
                Problem(
                    where,
                    f"would take more than {max_memory // (1024 * 1024)} MB in memory "
                    "(IMPORT_JSON_MAX_MEMORY_MB): refused before reading it whole",
                )
            )
        if used > max_items:
            raise JsonFileError(
                Problem(
                    where,
                    f"more than {max_items:,} JSON values (IMPORT_JSON_MAX_ITEMS): "
                    "refused before reading it whole",
                )
            )
        if event in _OPEN:
            depth += 1
            if depth > max_depth:
                raise JsonFileError(
                    Problem(
                        where,
                        f"nested deeper than {max_depth} levels (IMPORT_JSON_MAX_DEPTH)",
                    )
                )
        elif event in _CLOSE:
            depth -= 1
    limits.used, limits.memory = used, memory


def _check_width(stream: IO[bytes], where: str, limits: JsonLimits) -> None:
    """Refuse a document whose one string could take more than ``max_memory`` once read:
    the parser builds each string whole, in CPython's width for its widest character (4 bytes
    a character with one emoji), before the events can be counted."""
    start, size, width = stream.tell(), 0, 1
    while chunk := stream.read(1 << 20):
        size += len(chunk)
        if width < 4 and _WIDE4.search(chunk):
            width = 4
        elif width < 2 and _WIDE2.search(chunk):
            width = 2
    stream.seek(start)
    if size * width > limits.max_memory:
        raise JsonFileError(
            Problem(
                where,
                f"could take {size * width // (1024 * 1024)} MB in memory ({size:,} bytes of "
                f"characters CPython stores in {width} bytes each), more than "
                f"{limits.max_memory // (1024 * 1024)} MB (IMPORT_JSON_MAX_MEMORY_MB)",
            )
        )


def _explain(stream: IO[bytes], where: str, exc: BaseException) -> Problem:
    """What is wrong with a document the parser refused: ``json``'s line and column for a
    small one, else the parser's own words."""
    head = stream.read(EXPLAIN_MAX_BYTES + 1)
    if len(head) <= EXPLAIN_MAX_BYTES:
        try:
            text = head.decode("utf-8")
        except UnicodeDecodeError as error:
            return Problem(where, f"not UTF-8 text (byte {error.start})")
        try:
            json.loads(text, parse_constant=_no_constant)
        except json.JSONDecodeError as error:
            hint = (
                f" (a trailing comma before the closing {text[error.pos]!r})"
                if _trailing_comma(text, error.pos)
                else ""
            )
            return Problem(
                where,
                f"invalid JSON at line {error.lineno}, column {error.colno}: {error.msg}{hint}",
            )
        except (ValueError, RecursionError):
            pass  # a constant or a number JSON has no room for: the parser's words below
    lines = str(exc).strip().splitlines() or ["no JSON document"]
    said = lines[0].removeprefix("b'")
    if "premature EOF" in said and not head.strip():
        said = "empty: no JSON document"
    near = f" near {lines[1].strip()[:80]!r}" if len(lines) > 1 and lines[1].strip() else ""
    return Problem(where, f"invalid JSON: {said}{near}")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _trailing_comma(text: str, pos: int) -> bool:
    """Whether the parser stopped on a closing bracket that follows a comma."""
    if pos >= len(text) or text[pos] not in "]}":
        return False
    before = text[:pos].rstrip()
    return before.endswith(",")
