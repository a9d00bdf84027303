"""Results pages of a suite: leaderboard, model comparison, failure taxonomy, attempt lists."""

from __future__ import annotations

import csv
import datetime as dt
import uuid
from html import escape as esc
from urllib.parse import quote, urlencode

from django.contrib.auth.views import redirect_to_login
from django.core.paginator import Paginator
from django.db.models import Exists, OuterRef
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils.safestring import SafeString, mark_safe

from runs.access import can_read_leaderboards
from runs.models import ModelConfig, Run
from runs.results.compare import (
    Comparison,
    TaskRow,
    compare_models,
    comparison_records,
    entry_record,
    pair_record,
    summary_record,
)
from runs.results.leaderboard import SORT_KEYS
from runs.results.leaderboard import leaderboard as build_leaderboard
from runs.results.selection import (
    VIEWS,
    Entry,
    SelectionError,
    outcome_filter,
    read_results,
    runs_by_prefix,
    selected_attempts,
)
from runs.results.taxonomy_report import (
    ModelBreakdown,
    ReasonColumn,
    TaxonomyBreakdown,
    taxonomy_breakdown,
)
from runs.web.page_cache import cached_blocks
from tasks_app.models import GoldValidation, GoldValidationStatus, Suite, Task


class FilterError(ValueError):
    """A query parameter that cannot be used; the message names it."""


def _suite_for(request: HttpRequest, name: str) -> Suite | HttpResponse:
    if not can_read_leaderboards(request.user):
        return redirect_to_login(request.get_full_path())
    return get_object_or_404(Suite, name=name)


def _date(request: HttpRequest, field: str) -> dt.date | None:
    value = request.GET.get(field, "").strip()
    if not value:
        return None
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise FilterError(f"{field}: expected a date as YYYY-MM-DD, got {value!r}") from None


def _labels(request: HttpRequest) -> list[str]:
    return [v for v in request.GET.getlist("label") if v.strip()]


def suite_labels(suite: Suite) -> list[str]:
    labels: set[str] = set()
    for values in Task.objects.for_suite(suite).values_list("labels", flat=True):
        labels.update(values or [])
    return sorted(labels)


@cached_blocks()
def leaderboard(request: HttpRequest, name: str) -> HttpResponse:
    suite = _suite_for(request, name)
    if isinstance(suite, HttpResponse):
        return suite
    errors: list[str] = []
    try:
        date_from = _date(request, "from")
        date_to = _date(request, "to")
    except FilterError as exc:
        errors.append(str(exc))
        date_from = date_to = None
    labels = _labels(request)
    chosen = [v for v in request.GET.get("runs", "").split(",") if v.strip()]
    run_ids = None
    if chosen:
        try:
            run_ids = runs_by_prefix(suite, chosen)
        except SelectionError as exc:
            errors.append(str(exc))
    sort = request.GET.get("sort", "rate")
    if sort not in SORT_KEYS:
        errors.append(f"sort: unknown column {sort!r}")
        sort = "rate"
    view = request.GET.get("view", "runs")
    if view not in VIEWS:
        errors.append(f"view: expected one of {', '.join(VIEWS)}, got {view!r}")
        view = "runs"
    order = request.GET.get("order", "")
    descending = None if order not in ("asc", "desc") else order == "desc"
    board = build_leaderboard(
        suite=suite,
        view=view,
        run_ids=run_ids,
        labels=labels,
        date_from=date_from,
        date_to=date_to,
        sort=sort,
        descending=descending,
    )
    keep = [("label", v) for v in labels]
    keep += [(k, request.GET[k]) for k in ("from", "to", "runs") if request.GET.get(k)]
    sort_links = {
        key: "?"
        + urlencode(
            [
                *keep,
                ("view", view),
                ("sort", key),
                (
                    "order",
                    "asc" if key == sort and order != "asc" and descending is not False else "desc",
                ),
            ]
        )
        for key in SORT_KEYS
    }
    view_links = {v: "?" + urlencode([*keep, ("view", v), ("sort", sort)]) for v in VIEWS}
    rows = board.all_rows
    return render(
        request,
        "runs/leaderboard.html",
        {
            "suite": suite,
            "suites": Suite.objects.order_by("name"),
            "board": board,
            "rows": board.rows,
            "references": board.references,
            "view": view,
            "view_links": view_links,
            # Unfiltered, the board read every task of the suite already: one query less.
            "labels": sorted({v for t in board.results.tasks.values() for v in t.labels})
            if not labels
            else suite_labels(suite),
            "selected_labels": labels,
            "date_from": request.GET.get("from", ""),
            "date_to": request.GET.get("to", ""),
            "runs_param": request.GET.get("runs", ""),
            "sort": sort,
            "sort_links": sort_links,
            "errors": errors,
            "any_k": any(r.pass_at_k is not None for r in rows),
            "repo_table": _repo_table(board) if len(board.groups) > 1 else None,
            "compare_default": ",".join(r.key for r in _top_competitors(board.rows, 2)),
            "left_out": _left_out(suite) if board.results.excluded else [],
            "approximate": _approximate(suite, board.results.excluded),
        },
        status=400 if errors else 200,
    )


