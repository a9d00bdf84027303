"""Leaderboard rows for one suite: pure reads over stored attempts, shared by pages and the API.

One grouped query over finished attempts (model x task groups, rolled up again by model x
outcome counts, on the ``attempt_results_cover_idx`` covering index) gives every figure; the
paired tests vs the leader run on per-task outcomes, never on the attempts themselves.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.db import connections
from django.db.models import Case, Count, F, IntegerField, Max, Q, QuerySet, Sum, Value, When
from django.db.models.functions import Cast

from runs.models import AgentVariant, Attempt, AttemptStatus, ModelConfig, Run, RunSource
from runs.stats import majority_resolved, mcnemar_exact, pass_at_k, wilson_interval
from tasks_app.models import Suite, Task, invalid_task_ids

# Two models whose paired test against the leader gives at least this p-value are "tied".
TIE_ALPHA = 0.05

SORT_KEYS = (
    "rate",
    "name",
    "pass_at_1",
    "pass_at_k",
    "attempts",
    "infra",
    "mean_cost",
    "mean_tokens",
    "mean_wall",
    "cost_per_resolved",
)


@dataclass
class LeaderboardRow:
    model_id: int
    model_public_id: uuid.UUID
    name: str
    slug: str
    agent_variant: str
    is_published: bool
    attempts: int
    scored: int
    resolved: int
    infra: int
    missing: int
    tasks: int
    # Fractions in [0, 1]; None when nothing was scored.
    rate: float | None
    ci_low: float | None
    ci_high: float | None
    k: int
    pass_at_1: float | None
    pass_at_k: float | None
    mean_cost_usd: float | None
    mean_tokens: float | None
    mean_wall_sec: float | None
    cost_per_resolved_usd: float | None
    total_cost_usd: float
    # Denominator of ``rate``: scored attempts, or the suite size for published results.
    denominator: int = 0
    rank: int = 0
    is_leader: bool = False
    tied_with_leader: bool = False
    p_value_vs_leader: float | None = None
    # Task pks with an outcome (paired tests use them) and those resolved by the majority of
    # their scored samples.
    outcome_tasks: frozenset[int] = field(default=frozenset(), repr=False)
    resolved_tasks: frozenset[int] = field(default=frozenset(), repr=False)

    def sort_value(self, key: str) -> tuple:
        value = {
            "rate": self.rate,
            "name": self.name.lower(),
            "pass_at_1": self.pass_at_1,
            "pass_at_k": self.pass_at_k,
            "attempts": self.attempts,
            "infra": self.infra,
            "mean_cost": self.mean_cost_usd,
            "mean_tokens": self.mean_tokens,
            "mean_wall": self.mean_wall_sec,
            "cost_per_resolved": self.cost_per_resolved_usd,
        }[key]
        # Missing values sort last whatever the direction.
        return (value is None, value)


def suite_tasks(suite: Suite, labels: list[str] | None = None) -> QuerySet[Task]:
    """The suite's tasks carrying every label given."""
    tasks = Task.objects.for_suite(suite)
    for label in labels or []:
        tasks = tasks.with_label(label)
    return tasks


def finished_attempts(
    *,
    suite: Suite,
    labels: list[str] | None = None,
    date_from: dt.date | None = None,
    date_to: dt.date | None = None,
    model_ids: list[int] | None = None,
) -> QuerySet[Attempt]:
    """Finished attempts of a suite, filtered the way every results page filters them."""
    attempts = Attempt.objects.for_suite(suite).filter(status=AttemptStatus.FINISHED)
    if model_ids is not None:
        attempts = attempts.filter(model_config_id__in=model_ids)
    if labels:
        attempts = attempts.filter(task__in=suite_tasks(suite, labels).values("id"))
    if date_from:
        start = dt.datetime.combine(date_from, dt.time.min, tzinfo=dt.UTC)
        attempts = attempts.filter(finished_at__gte=start)
    if date_to:
        end = dt.datetime.combine(date_to + dt.timedelta(days=1), dt.time.min, tzinfo=dt.UTC)
        attempts = attempts.filter(finished_at__lt=end)
    return attempts


@dataclass
class ModelTotals:
    """One model's attempts rolled up from the per-task groups of ``grouped_totals``."""

    attempts: int = 0
    scored: int = 0
    resolved: int = 0
    infra: int = 0
    missing: int = 0
    cost: float = 0.0
    tokens: int = 0
    wall: float = 0.0
    walled: int = 0
    # (scored samples, resolved samples, task pks): the tasks sharing those counts.
    buckets: list[tuple[int, int, list[int]]] = field(default_factory=list)


