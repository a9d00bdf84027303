"""Pieces every API router shares: bounded pagination, safe text fields, CSV responses."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from typing import Annotated, Any

from django.http import HttpRequest, HttpResponse
from ninja import Field, Schema
from ninja.pagination import PageNumberPagination
from pydantic import AfterValidator

from benchsite.api.errors import ApiInputError

MAX_PAGE = 1_000_000
MAX_PAGE_SIZE = 500


class Pages(PageNumberPagination):
    """``?page=&page_size=`` with upper bounds, so no page number overflows a SQL OFFSET."""

    class Input(Schema):
        page: int = Field(1, ge=1, le=MAX_PAGE)
        page_size: int | None = Field(None, ge=1, le=MAX_PAGE_SIZE)

    def __init__(self, page_size: int = 50, **kwargs: Any) -> None:
        super().__init__(page_size=page_size, max_page_size=MAX_PAGE_SIZE, **kwargs)


def _no_nul(value: str) -> str:
    # PostgreSQL text cannot hold NUL: refuse it here rather than fail in the database.
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    return value


Text = Annotated[str, AfterValidator(_no_nul)]


def split_list(raw: str | None) -> list[str]:
    """``"a,b, c"`` -> ["a", "b", "c"]; empty items dropped."""
    return [item.strip() for item in (raw or "").split(",") if item.strip()]


def refuse_unknown_params(request: HttpRequest, schema: type[Schema]) -> None:
    """422 naming the first query parameter ``schema`` does not declare: a filter the endpoint
    does not know is an error, never silently ignored."""
    allowed = [
        name
        for name, f in schema.model_fields.items()
        if not (isinstance(f.json_schema_extra, dict) and f.json_schema_extra.get("deprecated"))
    ]
    for name in request.GET:
        if name not in schema.model_fields:
            raise ApiInputError(
                name,
                f"not a parameter of this endpoint; it takes {', '.join(allowed)}",
                status=422,
                location="query",
            )


def csv_response(
    filename: str, header: Sequence[str], rows: Iterable[Sequence[Any]]
) -> HttpResponse:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(header)
    for row in rows:
        writer.writerow(["" if value is None else _csv_cell(value) for value in row])
    response = HttpResponse(buffer.getvalue(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def _csv_cell(value: Any) -> Any:
    # A cell starting with = + - @ is a formula to spreadsheets: model names are user input.
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value