def _repo_table(board) -> dict:
    """Rows x repositories: each row's rate on each repository's tasks (same definition)."""
    return {
        "groups": board.groups,
        "rows": [
            (r, [r.groups.get(g) for g in board.groups]) for r in board.rows + board.references
        ],
    }


def _top_competitors(rows: list, count: int) -> list:
    """The best-ranked rows (references and rows with pending attempts have no rank)."""
    return sorted((r for r in rows if r.rank), key=lambda r: r.rank)[:count]


def _keys_param(value: str) -> list[str]:
    keys: list[str] = []
    for key in (k.strip() for k in value.split(",")):
        if key and key not in keys:
            keys.append(key)
    return keys


def compare_choices(suite: Suite) -> list[Entry]:
    """What the compare page offers: every configuration (all its runs), then every run."""
    results = read_results(suite=suite)
    return results.entries("configs") + results.entries("runs")


@cached_blocks()
def compare(request: HttpRequest, name: str) -> HttpResponse:
    suite = _suite_for(request, name)
    if isinstance(suite, HttpResponse):
        return suite
    keys = _keys_param(request.GET.get("models", ""))
    labels = _labels(request)
    if len(keys) < 2:
        return render(
            request,
            "runs/compare_pick.html",
            {"suite": suite, "available": compare_choices(suite), "selected": keys},
        )
    try:
        comparison = compare_models(suite=suite, keys=keys, labels=labels)
    except SelectionError as exc:
        return HttpResponseBadRequest(f"models: {exc}", content_type="text/plain; charset=utf-8")
    only = request.GET.get("only", "")
    rows = comparison.rows
    if only == "differ":
        rows = [r for r in rows if r.differs]
    fmt = request.GET.get("format", "")
    if fmt in ("csv", "json"):
        shown = {r.task_id for r in rows}
        records = [r for r in comparison_records(comparison) if r["task_id"] in shown]
        return _export(fmt, suite, comparison, records)
    _set_task_urls(suite, comparison.rows)
    query = [("models", ",".join(keys)), *[("label", v) for v in labels]]
    if only:
        query.append(("only", only))
    return render(
        request,
        "runs/compare.html",
        {
            "suite": suite,
            "comparison": comparison,
            "rows": rows,
            "matrix": matrix_html(comparison, rows),
            "only": only,
            "labels": suite_labels(suite),
            "selected_labels": labels,
            "selected_slugs": keys,
            "csv_url": "?" + urlencode([*query, ("format", "csv")]),
            "json_url": "?" + urlencode([*query, ("format", "json")]),
        },
    )


_ZERO = uuid.UUID(int=0)
_URL_SAFE = "/~:@!$&'()*+,;="


def _set_task_urls(suite: Suite, rows: list[TaskRow]) -> None:
    # One reverse() for all rows: reversing per row dominated the page time on big suites.
    prefix = reverse("task-detail", args=[suite.name, "x"])[: -len("x/")]
    for row in rows:
        row.url = f"{prefix}{quote(row.task_id, safe=_URL_SAFE)}/"


