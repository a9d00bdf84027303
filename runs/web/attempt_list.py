"""A suite's attempt list: the filter form, sortable columns, paging with counts, and the CSV /
JSON export of exactly what it shows (``runs.results.attempt_list`` selects the rows for all
three, and for an attempt page's previous / next)."""

from __future__ import annotations

import uuid
from urllib.parse import urlencode

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import render
from django.urls import reverse
from django.utils.functional import cached_property

from benchsite.accounts.access import can_read_artifacts
from runs.exports import FORMATS, streamed
from runs.models import AttemptStatus, FailureReason, ModelConfig, Run
from runs.results.attempt_list import (
    DEFAULT_PAGE_SIZE,
    EXPORT_COLUMNS,
    OUTCOME_ORDER,
    PAGE_SIZES,
    SORTS,
    AttemptFilters,
    FilterError,
    attempt_selection,
    counted,
    export_records,
    filtered,
    list_rows,
    outcome_counts,
    suite_repos,
    without,
)
from runs.results.params import ATTEMPTS
from runs.web.query import attempt_list_query, old_names_redirect, unknown_params
from runs.web.results import _suite_for, suite_labels
from tasks_app.models import Suite

OUTCOME_WORDS = {
    "resolved": "resolved",
    "failed": "failed",
    "infra": "infrastructure",
    "missing": "not attempted",
    "not_evaluated": "not evaluated",
    "pending": "pending",
}
COLUMNS = (
    ("task", "Task"),
    ("model", "Model"),
    ("sample", "Sample"),
    ("outcome", "Outcome"),
    ("reason", "Reason"),
    ("cost", "Cost"),
    ("tokens", "Tokens"),
    ("wall", "Wall"),
    ("finished", "Finished"),
)
_ZERO = uuid.UUID(int=0)


def suite_attempts(request: HttpRequest, name: str) -> HttpResponseBase:
    suite = _suite_for(request, name)
    if isinstance(suite, HttpResponse):
        return suite
    moved = old_names_redirect(request, ATTEMPTS)
    if moved:
        return moved
    notices = unknown_params(request, ATTEMPTS)
    fmt = request.GET.get("format", "")
    try:
        filters, size = attempt_list_query(request)
        if fmt and fmt not in FORMATS:
            raise FilterError("format", f"expected csv or json, got {fmt!r}")
        readable = can_read_artifacts(request.user)
        attempts = attempt_selection(suite=suite, filters=filters, read_errors=readable)
    except FilterError as exc:
        if fmt:
            return HttpResponse(str(exc), status=400, content_type="text/plain; charset=utf-8")
        return _page(request, suite, None, errors=[str(exc)], notices=notices)
    detail = reverse("attempt-detail", args=[_ZERO]).replace(str(_ZERO), "{}")
    if fmt:
        streamed_rows = list_rows(attempts, read_errors=readable).iterator(chunk_size=2000)
        head = {"suite": suite.name, "filters": dict(filters.query(keep_default_sort=True))}
        return streamed(
            fmt,
            f"attempts-{suite.name}",
            EXPORT_COLUMNS,
            export_records(streamed_rows, detail),
            head=head,
        )
    counts = outcome_counts(
        filtered(suite=suite, filters=without(filters, "outcome"), read_errors=readable)
    )
    rows = list_rows(attempts, read_errors=readable)
    page = _Counted(rows, size, counted(counts, filters.outcome)).get_page(request.GET.get("page"))
    return _page(
        request,
        suite,
        filters,
        page=page,
        size=size,
        counts=counts,
        detail=detail,
        notices=notices,
    )


class _Counted(Paginator):
    """A paginator told its length: the outcome counts already hold it (one scan of the
    selected attempts fewer: 9 of 96 ms CPU in bench/pages.py)."""

    def __init__(self, object_list, per_page: int, count: int) -> None:
        super().__init__(object_list, per_page)
        self._count = count

    @cached_property
    def count(self) -> int:
        return self._count


