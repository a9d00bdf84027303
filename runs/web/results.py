"""Results pages of a suite: leaderboard, model comparison, failure taxonomy, attempt lists."""

from __future__ import annotations

import csv
import dataclasses
import uuid
from dataclasses import dataclass
from html import escape as esc
from urllib.parse import quote, urlencode

from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.safestring import SafeString, mark_safe

from benchsite.accounts.access import can_read_leaderboards
from runs.exports import FORMATS
from runs.models import ModelConfig, Run, RunDateSource
from runs.queries import CompareQuery, LeaderboardQuery, TaxonomyQuery
from runs.results import params
from runs.results.attempt_list import FilterError as AttemptFilterError
from runs.results.attempt_list import model_ids
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
from runs.results.params import date_order_problem, split_values
from runs.results.selection import (
    VIEWS,
    Entry,
    SelectionError,
    read_results,
    runs_by_prefix,
)
from runs.results.taxonomy_report import (
    ModelBreakdown,
    ReasonColumn,
    TaxonomyBreakdown,
    taxonomy_breakdown,
)
from runs.web.board_html import leaderboard_rows_html, task_list_html, usage_columns
from runs.web.board_notices import approximate_notice
from runs.web.page_cache import cached_blocks
from runs.web.query import old_names_redirect, page_query, unknown_params
from tasks_app.models import GoldValidation, GoldValidationStatus, Suite, Task


def _suite_for(request: HttpRequest, name: str) -> Suite | HttpResponse:
    if not can_read_leaderboards(request.user):
        return redirect_to_login(request.get_full_path())
    return get_object_or_404(Suite, name=name)


def _to_api(request: HttpRequest, suite: Suite, url_name: str) -> HttpResponse | None:
    """``format=csv|json`` on a page: the API endpoint that gives the same figures under the
    same parameter names (a 302 to it), else None."""
    fmt = request.GET.get("format")
    if fmt is None:
        return None
    if fmt not in ("csv", "json"):
        return HttpResponseBadRequest(
            f"format: expected csv or json, got {fmt!r}", content_type="text/plain; charset=utf-8"
        )
    query = [(k, v) for k, v in request.GET.items() if k != "format"]
    url = reverse(url_name + ("_csv" if fmt == "csv" else ""))
    return redirect(url + "?" + urlencode([("suite", suite.name), *query]))


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
    moved = old_names_redirect(request, params.LEADERBOARD) or _to_api(
        request, suite, "api:leaderboard"
    )
    if moved:
        return moved
    errors: list[str] = []
    notices = unknown_params(request, params.LEADERBOARD)
    # The API's schema reads the query (same defaults, same errors), and the same checks follow.
    query = page_query(
        request, LeaderboardQuery, params.LEADERBOARD, fixed={"suite": suite.name}, errors=errors
    )
    date_from, date_to = query.date_from, query.date_to
    problem = date_order_problem(date_from, date_to)
    if problem:
        errors.append(problem)
        date_from = date_to = None
    labels = split_values(query.labels)
    chosen = split_values([query.runs or ""])
    run_ids = None
    if chosen:
        try:
            run_ids = runs_by_prefix(suite, chosen)
        except SelectionError as exc:
            errors.append(str(exc))
    sort, view, order = query.sort, query.view, query.order or ""
    descending = None if not order else order == "desc"
    undated = query.include_undated
    count_out = query.count_out_flagged
    board = build_leaderboard(
        suite=suite,
        view=view,
        run_ids=run_ids,
        labels=labels,
        date_from=date_from,
        date_to=date_to,
        sort=sort,
        descending=descending,
        include_undated=undated,
        count_out_flagged=count_out,
    )
    keep = [("labels", ",".join(labels))] if labels else []
    keep += [(k, v.isoformat()) for k, v in (("date_from", date_from), ("date_to", date_to)) if v]
    keep += [("runs", ",".join(chosen))] if chosen else []
    keep += [("include_undated", "1")] if undated else []
    keep += [("count_out_flagged", "1")] if count_out else []
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
    _set_row_links(suite, rows, board.leader)
    any_k = any(r.pass_at_k is not None for r in rows)
    columns = usage_columns(rows)
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
            "date_from": date_from.isoformat() if date_from else "",
            "date_to": date_to.isoformat() if date_to else "",
            "runs_param": ",".join(chosen),
            "undated": undated,
            "count_out_flagged": count_out,
            # A date filter leaves undated imports out: say so, as the taxonomy page does.
            "undated_left_out": _undated_runs(suite)
            if (date_from or date_to) and not undated
            else 0,
            "include_undated_link": "?" + urlencode([*keep, ("include_undated", "1")]),
            "any_partial": any(r.score.partial for r in rows),
            "sort": sort,
            "sort_links": sort_links,
            "errors": errors,
            "notices": notices,
            "export_query": urlencode([*keep, ("view", view), ("sort", sort)]),
            "any_k": any_k,
            "columns": columns,
            "width": 8 + any_k + len(columns),  # the table's columns, for the references' row
            "rows_html": leaderboard_rows_html(board.rows, any_k=any_k, columns=columns),
            "references_html": leaderboard_rows_html(
                board.references, any_k=any_k, columns=columns
            ),
            "repo_table": _repo_table(board) if len(board.groups) > 1 else None,
            "compare_default": ",".join(r.key for r in _top_competitors(board.rows, 2)),
            "left_out": _left_out(suite) if board.results.excluded else [],
            "approximate": approximate_notice(board),
        },
        status=400 if errors else 200,
    )


