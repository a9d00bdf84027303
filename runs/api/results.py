"""Leaderboard, comparison and taxonomy breakdown over the REST API, as JSON or CSV.

Every figure comes from the functions the pages render (``runs.results.leaderboard``,
``runs.results.compare``, ``runs.results.taxonomy_report``): the API only reshapes them.
"""

from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from ninja import Query, Router

from benchsite.accounts.auth import PUBLIC_READ
from benchsite.api.common import csv_response, refuse_unknown_params, split_list
from benchsite.api.errors import ApiInputError, ErrorOut
from runs.api.schemas import CompareOut, CompareQuery, LeaderboardOut, TaxonomyOut
from runs.model_configs import model_config_by_ref
from runs.models import ModelConfig
from runs.queries import LeaderboardQuery, TaxonomyQuery
from runs.results.compare import (
    Comparison,
    compare_models,
    comparison_records,
    entry_record,
    pair_record,
    summary_record,
)
from runs.results.leaderboard import COST_RECORD_FIELDS, Leaderboard, LeaderboardRow
from runs.results.leaderboard import leaderboard as build_leaderboard
from runs.results.params import date_order_problem, split_values
from runs.results.scoring import SCORE_FIGURES, score_record
from runs.results.selection import SelectionError, runs_by_prefix
from runs.results.taxonomy_report import TaxonomyBreakdown, taxonomy_breakdown
from tasks_app.models import Suite

router = Router(tags=["results"])

MAX_COMPARED = 10
ERRORS = {400: ErrorOut, 401: ErrorOut, 404: ErrorOut, 422: ErrorOut}
CSV_NOTE = " `format=csv` (or the `.csv` path) returns the same figures as CSV."


def _suite(name: str) -> Suite:
    suite = Suite.objects.filter(name=name).first()
    if suite is None:
        raise ApiInputError("suite", f"no suite named {name!r}", status=404, location="query")
    return suite


def _models(raw: str | None, *, minimum: int) -> list[ModelConfig]:
    refs = split_list(raw)
    if len(refs) < minimum:
        raise ApiInputError("models", f"name at least {minimum} model configurations")
    if len(refs) > MAX_COMPARED:
        raise ApiInputError("models", f"at most {MAX_COMPARED} model configurations")
    models = []
    for ref in refs:
        config = model_config_by_ref(ref)
        if config is None:
            raise ApiInputError("models", f"no model configuration {ref!r}", status=404)
        if config in models:
            raise ApiInputError("models", f"{ref!r} is named twice")
        models.append(config)
    return models


def _ref(model: ModelConfig) -> dict:
    return {"public_id": model.public_id, "name": model.name, "slug": model.slug}


# --- Leaderboard -----------------------------------------------------------------------------

# A score's columns: the figures every export shares (runs.results.scoring, one list).
SCORE_CSV = (*SCORE_FIGURES, "complete")
LEADERBOARD_CSV = (
    "rank",
    "status",
    "key",
    "kind",
    "model",
    "slug",
    "run",
    "date",
    "imported_on",
    "agent_variant",
    "published",
    "reference",
    *SCORE_CSV,
    "resolved_pct",
    "ci_low_pct",
    "ci_high_pct",
    "attempted_pct",
    "mean_cost_usd",
    "total_cost_usd",
    "cost_per_resolved_usd",
    *COST_RECORD_FIELDS,
    "mean_tokens",
    "mean_calls",
    "mean_wall_sec",
    "leader",
    "tied_with_leader",
    "p_value_vs_leader",
    "paired_vs_leader",
    "coverage_differs_from_leader",
)


def _pct(value: float | None) -> float | None:
    return None if value is None else value * 100