_BADGES = {
    "resolved": "resolved",
    "partial": "partly",
    "failed": "failed",
    "infra": "infra",
    "pending": "pending",
    "none": "no attempt",
}


def matrix_html(comparison: Comparison, rows: list[TaskRow]) -> SafeString:
    """The task x row table body.

    Built here rather than in the template because a 500-task suite has thousands of cells
    and template (or format_html) rendering of them dominated the page time. Every string
    that comes from data (task ids, reasons, URLs) goes through ``html.escape``; the rest are
    numbers, UUIDs and fixed class names.
    """
    attempt_url = reverse("attempt-detail", args=[_ZERO]).replace(str(_ZERO), "{}")
    vs_url = reverse("attempt-vs", args=[_ZERO, _ZERO]).replace(str(_ZERO), "{}")
    two = len(comparison.entries) == 2
    several_runs = [len(e.runs) > 1 for e in comparison.entries]
    out = []
    for row in rows:
        parts = [f'<tr><td><a href="{esc(row.url)}">{esc(row.task_id)}</a></td>']
        for cell, runs in zip(row.cells, several_runs, strict=True):
            outcome = cell.outcome
            chips = "".join(
                f'<a class="small attempt-link chip {a.outcome}" '
                f'href="{attempt_url.format(a.public_id)}" '
                f'title="run {a.run}, sample {a.sample_index}: '
                f'{esc(a.reason) if a.reason else a.outcome}">'
                f"{a.run + ' ' if runs else ''}#{a.sample_index}</a>"
                for a in cell.attempts
            )
            reason = esc(cell.reason) if outcome not in ("resolved", "pending") else ""
            share = f"{cell.resolved_count}/{cell.scored}" if len(cell.attempts) > 1 else ""
            if cell.pending:
                share += f" +{cell.pending} pending"
            parts.append(
                f'<td class="cell {outcome}"><span class="badge {outcome}">{_BADGES[outcome]}'
                f'</span> <span class="small">{reason}</span> <span class="small muted">'
                f'{share}</span><span class="chips">{chips}</span></td>'
            )
        if two:
            a, b = row.cells[0].first, row.cells[1].first
            if a and b:
                link = vs_url.format(a.public_id, b.public_id)
                parts.append(f'<td><a class="small" href="{link}">side by side</a></td>')
            else:
                parts.append("<td></td>")
        parts.append("</tr>")
        out.append("".join(parts))
    return mark_safe("\n".join(out))


def _export(fmt: str, suite: Suite, comparison: Comparison, records: list[dict]) -> HttpResponse:
    filename = f"compare-{suite.name}.{fmt}"
    if fmt == "json":
        payload = {
            "suite": suite.name,
            "entries": [entry_record(e) for e in comparison.entries],
            "summaries": [summary_record(s) for s in comparison.summaries],
            "pairs": [pair_record(p) for p in comparison.pairs],
            "tasks": records,
        }
        response = JsonResponse(payload, json_dumps_params={"indent": 2})
    else:
        response = HttpResponse(content_type="text/csv; charset=utf-8")
        fields = list(records[0]) if records else ["task_id"]
        writer = csv.DictWriter(response, fieldnames=fields)
        writer.writeheader()
        writer.writerows(records)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def taxonomy(request: HttpRequest, name: str) -> HttpResponse:
    suite = _suite_for(request, name)
    if isinstance(suite, HttpResponse):
        return suite
    breakdown = taxonomy_breakdown(suite=suite)
    attempts_url = reverse("suite-attempts", args=[suite.name])
    present = [r for r in breakdown.reasons if any(b.counts.get(r.code) for b in breakdown.models)]
    return render(
        request,
        "runs/taxonomy.html",
        {
            "suite": suite,
            "breakdown": breakdown,
            "present_reasons": present,
            "count_rows": _count_rows(breakdown, present, attempts_url),
        },
    )