@dataclass(frozen=True, slots=True)
class RowLinks:
    attempts: str  # the row's configuration's attempts
    infra: str  # its infrastructure outcomes
    config: str = ""  # its configuration's page
    run: str = ""  # a run's row: the run page and its attempts
    run_attempts: str = ""
    runs: tuple[tuple[str, str], ...] = ()  # a configuration's row: (run page, short id)
    compare_leader: str = ""  # the compare page of the row and the leader


def _set_row_links(suite: Suite, rows: list, leader=None) -> None:
    """Each row's links, from one reverse() per kind (reversing per row cost the page more
    than its figures)."""
    attempts = reverse("suite-attempts", args=[suite.name])
    compare = reverse("suite-compare", args=[suite.name]) + "?models={},{}"
    run_url = reverse("run-detail", args=[_ZERO]).replace(str(_ZERO), "{}")
    config_url = reverse("model-config-detail", args=["x"])[: -len("x/")] + "{}/"
    for r in rows:
        base = f"{attempts}?models={quote(r.slug, safe='')}"
        config = config_url.format(quote(r.slug, safe=""))
        if r.run is not None:
            short = r.run.short_id
            r.links = RowLinks(
                attempts=base,
                infra=f"{base}&runs={short}&outcome=infra",
                config=config,
                run=run_url.format(r.run.public_id),
                run_attempts=f"{attempts}?runs={short}",
            )
        else:
            runs = tuple((run_url.format(run.public_id), run.short_id) for run in r.entry.runs)
            r.links = RowLinks(
                attempts=base, infra=f"{base}&outcome=infra", config=config, runs=runs
            )
        if leader is not None and r is not leader and r.rank:
            both = (quote(leader.key, safe="@"), quote(r.key, safe="@"))
            r.links = dataclasses.replace(r.links, compare_leader=compare.format(*both))


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


def compare_choices(suite: Suite) -> list[Entry]:
    """What the compare page offers: every configuration (all its runs), then every run."""
    results = read_results(suite=suite)
    return results.entries("configs") + results.entries("runs")