def leaderboard_row_out(row: LeaderboardRow) -> dict:
    run = row.run
    return {
        **score_record(row.score),
        "key": row.key,
        "kind": row.kind,
        "rank": row.rank,
        "status": row.status,
        "model": {"public_id": row.model_public_id, "name": row.name, "slug": row.slug},
        "run": None
        if run is None
        else {
            "public_id": run.public_id,
            "created_at": run.created_at,
            "finished_at": run.finished_at,
            "date_known": run.date_known,
            "samples": run.samples,
            "source": run.source,
            "status": run.status,
            "url": reverse("run-detail", args=[run.public_id]),
        },
        "runs": [r.public_id for r in row.entry.runs],
        "date": row.date,
        "imported_on": row.imported_on,
        "agent_variant": row.agent_variant,
        "condition": row.condition,
        "is_published": row.is_published,
        "is_reference": row.is_reference,
        "infra": row.infra,
        "denominator": row.denominator,
        "resolved_pct": _pct(row.rate),
        "pass_at_1": row.pass_at_1,
        "mean_cost_usd": row.mean_cost_usd,
        "total_cost_usd": row.total_cost_usd,
        "cost_per_resolved_usd": row.cost_per_resolved_usd,
        **row.cost_record(),
        "mean_tokens": row.mean_tokens,
        "mean_calls": row.mean_calls,
        "mean_wall_sec": row.mean_wall_sec,
        "is_leader": row.is_leader,
        "tied_with_leader": row.tied_with_leader,
        "p_value_vs_leader": row.p_value_vs_leader,
        "paired_vs_leader": row.paired_vs_leader,
        "coverage_differs_from_leader": row.coverage_differs_from_leader,
        "by_repo": {
            g: {
                "tasks": v.tasks,
                "resolved": v.resolved,
                "rate": v.rate,
                "attempted_tasks": v.attempted_tasks,
                "attempted_resolved": v.attempted_resolved,
                "attempted_rate": v.attempted_rate,
            }
            for g, v in row.groups.items()
        },
    }


def _leaderboard(query: LeaderboardQuery) -> Leaderboard:
    if problem := date_order_problem(query.date_from, query.date_to):
        field, message = problem.split(": ", 1)
        raise ApiInputError(field, message, location="query")
    suite = _suite(query.suite)
    run_ids = None
    if split_list(query.runs):
        try:
            run_ids = runs_by_prefix(suite, split_list(query.runs))
        except SelectionError as exc:
            raise ApiInputError("runs", str(exc), status=404, location="query") from exc
    return build_leaderboard(
        suite=suite,
        run_ids=run_ids,
        view=query.view,
        labels=split_values(query.labels) or None,
        date_from=query.date_from,
        date_to=query.date_to,
        sort=query.sort,
        descending=query.descending if query.order is None else query.order == "desc",
        include_undated=query.include_undated,
        count_out_flagged=query.count_out_flagged,
    )


def _leaderboard_csv_row(r: LeaderboardRow) -> list:
    score = score_record(r.score)
    return [
        r.rank,
        r.status,
        r.key,
        r.kind,
        r.name,
        r.slug,
        r.run.public_id if r.run else None,
        r.date,
        r.imported_on,
        r.agent_variant,
        r.is_published,
        r.is_reference,
        *(score[k] for k in SCORE_CSV),
        _pct(r.rate),
        _pct(r.ci_low),
        _pct(r.ci_high),
        _pct(r.attempted_rate),
        r.mean_cost_usd,
        r.total_cost_usd,
        r.cost_per_resolved_usd,
        *r.cost_record().values(),
        r.mean_tokens,
        r.mean_calls,
        r.mean_wall_sec,
        r.is_leader,
        r.tied_with_leader,
        r.p_value_vs_leader,
        r.paired_vs_leader,
        r.coverage_differs_from_leader,
    ]


def _leaderboard_csv(board: Leaderboard) -> HttpResponse:
    return csv_response(
        f"leaderboard-{board.suite.name}.csv",
        LEADERBOARD_CSV,
        (_leaderboard_csv_row(r) for r in board.all_rows),
    )


