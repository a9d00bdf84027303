"""Reading SWE-bench style files: JSONL, a JSON list (or object keyed by id), or parquet.

Every record keeps where it came from ("line 3" for JSONL, 1-based; "index 2" for a JSON list;
"row 5" for parquet, 1-based; "key django__django-1" for a JSON object) so that an error can
name it. Reading collects every problem before raising, so one run shows them all.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tasks_app.swebench.errors import Problem, SwebenchInputError

FORMATS = ("jsonl", "json", "parquet")
# How much of a file tells its format when its name does not.
HEAD_BYTES = 65536


@dataclass(frozen=True, slots=True)
class Record:
    where: str
    data: dict[str, Any]
    # For a JSON object keyed by instance id: the key (the id when the value lacks one).
    key: str = ""


def read_source(source: Path | bytes | str) -> bytes:
    if isinstance(source, bytes):
        return source
    return Path(source).read_bytes()


def detect_format(filename: str, content: bytes) -> str:
    name = filename.lower()
    if name.endswith((".jsonl", ".ndjson", ".jsonl.txt")):
        return "jsonl"
    if name.endswith(".parquet") or content[:4] == b"PAR1":
        return "parquet"
    if name.endswith(".json"):
        return "json"
    # No telling extension (an upload named "data"): a list or object starts with [ or {,
    # and a JSONL file holds one object a line.
    stripped = content.lstrip()
    if stripped[:1] == b"[":
        return "json"
    if stripped[:1] == b"{" and b"\n{" not in stripped:
        return "json"
    return "jsonl"


def read_records(
    source: Path | bytes | str, filename: str = "", *, allow_keyed: bool = False
) -> list[Record]:
    """Parse ``source`` into records. Raises ``SwebenchInputError`` naming each bad line.

    ``allow_keyed`` accepts a JSON object keyed by instance id (the predictions format).
    """
    if not filename and not isinstance(source, bytes):
        filename = Path(source).name
    if not isinstance(source, bytes):
        # A file (an upload is one on disk) is read line by line when it is JSONL: the whole
        # text never sits in memory beside its records.
        with open(source, "rb") as fh:
            fmt = detect_format(filename, fh.read(HEAD_BYTES))
            if fmt == "jsonl":
                fh.seek(0)
                return _jsonl_records(fh, filename)
        if fmt == "parquet":  # pyarrow reads the file itself
            return _read_parquet(Path(source), filename)
    content = read_source(source)
    fmt = detect_format(filename, content)
    if fmt == "parquet":
        return _read_parquet(content, filename)
    if fmt == "json":
        return _read_json(content, filename, allow_keyed=allow_keyed)
    return _read_jsonl(content, filename)


def _decode(content: bytes, filename: str) -> str:
    try:
        return content.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SwebenchInputError(
            [Problem(f"byte {exc.start}", "not UTF-8 text")], filename
        ) from exc


def _read_jsonl(content: bytes, filename: str) -> list[Record]:
    text = _decode(content, filename)
    return _jsonl_records((line.encode() for line in text.splitlines()), filename)


def _jsonl_records(lines: Iterable[bytes], filename: str) -> list[Record]:
    records: list[Record] = []
    problems: list[Problem] = []
    for number, raw in enumerate(lines, start=1):
        try:
            line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
        except UnicodeDecodeError as exc:
            problems.append(Problem(f"line {number}", f"not UTF-8 text (byte {exc.start})"))
            continue
        if not line.strip():
            continue
        where = f"line {number}"
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(Problem(where, f"invalid JSON ({exc.msg} at column {exc.colno})"))
            continue
        except RecursionError:
            problems.append(Problem(where, "invalid JSON (nested too deep)"))
            continue
        if not isinstance(data, dict):
            problems.append(Problem(where, f"expected a JSON object, got {_kind(data)}"))
            continue
        records.append(Record(where, data))
    if problems:
        raise SwebenchInputError(problems, filename)
    if not records:
        raise SwebenchInputError([Problem("file", "no records (empty file)")], filename)
    return records


def _read_json(content: bytes, filename: str, *, allow_keyed: bool) -> list[Record]:
    text = _decode(content, filename)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno}"
        raise SwebenchInputError(
            [Problem(where, f"invalid JSON ({exc.msg} at column {exc.colno})")], filename
        ) from exc
    except RecursionError:
        raise SwebenchInputError(
            [Problem("file", "invalid JSON (nested too deep)")], filename
        ) from None
    records: list[Record] = []
    problems: list[Problem] = []
    if isinstance(data, list):
        for index, item in enumerate(data):
            where = f"index {index}"
            if not isinstance(item, dict):
                problems.append(Problem(where, f"expected a JSON object, got {_kind(item)}"))
                continue
            records.append(Record(where, item))
    elif isinstance(data, dict) and allow_keyed:
        for key, item in data.items():
            where = f"key {key}"
            if not isinstance(item, dict):
                problems.append(Problem(where, f"expected a JSON object, got {_kind(item)}"))
                continue
            records.append(Record(where, item, key=key))
    else:
        expected = "a JSON list or an object keyed by instance id" if allow_keyed else "a list"
        raise SwebenchInputError(
            [Problem("file", f"expected {expected}, got {_kind(data)}")], filename
        )
    if problems:
        raise SwebenchInputError(problems, filename)
    if not records:
        raise SwebenchInputError([Problem("file", "no records (empty list)")], filename)
    return records


def _read_parquet(content: bytes | Path, filename: str) -> list[Record]:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(io.BytesIO(content) if isinstance(content, bytes) else content)
    except Exception as exc:  # pyarrow raises several unrelated types for a broken file
        raise SwebenchInputError(
            [Problem("file", f"not a readable parquet file ({exc})")], filename
        ) from exc
    rows = table.to_pylist()
    if not rows:
        raise SwebenchInputError([Problem("file", "no records (empty table)")], filename)
    return [Record(f"row {number}", row) for number, row in enumerate(rows, start=1)]


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {
        dict: "an object",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
    }.get(type(value), type(value).__name__)


kind_of = _kind
