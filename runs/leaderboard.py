"""Leaderboard rows for one suite: pure reads over stored attempts, shared by pages and the API.

One grouped query over finished attempts (suite x model x task, on the
``attempt_suite_model_idx`` index) gives every figure; the per-model roll-up and the paired
tests vs the leader are done on those few thousand groups, never on the attempts themselves.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections import defaultdict
from dataclasses import dataclass, field

from django.db.models import Count, Max, Q, QuerySet, Sum

from runs.models import AgentVariant, Attempt, AttemptStatus, ModelConfig, Run, RunSource
from runs.stats import majority_resolved, mcnemar_exact, pass_at_k, wilson_interval
from tasks_app.models import Suite, Task

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
    "last",
)


@dataclass
class TaskTally:
    """One model's samples on one task: scored samples, resolved ones, and the rest."""

    scored: int = 0
    resolved: int = 0
    infra: int = 0
    missing: int = 0


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
    last_finished_at: dt.datetime | None
    # Denominator of ``rate``: scored attempts, or the suite size for published results.
    denominator: int = 0
    rank: int = 0
    is_leader: bool = False
    tied_with_leader: bool = False
    p_value_vs_leader: float | None = None
    per_task: dict[int, TaskTally] = field(default_factory=dict, repr=False)

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
            "last": self.last_finished_at,
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


def task_tallies(attempts: QuerySet[Attempt]) -> dict[int, dict[int, TaskTally]]:
    """{model_config_id: {task_id: TaskTally}} in one grouped query."""
    rows = (
        attempts.order_by()
        .values_list("model_config_id", "task_id")
        .annotate(
            scored=Count("id", filter=Q(is_infra=False)),
            resolved=Count(
                "id", filter=Q(is_infra=False, failure_reason__isnull=True, is_missing=False)
            ),
            infra=Count("id", filter=Q(is_infra=True)),
            missing=Count("id", filter=Q(is_missing=True)),
        )
    )
    tallies: dict[int, dict[int, TaskTally]] = defaultdict(dict)
    for model_id, task_id, scored, resolved, infra, missing in rows:
        tallies[model_id][task_id] = TaskTally(scored, resolved, infra, missing)
    return tallies


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
    totals = {
        row["model_config_id"]: row
        for row in attempts.order_by()
        .values("model_config_id")
        .annotate(
            attempts=Count("id"),
            cost=Sum("cost_usd"),
            tokens_in=Sum("tokens_in"),
            tokens_out=Sum("tokens_out"),
            wall=Sum("duration_sec"),
            walled=Count("duration_sec"),
            max_sample=Max("sample_index"),
            last=Max("finished_at"),
        )
    }
    if not totals:
        return []
    models = {
        m.id: m
        for m in ModelConfig.objects.filter(id__in=list(totals)).exclude(
            agent_variant=AgentVariant.BASELINE
        )
    }
    tallies = task_tallies(attempts.filter(model_config_id__in=list(models)))
    published = _published_model_ids(suite, list(models))
    task_ids = list(suite_tasks(suite, labels).values_list("id", flat=True))
    suite_size = len(task_ids)

    rows = [
        _build_row(
            models[model_id],
            totals[model_id],
            tallies.get(model_id, {}),
            is_published=model_id in published,
            suite_size=suite_size,
        )
        for model_id in models
    ]
    _mark_ties(rows, task_ids)
    _rank(rows)
    key = sort if sort in SORT_KEYS else "rate"
    if descending is None:
        descending = key not in ("name", "mean_cost", "mean_wall", "cost_per_resolved", "infra")
    present = [r for r in rows if r.sort_value(key)[1] is not None]
    absent = [r for r in rows if r.sort_value(key)[1] is None]
    present.sort(key=lambda r: r.sort_value(key), reverse=descending)
    return present + sorted(absent, key=lambda r: r.name.lower())


def _published_model_ids(suite: Suite, model_ids: list[int]) -> set[int]:
    """Model configurations whose results on this suite all come from published reports."""
    sources: dict[int, set[str]] = defaultdict(set)
    for model_id, source in (
        Run.objects.filter(suite=suite, model_config_id__in=model_ids)
        .order_by()
        .values_list("model_config_id", "source")
        .distinct()
    ):
        sources[model_id].add(source)
    return {m for m, s in sources.items() if s == {RunSource.PUBLISHED}}