def grouped_totals(
    attempts: QuerySet[Attempt], *, invalid_task_ids: list[int] | None = None
) -> dict[int, ModelTotals]:
    """Every figure of the leaderboard in one query, keyed by model configuration id.

    The inner query groups attempts by model x task (a few thousand groups); the outer one
    groups those by model x (samples, infrastructure failures, resolved) and lists the
    tasks of each group, so only a
    few hundred rows reach Python however many attempts there are. Both read only columns of
    ``attempt_results_cover_idx``.
    """
    # Few aggregates, sums of 0/1 columns rather than filtered counts where possible: this
    # query is most of the page's time. scored = n - infra is derived in Python.
    # Attempts on a task its gold validation found invalid count apart, like infrastructure
    # outcomes (``invalid_task_ids``; a filter on the attempt's own task_id column).
    infra: Any = Cast("is_infra", IntegerField())
    not_infra = Q(is_infra=False)
    if invalid_task_ids:
        infra = Case(
            When(Q(is_infra=True) | Q(task_id__in=invalid_task_ids), then=Value(1)),
            default=Value(0),
            output_field=IntegerField(),
        )
        not_infra &= ~Q(task_id__in=invalid_task_ids)
    inner = (
        attempts.order_by()
        .values_list("model_config_id", "task_id")
        .annotate(
            n=Count("id"),
            infra=Sum(infra),
            resolved=Count(
                "id", filter=not_infra & Q(failure_reason__isnull=True, is_missing=False)
            ),
            missing=Sum(Cast("is_missing", IntegerField())),
            cost=Sum("cost_usd"),
            tokens=Sum(F("tokens_in") + F("tokens_out")),
            wall=Sum("duration_sec"),
            walled=Count("duration_sec"),
        )
    )
    sql, params = inner.query.sql_with_params()
    connection = connections[attempts.db]
    if connection.vendor == "postgresql":
        task_list = "STRING_AGG(CAST(task_id AS TEXT), ',')"
    else:
        task_list = "GROUP_CONCAT(task_id)"
    outer = (
        "SELECT model_config_id, n, infra, resolved, SUM(missing), SUM(cost), SUM(tokens),"
        f" SUM(wall), SUM(walled), {task_list} FROM ({sql}) per_task"
        " GROUP BY model_config_id, n, infra, resolved"
    )
    totals: dict[int, ModelTotals] = defaultdict(ModelTotals)
    with connection.cursor() as cursor:
        cursor.execute(outer, params)
        rows = cursor.fetchall()
    for model_id, n, infra, resolved, missing, cost, tokens, wall, walled, tasks in rows:
        t = totals[model_id]
        task_ids = [int(x) for x in str(tasks).split(",")] if tasks else []
        infra = infra or 0
        scored = n - infra
        t.attempts += n * len(task_ids)
        t.scored += scored * len(task_ids)
        t.resolved += resolved * len(task_ids)
        t.infra += infra * len(task_ids)
        t.missing += missing or 0
        t.cost += float(cost or 0)
        t.tokens += int(tokens or 0)
        t.wall += float(wall or 0)
        t.walled += walled or 0
        t.buckets.append((scored, resolved, task_ids))
    return dict(totals)


def leaderboard_rows(
    *,
    suite: Suite,
    labels: list[str] | None = None,
    date_from: dt.date | None = None,
    date_to: dt.date | None = None,
    sort: str = "rate",
    descending: bool | None = None,
) -> list[LeaderboardRow]:
    """One row per model configuration that has finished attempts on ``suite``.

    Success rates count scored attempts only (infrastructure failures are shown as their own
    count). Imported published results are rated over the whole suite (``resolved / suite
    size``), their missing instances counting as unresolved. The leader is the best rate
    among non-reference agents (oracle and no-op only bound the scale). Every other
    non-reference row carries the exact McNemar p-value of its per-task outcomes against the
    leader's, and is marked tied when p >= 0.05.
    """
    attempts = finished_attempts(suite=suite, labels=labels, date_from=date_from, date_to=date_to)
    totals = grouped_totals(attempts, invalid_task_ids=invalid_task_ids(suite))
    if not totals:
        return []
    models = {
        m.id: m
        for m in ModelConfig.objects.filter(id__in=list(totals)).exclude(
            agent_variant=AgentVariant.BASELINE
        )
    }
    published, samples = _run_facts(suite, list(models))
    task_ids = list(suite_tasks(suite, labels).values_list("id", flat=True))

    rows = [
        _build_row(
            models[model_id],
            totals[model_id],
            is_published=model_id in published,
            k=samples.get(model_id, 1),
            suite_task_ids=task_ids,
        )
        for model_id in models
    ]
    _mark_ties(rows)
    _rank(rows)
    key = sort if sort in SORT_KEYS else "rate"
    if descending is None:
        descending = key not in ("name", "mean_cost", "mean_wall", "cost_per_resolved", "infra")
    present = [r for r in rows if r.sort_value(key)[1] is not None]
    absent = [r for r in rows if r.sort_value(key)[1] is None]
    present.sort(key=lambda r: r.sort_value(key), reverse=descending)
    return present + sorted(absent, key=lambda r: r.name.lower())