@router.get(
    "/leaderboard",
    response={200: LeaderboardOut, **ERRORS},
    auth=PUBLIC_READ,
    url_name="leaderboard",
    summary="A suite's leaderboard: the figures of the leaderboard page",
    description="Rates are fractions; resolved_pct is the page's percentage." + CSV_NOTE,
)
def leaderboard(request: HttpRequest, query: Query[LeaderboardQuery]):
    refuse_unknown_params(request, LeaderboardQuery)
    board = _leaderboard(query)
    if query.format == "csv":
        return _leaderboard_csv(board)
    return {
        "suite": board.suite.name,
        "view": board.view,
        "labels": split_values(query.labels),
        "date_from": query.date_from,
        "date_to": query.date_to,
        "rows": [leaderboard_row_out(r) for r in board.all_rows],
    }


@router.get(
    "/leaderboard.csv",
    response={200: str, **ERRORS},
    auth=PUBLIC_READ,
    url_name="leaderboard_csv",
    summary="A suite's leaderboard as CSV",
)
def leaderboard_csv(request: HttpRequest, query: Query[LeaderboardQuery]):
    refuse_unknown_params(request, LeaderboardQuery)
    return _leaderboard_csv(_leaderboard(query))


# --- Comparison ------------------------------------------------------------------------------


def comparison_out(comparison: Comparison, rows: list | None = None) -> dict:
    return {
        "suite": comparison.suite.name,
        "entries": [entry_record(e) for e in comparison.entries],
        "summaries": [summary_record(s) for s in comparison.summaries],
        "pairs": [pair_record(p) for p in comparison.pairs],
        "rows": [
            {
                "task_id": row.task_id,
                "labels": row.labels,
                "differs": row.differs,
                "cells": [
                    {
                        "outcome": c.outcome,
                        "reason": c.reason,
                        "resolved": c.resolved_count,
                        "scored": c.scored,
                        "pending": c.pending,
                        "attempts": [a.public_id for a in c.attempts],
                    }
                    for c in row.cells
                ],
            }
            for row in (comparison.rows if rows is None else rows)
        ],
    }


def _compare_keys(raw: str | None) -> list[str]:
    """Each ref is a configuration (name, slug or public id) or ``ref@run-id``."""
    refs = split_list(raw)
    if len(refs) < 2:
        raise ApiInputError("models", "name at least 2 configurations or runs")
    if len(refs) > MAX_COMPARED:
        raise ApiInputError("models", f"at most {MAX_COMPARED} configurations or runs")
    keys: list[str] = []
    for ref in refs:
        # A configuration's name may itself hold "@" (ab run-suite's "llm:m@base-url").
        config, at, run = model_config_by_ref(ref), "", ""
        if config is None and "@" in ref:
            name, at, run = ref.rpartition("@")
            config = model_config_by_ref(name)
        if config is None:
            raise ApiInputError("models", f"no model configuration {ref!r}", status=404)
        key = f"{config.slug}{at}{run}"
        if key in keys:
            raise ApiInputError("models", f"{ref!r} is named twice")
        keys.append(key)
    return keys


def _comparison(query: CompareQuery) -> Comparison:
    suite = _suite(query.suite)
    try:
        return compare_models(
            suite=suite,
            keys=_compare_keys(query.models),
            labels=split_values(query.labels) or None,
        )
    except SelectionError as exc:
        raise ApiInputError("models", str(exc), status=404) from exc


def _comparison_csv(comparison: Comparison, only: str | None = None) -> HttpResponse:
    shown = {r.task_id for r in _shown_rows(comparison, only)}
    records = [r for r in comparison_records(comparison) if r["task_id"] in shown]
    header = ["task_id"]
    for entry in comparison.entries:
        header += [
            f"{entry.label}:{k}"
            for k in ("outcome", "reason", "resolved", "scored", "pending", "attempts")
        ]
    return csv_response(
        f"compare-{comparison.suite.name}.csv", header, ([r[h] for h in header] for r in records)
    )


@router.get(
    "/compare",
    response={200: CompareOut, **ERRORS},
    auth=PUBLIC_READ,
    url_name="compare",
    summary="Compare model configurations on a suite: the figures of the compare page",
    description="Cells are in the order of `models`; pairs follow itertools.combinations."
    + CSV_NOTE,
)
def compare(request: HttpRequest, query: Query[CompareQuery]):
    refuse_unknown_params(request, CompareQuery)
    comparison = _comparison(query)
    if query.format == "csv":
        return _comparison_csv(comparison, query.only)
    return comparison_out(comparison, _shown_rows(comparison, query.only))