def _page(
    request: HttpRequest,
    suite: Suite,
    filters: AttemptFilters | None,
    *,
    errors: list[str] | None = None,
    notices: list[str] | None = None,
    page=None,
    size: int = DEFAULT_PAGE_SIZE,
    counts: dict[str, int] | None = None,
    detail: str = "",
) -> HttpResponse:
    shown = filters or AttemptFilters()
    query = shown.query()
    sized = [("page_size", str(size))] if size != DEFAULT_PAGE_SIZE else []
    keep = [*query, *sized]
    # An attempt's link carries the list's filter and order: its page steps through them.
    nav = urlencode([*shown.query(keep_default_sort=True), *sized])
    if page is not None:
        for a in page:
            a.url = detail.format(a.public_id) + "?" + nav
    base = reverse("suite-attempts", args=[suite.name])
    return render(
        request,
        "runs/attempt_list.html",
        {
            "suite": suite,
            "filters": shown,
            "page": page,
            "size": size,
            # A size given in the URL stays on offer: submitting the form keeps it.
            "sizes": sorted({*PAGE_SIZES, size}),
            "errors": errors or [],
            "notices": notices or [],
            "columns": _columns(shown, keep),
            "outcomes": _outcome_links(shown, counts, keep),
            "page_query": urlencode(keep),
            "csv_url": "?" + urlencode([*query, ("format", "csv")]),
            "json_url": "?" + urlencode([*query, ("format", "json")]),
            "api_url": reverse("api:attempt_list")
            + "?"
            + urlencode([("suite", suite.name), *query]),
            "clear_url": base,
            "choices": _choices(suite),
        },
        status=400 if errors else 200,
    )


def _columns(filters: AttemptFilters, keep: list[tuple[str, str]]) -> list[dict]:
    """Each column's header: its sort link (a second click reverses) and its state."""
    rest = [(k, v) for k, v in keep if k not in ("sort", "order")]
    out = []
    for key, title in COLUMNS:
        current = filters.sort == key
        # A second click on the sorted column reverses it; another column starts its own way.
        reverse_of = "asc" if filters.direction == "desc" else "desc"
        order = reverse_of if current else SORTS[key][1]
        out.append(
            {
                "key": key,
                "title": title,
                "url": "?" + urlencode([*rest, ("sort", key), ("order", order)]),
                "sorted": filters.direction if current else "",
                "numeric": key in ("sample", "cost", "tokens", "wall"),
            }
        )
    return out


def _outcome_links(
    filters: AttemptFilters, counts: dict[str, int] | None, keep: list[tuple[str, str]]
) -> list[dict]:
    """Each outcome's count under the other filters, a link to those attempts."""
    if counts is None:
        return []
    rest = [(k, v) for k, v in keep if k != "outcome"]
    return [
        {
            "outcome": o,
            "word": OUTCOME_WORDS[o],
            "count": counts.get(o, 0),
            "url": "?" + urlencode([*rest, ("outcome", o)]),
            "current": filters.outcome == o,
        }
        for o in OUTCOME_ORDER
        if counts.get(o) or filters.outcome == o
    ]


def _choices(suite: Suite) -> dict:
    """What the filter form offers: the suite's models, runs, reasons, repositories, labels."""
    runs = list(
        Run.objects.filter(suite=suite)
        .select_related("model_config")
        .only("public_id", "created_at", "model_config__name")
        .order_by("model_config__name", "created_at")
    )
    for run in runs:
        run.short = str(run.public_id)[:8]  # type: ignore[attr-defined]  # for the template only
    return {
        "models": list(
            ModelConfig.objects.filter(runs__suite=suite)
            .distinct()
            .order_by("name")
            .values_list("slug", "name")
        ),
        "runs": runs,
        "reasons": list(
            FailureReason.objects.order_by("precedence").values_list("code", flat=True)
        ),
        "repos": suite_repos(suite),
        "labels": suite_labels(suite),
        "outcomes": [(o, OUTCOME_WORDS[o]) for o in OUTCOME_ORDER],
        "statuses": AttemptStatus.choices,
    }
