"""Leaderboard, comparison and taxonomy breakdown over the REST API, as JSON or CSV.

Every figure comes from the functions the pages render (``runs.leaderboard``,
``runs.compare``, ``runs.taxonomy_report``): the API only reshapes them.
"""

from django.http import HttpRequest, HttpResponse
from ninja import Query, Router

from benchsite.accounts.auth import PUBLIC_READ
from benchsite.api_common import csv_response, split_list
from benchsite.api_errors import ApiInputError, ErrorOut
from runs.api_schemas import (
    CompareOut,
    CompareQuery,
    LeaderboardOut,
    LeaderboardQuery,
    TaxonomyOut,
    TaxonomyQuery,
)
from runs.compare import Comparison, compare_models, comparison_records
from runs.leaderboard import LeaderboardRow, leaderboard_rows
from runs.model_configs import model_config_by_ref
from runs.models import ModelConfig
from runs.taxonomy_report import TaxonomyBreakdown, taxonomy_breakdown
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

LEADERBOARD_CSV = (
    "rank", "model", "slug", "agent_variant", "published", "attempts", "scored", "resolved",
    "infra", "missing", "tasks", "denominator", "resolved_pct", "ci_low_pct", "ci_high_pct",
    "k", "pass_at_1", "pass_at_k", "mean_cost_usd", "total_cost_usd", "cost_per_resolved_usd",
    "mean_tokens", "mean_calls", "mean_wall_sec", "leader", "tied_with_leader", "p_value_vs_leader",
)  # fmt: skip


def _pct(value: float | None) -> float | None:
    return None if value is None else value * 100


def leaderboard_row_out(row: LeaderboardRow) -> dict:
    return {
        "rank": row.rank,
        "model": {"public_id": row.model_public_id, "name": row.name, "slug": row.slug},
        "agent_variant": row.agent_variant,
        "is_published": row.is_published,
        "attempts": row.attempts,
        "scored": row.scored,
        "resolved": row.resolved,
        "infra": row.infra,
        "missing": row.missing,
        "not_evaluated": row.not_evaluated,
        "tasks": row.tasks,
        "denominator": row.denominator,
        "rate": row.rate,
        "resolved_pct": _pct(row.rate),
        "ci_low": row.ci_low,
        "ci_high": row.ci_high,
        "k": row.k,
        "pass_at_1": row.pass_at_1,
        "pass_at_k": row.pass_at_k,
        "mean_cost_usd": row.mean_cost_usd,
        "total_cost_usd": row.total_cost_usd,
        "cost_per_resolved_usd": row.cost_per_resolved_usd,
        "mean_tokens": row.mean_tokens,
        "mean_calls": row.mean_calls,
        "mean_wall_sec": row.mean_wall_sec,
        "is_leader": row.is_leader,
        "tied_with_leader": row.tied_with_leader,
        "p_value_vs_leader": row.p_value_vs_leader,
    }


def _leaderboard(query: LeaderboardQuery) -> tuple[Suite, list[LeaderboardRow]]:
    if query.date_from and query.date_to and query.date_from > query.date_to:
        raise ApiInputError("date_to", "must not be before date_from", location="query")
    suite = _suite(query.suite)
    rows = leaderboard_rows(
        suite=suite,
        labels=split_list(query.labels) or None,
        date_from=query.date_from,
        date_to=query.date_to,
        sort=query.sort,
        descending=query.descending,
    )
    return suite, rows


def _leaderboard_csv_row(r: LeaderboardRow) -> list:
    return [
        r.rank or None, r.name, r.slug, r.agent_variant, r.is_published, r.attempts,
        r.scored, r.resolved, r.infra, r.missing, r.tasks, r.denominator, _pct(r.rate),
        _pct(r.ci_low), _pct(r.ci_high), r.k, r.pass_at_1, r.pass_at_k,
        r.mean_cost_usd, r.total_cost_usd, r.cost_per_resolved_usd, r.mean_tokens,
        r.mean_calls, r.mean_wall_sec, r.is_leader, r.tied_with_leader, r.p_value_vs_leader,
    ]  # fmt: skip


def _leaderboard_csv(suite: Suite, rows: list[LeaderboardRow]) -> HttpResponse:
    return csv_response(
        f"leaderboard-{suite.name}.csv",
        LEADERBOARD_CSV,
        (_leaderboard_csv_row(r) for r in rows),
    )


@router.get(
    "/leaderboard",
    response={200: LeaderboardOut, **ERRORS},
    auth=PUBLIC_READ,
    summary="A suite's leaderboard: the figures of the leaderboard page",
    description="Rates are fractions; resolved_pct is the page's percentage." + CSV_NOTE,
)
def leaderboard(request: HttpRequest, query: Query[LeaderboardQuery]):
    suite, rows = _leaderboard(query)
    if query.format == "csv":
        return _leaderboard_csv(suite, rows)
    return {
        "suite": suite.name,
        "labels": split_list(query.labels),
        "date_from": query.date_from,
        "date_to": query.date_to,
        "rows": [leaderboard_row_out(r) for r in rows],
    }