def _shown_rows(comparison: Comparison, only: str | None) -> list:
    """The task rows ``only`` keeps, as the page's ``only=differ``."""
    return [r for r in comparison.rows if r.differs] if only == "differ" else comparison.rows


@router.get(
    "/compare.csv",
    response={200: str, **ERRORS},
    auth=PUBLIC_READ,
    url_name="compare_csv",
    summary="Comparison as CSV",
)
def compare_csv(request: HttpRequest, query: Query[CompareQuery]):
    refuse_unknown_params(request, CompareQuery)
    return _comparison_csv(_comparison(query), query.only)


# --- Taxonomy --------------------------------------------------------------------------------


def taxonomy_out(breakdown: TaxonomyBreakdown) -> dict:
    slugs = {b.model.id: b.model.slug for b in breakdown.models}
    return {
        "suite": breakdown.suite.name,
        "reasons": [
            {
                "code": r.code,
                "description": r.description,
                "typical_cause": r.typical_cause,
                "precedence": r.precedence,
                "category": r.category,
            }
            for r in breakdown.reasons
        ],
        "models": [
            {
                "model": _ref(b.model),
                "resolved": b.resolved,
                "total": b.total,
                "infra": b.infra,
                "missing": b.missing,
                "counts": b.counts,
                "score": score_record(b.score) if b.score else None,
            }
            for b in breakdown.models
        ],
        "points": [
            {
                "model": slugs.get(p.model_id, str(p.model_id)),
                "run": p.run_public_id,
                "at": p.at,
                "tasks": p.tasks,
                "resolved": p.resolved,
                "pending": p.pending,
                "rate": p.rate,
                "dated": p.dated,
            }
            for p in breakdown.points
        ],
    }


def _taxonomy(query: TaxonomyQuery) -> TaxonomyBreakdown:
    suite = _suite(query.suite)
    models = _models(query.models, minimum=1) if split_list(query.models) else None
    return taxonomy_breakdown(suite=suite, models=models, include_undated=query.include_undated)


def _taxonomy_csv(breakdown: TaxonomyBreakdown) -> HttpResponse:
    codes = [r.code for r in breakdown.reasons]
    header = [
        "model",
        "rate",
        "score_resolved",
        "score_tasks",
        "attempted_rate",
        "attempted_tasks",
        "pending",
        "resolved",
    ]
    figures = ("rate", "resolved", "tasks", "attempted_rate", "attempted_tasks", "pending")
    # Missing instances are no failure reason: a column of their own, out of ``total``.
    return csv_response(
        f"taxonomy-{breakdown.suite.name}.csv",
        [*header, *codes, "infra", "total", "missing"],
        (
            [
                b.model.name,
                *(getattr(b.score, f) if b.score else None for f in figures),
                b.resolved,
                *(b.counts.get(c, 0) for c in codes),
                b.infra,
                b.total,
                b.missing,
            ]
            for b in breakdown.models
        ),
    )


@router.get(
    "/taxonomy",
    response={200: TaxonomyOut, **ERRORS},
    auth=PUBLIC_READ,
    url_name="taxonomy",
    summary="Failure reasons per model on a suite, and resolved share per run over time",
    description="The figures of the taxonomy page." + CSV_NOTE,
)
def taxonomy(request: HttpRequest, query: Query[TaxonomyQuery]):
    refuse_unknown_params(request, TaxonomyQuery)
    breakdown = _taxonomy(query)
    if query.format == "csv":
        return _taxonomy_csv(breakdown)
    return taxonomy_out(breakdown)


@router.get(
    "/taxonomy.csv",
    response={200: str, **ERRORS},
    auth=PUBLIC_READ,
    url_name="taxonomy_csv",
    summary="Taxonomy as CSV",
)
def taxonomy_csv(request: HttpRequest, query: Query[TaxonomyQuery]):
    refuse_unknown_params(request, TaxonomyQuery)
    return _taxonomy_csv(_taxonomy(query))