@cached_blocks()
def compare(request: HttpRequest, name: str) -> HttpResponse:
    suite = _suite_for(request, name)
    if isinstance(suite, HttpResponse):
        return suite
    moved = old_names_redirect(request, params.COMPARE)
    if moved:
        return moved
    notices = unknown_params(request, params.COMPARE)
    keys = split_values(request.GET.getlist("models"))
    if len(keys) < 2:
        return render(
            request,
            "runs/compare_pick.html",
            {
                "suite": suite,
                "available": compare_choices(suite),
                "selected": keys,
                "notices": notices,
            },
        )
    errors: list[str] = []
    read = page_query(request, CompareQuery, params.COMPARE, fixed={"suite": name}, errors=errors)
    only, labels = read.only or "", split_values(read.labels)
    fmt = request.GET.get("format", "")
    if fmt and fmt not in FORMATS:
        errors.append(f"format: expected {' or '.join(FORMATS)}, got {fmt!r}")
    if errors:
        return HttpResponseBadRequest("; ".join(errors), content_type="text/plain; charset=utf-8")
    try:
        comparison = compare_models(suite=suite, keys=keys, labels=labels)
    except SelectionError as exc:
        return HttpResponseBadRequest(f"models: {exc}", content_type="text/plain; charset=utf-8")
    rows = comparison.rows
    if only == "differ":
        rows = [r for r in rows if r.differs]
    if fmt:
        shown = {r.task_id for r in rows}
        records = [r for r in comparison_records(comparison) if r["task_id"] in shown]
        return _export(fmt, suite, comparison, records)
    _set_task_urls(suite, comparison.rows)
    for pair in comparison.pairs:
        pair.lists = {  # type: ignore[attr-defined]  # for the template only
            "better": task_list_html(pair.fixed_by_b),
            "worse": task_list_html(pair.regressed),
            "both": task_list_html(pair.both),
            "neither": task_list_html(pair.neither),
        }
    query = [("models", ",".join(keys))] + ([("labels", ",".join(labels))] if labels else [])
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
            "notices": notices,
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
    "missing": "not attempted",
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
            reason = esc(cell.reason) if outcome not in ("resolved", "pending", "missing") else ""
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
        response: HttpResponse = JsonResponse(payload, json_dumps_params={"indent": 2})
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
    moved = old_names_redirect(request, params.TAXONOMY) or _to_api(request, suite, "api:taxonomy")
    if moved:
        return moved
    notices = unknown_params(request, params.TAXONOMY)
    errors: list[str] = []
    breakdown, undated, refs = taxonomy_request(request, suite, errors)
    attempts_url = reverse("suite-attempts", args=[suite.name])
    present = [r for r in breakdown.reasons if any(b.counts.get(r.code) for b in breakdown.models)]
    chart_query = [("models", ",".join(refs))] if refs else []
    chart_query += [("include_undated", "1")] if undated else []
    return render(
        request,
        "runs/taxonomy.html",
        {
            "suite": suite,
            "breakdown": breakdown,
            "present_reasons": present,
            "count_rows": _count_rows(breakdown, present, attempts_url),
            "any_missing": any(b.missing for b in breakdown.models),
            "undated": undated,
            "chart_url": reverse("suite-taxonomy-chart", args=[suite.name])
            + ("?" + urlencode(chart_query) if chart_query else ""),
            "models_query": urlencode([("models", ",".join(refs))]) if refs else "",
            "export_query": urlencode(chart_query),
            "undated_runs": _undated_runs(suite),
            "errors": errors,
            "notices": notices,
        },
        status=400 if errors else 200,
    )


def taxonomy_request(
    request: HttpRequest, suite: Suite, errors: list[str]
) -> tuple[TaxonomyBreakdown, bool, list[str]]:
    """The taxonomy of ``models`` (default: every model) with ``include_undated``, as the page
    and its chart data read them (with the API's ``TaxonomyQuery``); a bad value goes to
    ``errors`` and is not applied."""
    query = page_query(
        request, TaxonomyQuery, params.TAXONOMY, fixed={"suite": suite.name}, errors=errors
    )
    undated = query.include_undated
    refs = split_values([query.models or ""])
    models = None
    if refs:
        try:
            ids = model_ids(refs)
        except AttemptFilterError as exc:
            errors.append(str(exc))
            refs = []
        else:
            by_id = ModelConfig.objects.in_bulk(ids)
            models = [by_id[i] for i in ids]
    breakdown = taxonomy_breakdown(suite=suite, models=models, include_undated=undated)
    return breakdown, undated, refs


def _undated_runs(suite: Suite) -> int:
    """Runs of the suite imported without a date: left off the over-time chart by default."""
    return Run.objects.filter(suite=suite, date_source=RunDateSource.UNKNOWN).count()


def _count_rows(
    breakdown: TaxonomyBreakdown, reasons: list[ReasonColumn], attempts_url: str
) -> list[tuple[ModelBreakdown, str, list[tuple[int, str]]]]:
    """The counts table: each model, the link of its resolved attempts and (count, link) per
    reason. Built here rather than with template tags per cell (30 models x the reasons
    present cost the page several milliseconds that way)."""
    rows = []
    for b in breakdown.models:
        base = f"{attempts_url}?models={quote(b.model.slug, safe='')}"
        cells = [(b.counts.get(r.code, 0), f"{base}&reason={r.code}") for r in reasons]
        rows.append((b, base, cells))
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