def _build_row(
    model: ModelConfig,
    total: dict,
    per_task: dict[int, TaskTally],
    *,
    is_published: bool,
    suite_size: int,
) -> LeaderboardRow:
    attempts = total["attempts"]
    scored = sum(t.scored for t in per_task.values())
    resolved = sum(t.resolved for t in per_task.values())
    infra = sum(t.infra for t in per_task.values())
    missing = sum(t.missing for t in per_task.values())
    k = (total["max_sample"] or 0) + 1
    if is_published:
        denominator = suite_size
        # Instances without any entry at all also count as missing.
        missing += max(0, suite_size - len(per_task))
    else:
        denominator = scored
    rate = resolved / denominator if denominator else None
    low, high = wilson_interval(resolved, denominator) if denominator else (None, None)
    pairs = [(t.scored, t.resolved) for t in per_task.values() if t.scored > 0]
    p1 = _mean([pass_at_k(n, c, 1) for n, c in pairs])
    pk = _mean([pass_at_k(n, c, k) for n, c in pairs]) if k > 1 else None
    cost = float(total["cost"] or 0)
    tokens = (total["tokens_in"] or 0) + (total["tokens_out"] or 0)
    return LeaderboardRow(
        model_id=model.id,
        model_public_id=model.public_id,
        name=model.name,
        slug=model.slug,
        agent_variant=model.agent_variant,
        is_published=is_published,
        attempts=attempts,
        scored=scored,
        resolved=resolved,
        infra=infra,
        missing=missing,
        tasks=len(per_task),
        rate=rate,
        ci_low=low,
        ci_high=high,
        k=k,
        pass_at_1=p1,
        pass_at_k=pk,
        mean_cost_usd=cost / attempts if attempts else None,
        mean_tokens=tokens / attempts if attempts else None,
        mean_wall_sec=(total["wall"] / total["walled"]) if total["walled"] else None,
        cost_per_resolved_usd=cost / resolved if resolved else None,
        total_cost_usd=cost,
        last_finished_at=total["last"],
        denominator=denominator,
        per_task=per_task,
    )


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def task_outcomes(row: LeaderboardRow, task_ids: list[int]) -> dict[int, bool]:
    """Per-task resolved/unresolved for paired tests: majority of scored samples.

    Tasks with only infrastructure failures have no outcome and drop out of the pair, except
    for published results, where a missing instance is unresolved.
    """
    if row.is_published:
        return {t: (row.per_task[t].resolved > 0) if t in row.per_task else False for t in task_ids}
    return {t: majority_resolved(x.scored, x.resolved) for t, x in row.per_task.items() if x.scored}


def paired_counts(a: dict[int, bool], b: dict[int, bool]) -> tuple[int, int, int, int]:
    """(only a, only b, both, neither) over tasks with an outcome for both."""
    only_a = only_b = both = neither = 0
    for task_id, a_ok in a.items():
        if task_id not in b:
            continue
        b_ok = b[task_id]
        if a_ok and b_ok:
            both += 1
        elif a_ok:
            only_a += 1
        elif b_ok:
            only_b += 1
        else:
            neither += 1
    return only_a, only_b, both, neither


# Reference agents bound the scale (gold patch, no change); they are shown, never the leader.
REFERENCE_VARIANTS = (AgentVariant.ORACLE, AgentVariant.NOP)


def _mark_ties(rows: list[LeaderboardRow], task_ids: list[int]) -> None:
    rated = [r for r in rows if r.rate is not None and r.agent_variant not in REFERENCE_VARIANTS]
    if not rated:
        return
    leader = max(rated, key=lambda r: (r.rate, r.resolved, r.name))
    leader.is_leader = True
    leader.tied_with_leader = True
    lead = task_outcomes(leader, task_ids)
    for row in rated:
        if row is leader:
            continue
        only_leader, only_row, _, _ = paired_counts(lead, task_outcomes(row, task_ids))
        row.p_value_vs_leader = mcnemar_exact(only_leader, only_row)
        row.tied_with_leader = row.p_value_vs_leader >= TIE_ALPHA


def _rank(rows: list[LeaderboardRow]) -> None:
    ordered = sorted(
        (r for r in rows if r.rate is not None), key=lambda r: r.rate or 0.0, reverse=True
    )
    for position, row in enumerate(ordered, start=1):
        row.rank = position