def _run_facts(suite: Suite, model_ids: list[int]) -> tuple[set[int], dict[int, int]]:
    """Models whose results here all come from published reports, and each model's k (the
    most samples per task of its runs)."""
    sources: dict[int, set[str]] = defaultdict(set)
    samples: dict[int, int] = {}
    for model_id, source, k in (
        Run.objects.filter(suite=suite, model_config_id__in=model_ids)
        .order_by()
        .values_list("model_config_id", "source")
        .annotate(k=Max("samples"))
    ):
        sources[model_id].add(source)
        samples[model_id] = max(samples.get(model_id, 1), k or 1)
    published = {m for m, s in sources.items() if s == {RunSource.PUBLISHED}}
    return published, samples


def _build_row(
    model: ModelConfig,
    total: ModelTotals,
    *,
    is_published: bool,
    k: int,
    suite_task_ids: list[int],
) -> LeaderboardRow:
    suite_size = len(suite_task_ids)
    resolved = total.resolved
    missing = total.missing
    if is_published:
        denominator = suite_size
        # Instances without any entry at all also count as missing.
        missing += max(0, suite_size - sum(len(ids) for _, _, ids in total.buckets))
    else:
        denominator = total.scored
    rate = resolved / denominator if denominator else None
    low, high = wilson_interval(resolved, denominator) if denominator else (None, None)
    # pass@k depends on a task's (n, c) only, so each bucket is computed once.
    scored_buckets = [(n, c, len(ids)) for n, c, ids in total.buckets if n > 0]
    p1 = _weighted([(c / n, w) for n, c, w in scored_buckets])
    pk = _weighted([(pass_at_k(n, c, k), w) for n, c, w in scored_buckets]) if k > 1 else None
    if is_published:
        # A missing instance is unresolved: published results have an outcome on every task.
        outcome_tasks = frozenset(suite_task_ids)
        resolved_tasks = frozenset(t for _, c, ids in total.buckets if c > 0 for t in ids)
    else:
        outcome_tasks = frozenset(t for n, _, ids in total.buckets if n > 0 for t in ids)
        resolved_tasks = frozenset(
            t for n, c, ids in total.buckets if majority_resolved(n, c) for t in ids
        )
    attempts = total.attempts
    return LeaderboardRow(
        model_id=model.id,
        model_public_id=model.public_id,
        name=model.name,
        slug=model.slug,
        agent_variant=model.agent_variant,
        is_published=is_published,
        attempts=attempts,
        scored=total.scored,
        resolved=resolved,
        infra=total.infra,
        missing=missing,
        tasks=sum(len(ids) for _, _, ids in total.buckets),
        rate=rate,
        ci_low=low,
        ci_high=high,
        k=k,
        pass_at_1=p1,
        pass_at_k=pk,
        mean_cost_usd=total.cost / attempts if attempts else None,
        mean_tokens=total.tokens / attempts if attempts else None,
        mean_wall_sec=total.wall / total.walled if total.walled else None,
        cost_per_resolved_usd=total.cost / resolved if resolved else None,
        total_cost_usd=total.cost,
        denominator=denominator,
        outcome_tasks=outcome_tasks,
        resolved_tasks=resolved_tasks,
    )


def _weighted(values: list[tuple[float, int]]) -> float | None:
    total = sum(w for _, w in values)
    return sum(v * w for v, w in values) / total if total else None


def paired_counts(a: LeaderboardRow, b: LeaderboardRow) -> tuple[int, int, int, int]:
    """(only a, only b, both, neither) resolved, over tasks with an outcome for both."""
    common = a.outcome_tasks & b.outcome_tasks
    a_ok = a.resolved_tasks & common
    b_ok = b.resolved_tasks & common
    both = len(a_ok & b_ok)
    only_a = len(a_ok) - both
    only_b = len(b_ok) - both
    return only_a, only_b, both, len(common) - only_a - only_b - both


# Reference agents bound the scale (gold patch, no change); they are shown, never the leader.
REFERENCE_VARIANTS = (AgentVariant.ORACLE, AgentVariant.NOP)


def _mark_ties(rows: list[LeaderboardRow]) -> None:
    rated = [r for r in rows if r.rate is not None and r.agent_variant not in REFERENCE_VARIANTS]
    if not rated:
        return
    leader = max(rated, key=lambda r: (r.rate, r.resolved, r.name))
    leader.is_leader = True
    leader.tied_with_leader = True
    for row in rated:
        if row is leader:
            continue
        only_leader, only_row, _, _ = paired_counts(leader, row)
        row.p_value_vs_leader = mcnemar_exact(only_leader, only_row)
        row.tied_with_leader = row.p_value_vs_leader >= TIE_ALPHA


def _rank(rows: list[LeaderboardRow]) -> None:
    ordered = sorted(
        (r for r in rows if r.rate is not None), key=lambda r: r.rate or 0.0, reverse=True
    )
    for position, row in enumerate(ordered, start=1):
        row.rank = position