def _count_rows(
    breakdown: TaxonomyBreakdown, reasons: list[ReasonColumn], attempts_url: str
) -> list[tuple[ModelBreakdown, str, list[tuple[int, str]]]]:
    """The counts table: each model, the link of its resolved attempts and (count, link) per
    reason. Built here rather than with template tags per cell (30 models x the reasons
    present cost the page several milliseconds that way)."""
    rows = []
    for b in breakdown.models:
        base = f"{attempts_url}?model={quote(b.model.slug, safe='/')}"
        cells = [(b.counts.get(r.code, 0), f"{base}&reason={r.code}") for r in reasons]
        rows.append((b, f"{base}&outcome=resolved", cells))
    return rows


ATTEMPTS_PER_PAGE = 100


def suite_attempts(request: HttpRequest, name: str) -> HttpResponse:
    suite = _suite_for(request, name)
    if isinstance(suite, HttpResponse):
        return suite
    attempts = selected_attempts(suite=suite, labels=_labels(request))
    model = run = None
    if request.GET.get("model"):
        model = get_object_or_404(ModelConfig, slug=request.GET["model"])
        attempts = attempts.filter(model_config=model)
    if request.GET.get("run"):
        run = Run.objects.filter(suite=suite, public_id__startswith=request.GET["run"]).first()
        if run is None or len(request.GET["run"]) < 8:
            return HttpResponseBadRequest(
                f"run: no run {request.GET['run']!r} on this suite",
                content_type="text/plain; charset=utf-8",
            )
        attempts = attempts.filter(run=run)
    reason = request.GET.get("reason", "")
    if reason:
        attempts = attempts.filter(failure_reason_id=reason)
    outcome = request.GET.get("outcome", "")
    if outcome:
        try:
            attempts = attempts.filter(outcome_filter(outcome))
        except SelectionError as exc:
            return HttpResponseBadRequest(str(exc), content_type="text/plain; charset=utf-8")
    task_id = request.GET.get("task", "")
    if task_id:
        attempts = attempts.filter(task__task_id=task_id)
    attempts = attempts.select_related("task", "model_config", "failure_reason").order_by(
        "task__task_id", "model_config__name", "sample_index", "id"
    )
    page = Paginator(attempts, ATTEMPTS_PER_PAGE).get_page(request.GET.get("page"))
    params = [(k, v) for k, v in request.GET.items() if k != "page"]
    return render(
        request,
        "runs/attempt_list.html",
        {
            "suite": suite,
            "page": page,
            "model": model,
            "run": run,
            "reason": reason,
            "outcome": outcome,
            "task_filter": task_id,
            "page_query": urlencode(params),
        },
    )


def _approximate(suite: Suite, excluded: frozenset[int]) -> list[dict]:
    """The suite's SWE-bench instances on an approximate environment (asked and used Python),
    and whether they count (gold-valid) or not, for the notice above the table."""
    from tasks_app.swebench.envspec import ENV_APPROXIMATE_LABEL, approximate_pythons

    tasks = (
        Task.objects.for_suite(suite)
        .with_label(ENV_APPROXIMATE_LABEL)
        .annotate(
            gold_valid=Exists(
                GoldValidation.objects.filter(
                    task=OuterRef("pk"), status=GoldValidationStatus.VALID
                )
            )
        )
        .order_by("task_id")
    )
    rows = []
    for pk, task_id, repo, version, is_valid in tasks.values_list(
        "pk", "task_id", "spec__repo", "spec__version", "gold_valid"
    ):
        asked, used = approximate_pythons(str(repo), str(version))
        state = (
            "gold patch fails here: left out"
            if pk in excluded
            else "gold-valid: counted"
            if is_valid
            else "not validated yet: counted"
        )
        rows.append({"task_id": task_id, "asked": asked, "used": used, "state": state})
    return rows


def _left_out(suite: Suite) -> list[GoldValidation]:
    """The suite's instances found invalid by gold validation (which
    ``runs.results.selection.excluded_tasks`` leaves out of every rate), with why, for the
    notice above the table."""
    return list(
        GoldValidation.objects.filter(task__suite=suite, status=GoldValidationStatus.INVALID)
        .select_related("task")
        .order_by("task__task_id", "backend")
    )