@router.get(
    "/leaderboard.csv",
    response={200: str, **ERRORS},
    auth=PUBLIC_READ,
    summary="A suite's leaderboard as CSV",
)
def leaderboard_csv(request: HttpRequest, query: Query[LeaderboardQuery]):
    return _leaderboard_csv(*_leaderboard(query))


# --- Comparison ------------------------------------------------------------------------------


def comparison_out(comparison: Comparison) -> dict:
    return {
        "suite": comparison.suite.name,
        "models": [_ref(m) for m in comparison.models],
        "summaries": [
            {
                "model": _ref(s.model),
                "attempts": s.attempts,
                "scored": s.scored,
                "resolved": s.resolved,
                "infra": s.infra,
                "rate": s.rate,
            }
            for s in comparison.summaries
        ],
        "pairs": [
            {
                "a": _ref(p.a),
                "b": _ref(p.b),
                "paired": p.paired,
                "fixed_by_b": [r.task_id for r in p.fixed_by_b],
                "regressed": [r.task_id for r in p.regressed],
                "both": [r.task_id for r in p.both],
                "neither": [r.task_id for r in p.neither],
                "rate_a": p.rate_a,
                "rate_b": p.rate_b,
                "delta": p.delta,
                "p_value": p.p_value,
                "significant": p.significant,
            }
            for p in comparison.pairs
        ],
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
                        "attempts": [a.public_id for a in c.attempts],
                    }
                    for c in row.cells
                ],
            }
            for row in comparison.rows
        ],
    }


def _comparison(query: CompareQuery) -> Comparison:
    suite = _suite(query.suite)
    return compare_models(
        suite=suite,
        models=_models(query.models, minimum=2),
        labels=split_list(query.labels) or None,
    )


def _comparison_csv(comparison: Comparison) -> HttpResponse:
    records = comparison_records(comparison)
    header = ["task_id"]
    for model in comparison.models:
        header += [f"{model.name}:{k}" for k in ("outcome", "reason", "resolved", "scored")]
        header.append(f"{model.name}:attempts")
    return csv_response(
        f"compare-{comparison.suite.name}.csv", header, ([r[h] for h in header] for r in records)
    )


@router.get(
    "/compare",
    response={200: CompareOut, **ERRORS},
    auth=PUBLIC_READ,
    summary="Compare model configurations on a suite: the figures of the compare page",
    description="Cells are in the order of `models`; pairs follow itertools.combinations."
    + CSV_NOTE,
)
def compare(request: HttpRequest, query: Query[CompareQuery]):
    comparison = _comparison(query)
    if query.format == "csv":
        return _comparison_csv(comparison)
    return comparison_out(comparison)


@router.get(
    "/compare.csv", response={200: str, **ERRORS}, auth=PUBLIC_READ, summary="Comparison as CSV"
)
def compare_csv(request: HttpRequest, query: Query[CompareQuery]):
    return _comparison_csv(_comparison(query))


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
                "counts": b.counts,
            }
            for b in breakdown.models
        ],
        "points": [
            {
                "model": slugs.get(p.model_id, str(p.model_id)),
                "run": p.run_public_id,
                "at": p.at,
                "scored": p.scored,
                "resolved": p.resolved,
                "rate": p.rate,
            }
            for p in breakdown.points
        ],
    }


def _taxonomy(query: TaxonomyQuery) -> TaxonomyBreakdown:
    suite = _suite(query.suite)
    models = _models(query.models, minimum=1) if split_list(query.models) else None
    return taxonomy_breakdown(suite=suite, models=models)


def _taxonomy_csv(breakdown: TaxonomyBreakdown) -> HttpResponse:
    codes = [r.code for r in breakdown.reasons]
    return csv_response(
        f"taxonomy-{breakdown.suite.name}.csv",
        ["model", "resolved", *codes, "infra", "total"],
        (
            [b.model.name, b.resolved, *(b.counts.get(c, 0) for c in codes), b.infra, b.total]
            for b in breakdown.models
        ),
    )


@router.get(
    "/taxonomy",
    response={200: TaxonomyOut, **ERRORS},
    auth=PUBLIC_READ,
    summary="Failure reasons per model on a suite, and resolved share per run over time",
    description="The figures of the taxonomy page." + CSV_NOTE,
)
def taxonomy(request: HttpRequest, query: Query[TaxonomyQuery]):
    breakdown = _taxonomy(query)
    if query.format == "csv":
        return _taxonomy_csv(breakdown)
    return taxonomy_out(breakdown)


@router.get(
    "/taxonomy.csv", response={200: str, **ERRORS}, auth=PUBLIC_READ, summary="Taxonomy as CSV"
)
def taxonomy_csv(request: HttpRequest, query: Query[TaxonomyQuery]):
    return _taxonomy_csv(_taxonomy(query))
