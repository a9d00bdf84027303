"""The results' query parameters as schemas: the leaderboard's and the taxonomy's, read by
the API (``runs.api``, which answers a bad value 422) and by the pages
(``runs.web.query.page_query``, which shows it with status 400), so both take the same names,
defaults and checks, and word a bad value alike.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

from ninja import Field, Schema
from pydantic import ValidationError, WrapValidator
from pydantic_core import PydanticCustomError

from benchsite.api.common import Text
from runs.results.leaderboard import SORT_KEYS

LAST_DATE = dt.date(9999, 12, 30)
ListParam = list[Text]
# An old parameter name still read (OpenAPI marks it deprecated); runtime reads stay silent.
DEPRECATED: dict[str, Any] = {"deprecated": True}
LIST_NOTE = "; comma-separated or repeated"


def _date_or_say(value: Any, handler: Any) -> Any:
    # Pydantic's own words ("input is too short") name no format: say which one, as the pages
    # always did. What pydantic accepts is unchanged.
    try:
        return handler(value)
    except ValidationError as exc:
        if not any(e["type"].startswith(("date", "datetime")) for e in exc.errors()):
            raise  # a date, out of range: pydantic's words name the bound
        raise PydanticCustomError(
            "date_format", "expected a date as YYYY-MM-DD, got {value}", {"value": repr(value)}
        ) from None


QueryDate = Annotated[dt.date | None, WrapValidator(_date_or_say)]


class LeaderboardQuery(Schema):
    """The leaderboard's parameters, the API's and the page's."""

    suite: Text = Field(min_length=1, max_length=100)
    view: Literal["runs", "configs"] = Field(
        "runs", description="one row per run, or per configuration with its runs pooled"
    )
    runs: Text | None = Field(
        None, description="comma-separated run ids (8+ characters): only these runs count"
    )
    labels: ListParam = Field([], description="tasks carrying every label" + LIST_NOTE)
    date_from: QueryDate = Field(None, le=LAST_DATE)
    date_to: QueryDate = Field(None, le=LAST_DATE)
    include_undated: bool = Field(
        False, description="a date filter keeps runs of unknown date (imported without one)"
    )
    count_out_flagged: bool = Field(
        False,
        description="count successes carrying an integrity flag as failures (docs/integrity.md)",
    )
    sort: Literal[SORT_KEYS] = "rate"  # type: ignore[valid-type]
    order: Literal["asc", "desc"] | None = Field(None, description="default: the column's own")
    format: Literal["json", "csv"] = "json"
    descending: bool | None = Field(
        None,
        json_schema_extra=DEPRECATED,
        description="deprecated: use `order` (desc for true, asc for false)",
    )


class TaxonomyQuery(Schema):
    suite: Text = Field(min_length=1, max_length=100)
    models: Text | None = Field(None, description="comma-separated; default every model")
    include_undated: bool = Field(
        False, description="points for runs of unknown date too (at their import time)"
    )
    format: Literal["json", "csv"] = "json"
