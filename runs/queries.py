"""The results' query parameters as schemas: the leaderboard's, the comparison's, the
taxonomy's and the attempt list's, read by the API (``runs.api``, which answers a bad value
422) and by the pages (``runs.web.query.page_query``, which shows it with status 400), so both
take the same names, defaults and checks, and word a bad value alike.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

from ninja import Field, Schema
from pydantic import ValidationError, WrapValidator
from pydantic_core import PydanticCustomError

from benchsite.api.common import MAX_PAGE, MAX_PAGE_SIZE, Text
from runs.models import AttemptStatus
from runs.results.attempt_list import SORTS, AttemptFilters
from runs.results.leaderboard import SORT_KEYS
from runs.results.params import split_values
from runs.results.selection import OUTCOMES

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


def _old_name(new: str) -> Any:
    """A deprecated alias of ``new``: read, marked deprecated in the OpenAPI schema."""
    return Field(
        None,
        json_schema_extra=DEPRECATED,
        description=f"deprecated: the old name of `{new}` (the pages redirect it; use `{new}`)",
    )


class AttemptListQuery(Schema):
    """The attempt list's parameters: the names of ``runs.results.params.ATTEMPTS`` (the
    page ``/suites/<name>/attempts/`` takes the same), plus ``suite`` and the old names."""

    suite: Text | None = None
    models: ListParam = Field([], description="configuration names, slugs or ids" + LIST_NOTE)
    runs: ListParam = Field([], description="run id prefixes, 8+ characters" + LIST_NOTE)
    labels: ListParam = Field([], description="tasks carrying every label" + LIST_NOTE)
    repo: Text | None = Field(None, description="the task's repository, e.g. django/django")
    outcome: Literal[OUTCOMES] | None = Field(  # type: ignore[valid-type]
        None, description="as the score counts it (the pages' badge)"
    )
    reason: Text | None = Field(None, description="a failure reason code")
    status: AttemptStatus | None = None
    task: Text | None = Field(None, description="one task id, exactly")
    q: Text | None = Field(
        None, max_length=200, description="text in the task id (and the error, for readers)"
    )
    is_infra: bool | None = None
    resolved: bool | None = None
    attempted: bool | None = Field(
        None, description="true: attempts that were made; false: a partial run's not attempted"
    )
    sort: Literal[tuple(SORTS)] = "task"  # type: ignore[valid-type]
    order: Literal["asc", "desc"] | None = Field(None, description="default: the sort's own")
    page: int = Field(1, ge=1, le=MAX_PAGE)
    page_size: int = Field(50, ge=1, le=MAX_PAGE_SIZE)
    format: Literal["json", "csv"] = Field(
        "json", description="csv: every attempt of the filter, streamed (as the page's CSV)"
    )
    model: Text | None = _old_name("models")
    run: Text | None = _old_name("runs")
    failure_reason: Text | None = _old_name("reason")
    task_id: Text | None = _old_name("task")

    def filters(self) -> AttemptFilters:
        """The selection these parameters ask for (an old name read as its new one); whether
        a model or run exists is ``attempt_selection``'s to say."""
        return AttemptFilters(
            models=tuple(split_values([*self.models, self.model or ""])),
            runs=tuple(split_values([*self.runs, self.run or ""])),
            labels=tuple(split_values(self.labels)),
            repo=self.repo or "",
            outcome=self.outcome or "",
            reason=self.reason or self.failure_reason or "",
            status=self.status or "",
            task=self.task or self.task_id or "",
            q=self.q or "",
            is_infra=self.is_infra,
            resolved=self.resolved,
            attempted=self.attempted,
            sort=self.sort,
            order=self.order or "",
        )


class CompareQuery(Schema):
    suite: Text = Field(min_length=1, max_length=100)
    models: Text = Field(
        min_length=1,
        description="comma-separated configurations (name, slug or public id: all its runs) or"
        " single runs (slug@run-id); the first is A",
    )
    labels: ListParam = Field([], description="tasks carrying every label" + LIST_NOTE)
    only: Literal["differ"] | None = Field(
        None, description="differ: only tasks whose outcomes differ"
    )
    format: Literal["json", "csv"] = "json"
