"""Streamed CSV and JSON downloads of records, for exports that can be long (an attempt list of
a 45,000-attempt suite): rows are written as the database hands them over, never held whole.

The page and the API call the same functions (``runs.web.results``, ``runs.api.runs``), so an
export is the same file whichever asked for it.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.http import StreamingHttpResponse

FORMATS = ("csv", "json")


def csv_cell(value: Any) -> Any:
    """A cell as written: None empty; a text starting with = + - @ (a formula to spreadsheets:
    task ids and errors come from outside) behind a quote."""
    if value is None:
        return ""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def _csv_lines(columns: Sequence[str], records: Iterable[dict]) -> Iterator[str]:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(columns)
    for index, record in enumerate(records, 1):
        writer.writerow([csv_cell(record.get(c)) for c in columns])
        if index % 200 == 0:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()


def _json_lines(head: dict, key: str, records: Iterable[dict]) -> Iterator[str]:
    opening = json.dumps(head, cls=DjangoJSONEncoder, ensure_ascii=False)[:-1]
    yield opening + (", " if head else "") + json.dumps(key) + ": ["
    for index, record in enumerate(records):
        yield ("," if index else "") + "\n" + json.dumps(record, cls=DjangoJSONEncoder)
    yield "\n]}\n"


def streamed(
    fmt: str, filename: str, columns: Sequence[str], records: Iterable[dict], *, head: dict
) -> StreamingHttpResponse:
    """``records`` as a CSV (``columns``) or as one JSON object: ``head``'s keys, then
    ``"items": [records...]``; a download named ``filename`` (without its extension)."""
    if fmt == "csv":
        body: Iterator[str] = _csv_lines(columns, records)
        content_type = "text/csv; charset=utf-8"
    else:
        body = _json_lines(head, "items", records)
        content_type = "application/json"
    response = StreamingHttpResponse(body, content_type=content_type)
    safe = "".join(c for c in filename if c.isalnum() or c in "-_.") or "export"
    response["Content-Disposition"] = f'attachment; filename="{safe}.{fmt}"'
    return response
