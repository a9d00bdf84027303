"""An attempt page's previous / next: within the attempt list it was opened from (its filter and
order ride in the query string), else within the attempt's run, in task order (the attempts
made only, unless the page is a "not attempted" stub)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from urllib.parse import urlencode

from django.http import HttpRequest
from django.urls import reverse

from runs.models import Attempt
from runs.results.attempt_list import (
    DEFAULT_PAGE_SIZE,
    AttemptFilters,
    FilterError,
    neighbours,
)
from runs.results.params import ATTEMPT_FILTER
from runs.web.query import attempt_list_query

# What an attempt page takes: the list's filter and order, its page size, the patch view.
NAV_PARAMS = (*ATTEMPT_FILTER, "page_size", "view")
_ZERO = uuid.UUID(int=0)


@dataclass
class Navigation:
    scope: str  # "list": the list's filter; "run": the attempt's run
    position: int = 0
    total: int = 0
    previous: str = ""  # URLs, "" at either end
    next: str = ""
    list_url: str = ""  # the list's page holding this attempt
    query: str = ""  # the list's filter and order, for this page's own links
    error: str = ""  # a filter that could not be read
    absent: bool = False  # the attempt is not in that list (it changed since)


def navigation(request: HttpRequest, attempt: Attempt, *, read_errors: bool) -> Navigation:
    """Where ``attempt`` sits in the list the request names (or its run): previous, next,
    position and the list page to go back to. A few queries, whatever the list's length."""
    from_list = any(name in request.GET for name in ATTEMPT_FILTER)
    short = str(attempt.run.public_id)[:8]
    try:
        listed, size = attempt_list_query(request)
        filters = listed if from_list else None
    except FilterError as exc:
        return Navigation(scope="list", error=str(exc))
    sized = [("page_size", str(size))] if size != DEFAULT_PAGE_SIZE else []
    query = urlencode([*filters.query(keep_default_sort=True), *sized]) if filters else ""
    scope = "list" if filters else "run"
    # Within its run, an attempt that was made steps to the next one made: a partial run's
    # "not attempted" stubs (no outcome, nothing to read) are not walked through.
    made_only = None if attempt.is_missing else True
    filters = filters or AttemptFilters(runs=(short,), attempted=made_only)
    try:
        where = neighbours(
            suite=attempt.task.suite, filters=filters, attempt=attempt, read_errors=read_errors
        )
    except FilterError as exc:
        return Navigation(scope=scope, error=str(exc), query=query)
    list_base = reverse("suite-attempts", args=[attempt.task.suite.name])
    if where is None:
        back = list_base + "?" + urlencode([*filters.query(), *sized])
        return Navigation(scope=scope, absent=True, list_url=back, query=query)
    detail = reverse("attempt-detail", args=[_ZERO]).replace(str(_ZERO), "{}")
    keep = "?" + query if query else ""
    view = request.GET.get("view")
    if view == "split":
        keep += ("&" if keep else "?") + "view=split"
    page = (where.position - 1) // size + 1
    back_query = [*filters.query(), *sized] + ([("page", str(page))] if page > 1 else [])
    return Navigation(
        scope=scope,
        position=where.position,
        total=where.total,
        previous=detail.format(where.previous) + keep if where.previous else "",
        next=detail.format(where.next) + keep if where.next else "",
        list_url=list_base + "?" + urlencode(back_query) + f"#attempt-{attempt.public_id}",
        query=query,
    )
