"""Which runs, tasks and attempts a results surface counts, read in one grouped query.

Every results surface (leaderboard, compare, taxonomy, API, exports, CLI) reads a suite's
results through ``read_results`` and scores its rows with ``runs.results.scoring``: the
per-task tallies come from here, the arithmetic from there, so the same selection gives the
same figures.

A row is an ``Entry``: one run (key ``<config slug>@<first 8 of the run id>``) or a
configuration over its runs in the selection (key: the configuration's slug).
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from django.db import connections
from django.db.models import Count, F, Q, QuerySet, Sum

from runs.models import AgentVariant, Attempt, ModelConfig, Run, RunSource
from runs.results.scoring import (
    FINAL_STATUSES,
    FINISHED,
    NOT_EVALUATED,
    UNRUN_STATUSES,
    Score,
    TaskTally,
    pool,
    score,
)
from tasks_app.models import Suite, Task

# Reference agents bound the scale (gold patch, no change): shown apart, never ranked.
REFERENCE_VARIANTS = (AgentVariant.ORACLE, AgentVariant.NOP)
VIEWS = ("runs", "configs")


class SelectionError(ValueError):
    """An entry key that names no run or configuration of the selection; says which."""


@dataclass(frozen=True, slots=True)
class TaskFacts:
    pk: int
    task_id: str
    repo: str
    labels: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RunFacts:
    id: int
    public_id: object  # uuid.UUID
    model_id: int
    samples: int
    source: str
    status: str
    created_at: dt.datetime
    finished_at: dt.datetime | None

    @property
    def short_id(self) -> str:
        return str(self.public_id)[:8]


@dataclass
class Usage:
    """What a row's attempts that ran consumed: finished attempts, a published run's missing
    instances apart (they did no work). Averages are per attempt that ran."""

    ran: int = 0
    cost: float = 0.0
    tokens: int = 0
    calls: int = 0  # model API calls: the attempts' ``steps``
    wall: float = 0.0
    walled: int = 0

    def add(self, other: Usage) -> None:
        self.ran += other.ran
        self.cost += other.cost
        self.tokens += other.tokens
        self.calls += other.calls
        self.wall += other.wall
        self.walled += other.walled

    def per_attempt(self, total: float) -> float | None:
        """``total`` over the attempts that ran; None ("—") when nothing was recorded (published
        reports without trajectories, a log without costs, the oracle and no-op)."""
        return total / self.ran if self.ran and total else None


@dataclass(frozen=True)
class Entry:
    """One row: a run, or a configuration over ``runs``."""

    key: str
    model: ModelConfig
    runs: tuple[RunFacts, ...]
    run: RunFacts | None = None  # set for a run's own row

    @property
    def kind(self) -> str:
        return "run" if self.run is not None else "config"

    @property
    def is_reference(self) -> bool:
        return self.model.agent_variant in REFERENCE_VARIANTS

    @property
    def whole_suite(self) -> bool:
        """Published results are rated over the whole suite."""
        return bool(self.runs) and all(r.source == RunSource.PUBLISHED for r in self.runs)

    @property
    def k(self) -> int:
        return max((r.samples for r in self.runs), default=1)

    @property
    def label(self) -> str:
        return f"{self.model.name} · run {self.run.short_id}" if self.run else self.model.name


@dataclass
class SuiteResults:
    """A suite's results under one selection (labels, dates, models, runs, excluded tasks)."""

    suite: Suite
    universe: tuple[int, ...]  # task pks of the selection, in pk order
    tasks: dict[int, TaskFacts]
    excluded: frozenset[int]
    runs: dict[int, RunFacts]
    models: dict[int, ModelConfig]
    tallies: dict[int, dict[int, TaskTally]]  # run id -> task pk -> tally
    usage: dict[int, Usage]  # run id -> usage
    _scores: dict[tuple[int, ...], Score] = field(default_factory=dict, repr=False)

    def entries(self, view: str = "runs") -> list[Entry]:
        """Every row of the selection: one per run (``runs``) or per configuration."""
        if view not in VIEWS:
            raise SelectionError(f"view: expected one of {', '.join(VIEWS)}, got {view!r}")
        by_model: dict[int, list[RunFacts]] = defaultdict(list)
        for run in sorted(self.runs.values(), key=lambda r: (r.created_at, r.id)):
            if run.model_id in self.models:
                by_model[run.model_id].append(run)
        out = []
        for model_id, runs in by_model.items():
            model = self.models[model_id]
            if view == "configs":
                out.append(Entry(model.slug, model, tuple(runs)))
            else:
                out += [Entry(f"{model.slug}@{r.short_id}", model, (r,), r) for r in runs]
        return sorted(out, key=lambda e: (e.model.name.lower(), e.key))

    def entry(self, key: str) -> Entry:
        """The row named by ``key``: a configuration's slug, or ``slug@<run id prefix>``."""
        slug, _, prefix = key.partition("@")
        model = next((m for m in self.models.values() if m.slug == slug), None)
        if model is None:
            raise SelectionError(f"no results for model configuration {slug!r} here")
        runs = tuple(
            sorted(
                (r for r in self.runs.values() if r.model_id == model.id),
                key=lambda r: (r.created_at, r.id),
            )
        )
        if not prefix:
            return Entry(model.slug, model, runs)
        matches = [r for r in runs if str(r.public_id).startswith(prefix.lower())]
        if len(matches) != 1 or len(prefix) < 8:
            raise SelectionError(f"no single run {prefix!r} of {slug!r} here")
        run = matches[0]
        return Entry(f"{model.slug}@{run.short_id}", model, (run,), run)

    def score(self, entry: Entry) -> Score[int]:
        """The entry's score (``runs.results.scoring.score``), computed once per set of runs (a
        configuration with one run and that run's row are the same figures)."""
        key = tuple(r.id for r in entry.runs)
        cached = self._scores.get(key)
        if cached is None:
            cached = score(
                self.tally(entry),
                universe=self.universe,
                whole_suite=entry.whole_suite,
                k=entry.k,
                excluded=self.excluded,
            )
            self._scores[key] = cached
        return cached

    def tally(self, entry: Entry) -> dict[int, TaskTally]:
        if len(entry.runs) == 1:
            return self.tallies.get(entry.runs[0].id, {})
        return pool(self.tallies.get(r.id, {}) for r in entry.runs)

    def entry_usage(self, entry: Entry) -> Usage:
        total = Usage()
        for run in entry.runs:
            total.add(self.usage.get(run.id, Usage()))
        return total

    def repos(self) -> dict[int, str]:
        return {pk: t.repo for pk, t in self.tasks.items()}


def excluded_tasks(suite: Suite) -> frozenset[int]:
    """Tasks every surface leaves out of every figure unless told otherwise: SWE-bench
    instances whose gold validation found them invalid (gold not FULL or empty patch not NO:
    ``ab validate-suite --variant oracle``). Pages say how many were left out."""
    from tasks_app.models import invalid_task_ids

    return frozenset(invalid_task_ids(suite))


def runs_by_prefix(suite: Suite, prefixes: Iterable[str]) -> list[int]:
    """Run ids of ``suite`` named by public-id prefixes (8+ characters); raises
    ``SelectionError`` naming the first that matches no single run."""
    ids = []
    for prefix in prefixes:
        matches = list(
            Run.objects.filter(suite=suite, public_id__startswith=prefix.lower()).values_list(
                "id", flat=True
            )[:2]
        )
        if len(prefix) < 8 or len(matches) != 1:
            raise SelectionError(f"runs: no single run {prefix!r} on this suite")
        ids.append(matches[0])
    return ids


def suite_tasks(suite: Suite, labels: list[str] | None = None) -> QuerySet[Task]:
    """The suite's tasks carrying every label given."""
    tasks = Task.objects.for_suite(suite)
    for label in labels or []:
        tasks = tasks.with_label(label)
    return tasks


def selected_attempts(
    *,
    suite: Suite,
    labels: list[str] | None = None,
    date_from: dt.date | None = None,
    date_to: dt.date | None = None,
    model_ids: Collection[int] | None = None,
    run_ids: Collection[int] | None = None,
) -> QuerySet[Attempt]:
    """Attempts of a suite in the selection, every status (pending ones count as pending).

    Dates filter on when an attempt finished; attempts still pending have no such date and
    stay in unless an end date is given.
    """
    attempts = Attempt.objects.for_suite(suite)
    if model_ids is not None:
        attempts = attempts.filter(model_config_id__in=list(model_ids))
    if run_ids is not None:
        attempts = attempts.filter(run_id__in=list(run_ids))
    if labels:
        attempts = attempts.filter(task__in=suite_tasks(suite, labels).values("id"))
    if date_from or date_to:
        window = Q()
        if date_from:
            window &= Q(finished_at__gte=dt.datetime.combine(date_from, dt.time.min, tzinfo=dt.UTC))
        if date_to:
            end = dt.datetime.combine(date_to + dt.timedelta(days=1), dt.time.min, tzinfo=dt.UTC)
            window &= Q(finished_at__lt=end)
        if not date_to:
            window |= ~Q(status__in=FINAL_STATUSES)
        attempts = attempts.filter(window)
    return attempts


def finished_attempts(**selection) -> QuerySet[Attempt]:
    """The selection's finished attempts (the attempt lists show these)."""
    return selected_attempts(**selection).filter(status=FINISHED)


OUTCOMES = ("resolved", "failed", "missing", "infra", "pending", "not_evaluated")


def outcome_filter(outcome: str) -> Q:
    """Attempts that ``runs.results.scoring.attempt_outcome`` calls ``outcome``, as a filter."""
    scored = Q(status=FINISHED, is_infra=False)
    filters = {
        "resolved": scored & Q(failure_reason__isnull=True, is_missing=False),
        "failed": scored & Q(failure_reason__isnull=False, is_missing=False),
        "missing": scored & Q(is_missing=True),
        "infra": Q(status=FINISHED, is_infra=True) | Q(status__in=list(UNRUN_STATUSES)),
        "pending": ~Q(status__in=list(FINAL_STATUSES)),
        "not_evaluated": Q(status=NOT_EVALUATED),
    }
    if outcome not in filters:
        raise SelectionError(f"outcome: expected one of {', '.join(OUTCOMES)}, got {outcome!r}")
    return filters[outcome]


def repo_of(repo_url: str) -> str:
    """``https://github.com/org/name`` -> ``org/name``; a local path or bundle -> its name."""
    url = repo_url.rstrip("/")
    for prefix in ("https://github.com/", "http://github.com/", "git@github.com:"):
        if url.startswith(prefix):
            return url[len(prefix) :].removesuffix(".git")
    name = PurePosixPath(url.split("?")[0]).name
    for suffix in (".bundle", ".git"):
        name = name.removesuffix(suffix)
    return name or url


def read_results(
    *,
    suite: Suite,
    labels: list[str] | None = None,
    date_from: dt.date | None = None,
    date_to: dt.date | None = None,
    model_ids: Collection[int] | None = None,
    run_ids: Collection[int] | None = None,
    exclude_tasks: Iterable[int] | None = None,
    usage: bool = False,
) -> SuiteResults:
    """The selection's tasks, runs and per-task tallies: a fixed number of queries.

    ``exclude_tasks``: task pks left out of every figure; by default ``excluded_tasks(suite)``.
    ``usage``: also sum cost, tokens, calls and wall time per run (the leaderboard).
    Baseline-validation runs are not results and are left out.
    """
    if model_ids is not None:
        # The covering index is by run: a few run ids make it a few range scans.
        of_models = Run.objects.filter(suite=suite, model_config_id__in=list(model_ids))
        if run_ids is not None:
            of_models = of_models.filter(id__in=list(run_ids))
        run_ids, model_ids = list(of_models.values_list("id", flat=True)), None
    tasks = {
        pk: TaskFacts(pk, task_id, repo_of(url), tuple(labels_ or ()))
        for pk, task_id, url, labels_ in suite_tasks(suite, labels)
        .order_by("id")
        .values_list("id", "task_id", "repo_url", "labels")
    }
    attempts = selected_attempts(
        suite=suite,
        labels=labels,
        date_from=date_from,
        date_to=date_to,
        model_ids=model_ids,
        run_ids=run_ids,
    )
    tallies = _grouped_tallies(attempts)
    runs = {
        r[0]: RunFacts(*r)
        for r in Run.objects.filter(id__in=list(tallies)).values_list(
            "id", "public_id", "model_config_id", "samples", "source", "status", "created_at",
            "finished_at",
        )
    }  # fmt: skip
    models = {
        m.id: m
        # The condition's files stay in the database: ``condition`` names them for the rows.
        for m in ModelConfig.objects.filter(id__in={r.model_id for r in runs.values()})
        .exclude(agent_variant=AgentVariant.BASELINE)
        .defer("workspace_files")
    }
    runs = {i: r for i, r in runs.items() if r.model_id in models}
    return SuiteResults(
        suite=suite,
        universe=tuple(tasks),
        tasks=tasks,
        excluded=frozenset(excluded_tasks(suite) if exclude_tasks is None else exclude_tasks),
        runs=runs,
        models=models,
        tallies={i: t for i, t in tallies.items() if i in runs},
        usage=_usage(attempts) if usage else {},
    )


def _grouped_tallies(attempts: QuerySet[Attempt]) -> dict[int, dict[int, TaskTally]]:
    """Per run, per task tallies in one query.

    The inner query groups attempts by run x task (in the order of
    ``attempt_run_results_idx``, so without a sort); the outer one groups those by run x tally
    and lists the tasks of each group, so a few hundred rows reach Python however many
    attempts there are. The classification is ``runs.results.scoring.classify`` written in SQL.
    """
    final = list(FINAL_STATUSES)
    scored = Q(status=FINISHED, is_infra=False)
    inner = (
        attempts.order_by()
        .values_list("run_id", "task_id")
        .annotate(
            scored=Count("id", filter=scored),
            resolved=Count("id", filter=scored & Q(failure_reason__isnull=True, is_missing=False)),
            excluded=Count(
                "id",
                filter=Q(status=FINISHED, is_infra=True) | Q(status__in=list(UNRUN_STATUSES)),
            ),
            pending=Count("id", filter=~Q(status__in=final)),
            not_evaluated=Count("id", filter=Q(status=NOT_EVALUATED)),
            missing=Count("id", filter=scored & Q(is_missing=True)),
        )
    )
    sql, params = inner.query.sql_with_params()
    connection = connections[attempts.db]
    if connection.vendor == "postgresql":
        task_list = "STRING_AGG(CAST(task_id AS TEXT), ',')"
    else:
        task_list = "GROUP_CONCAT(task_id)"
    columns = "scored, resolved, excluded, pending, not_evaluated, missing"
    outer = (
        f"SELECT run_id, {columns}, {task_list} FROM ({sql}) per_task GROUP BY run_id, {columns}"
    )
    with connection.cursor() as cursor:
        cursor.execute(outer, params)
        rows = cursor.fetchall()
    tallies: dict[int, dict[int, TaskTally]] = defaultdict(dict)
    for run_id, *counts, task_ids in rows:
        tally = TaskTally(*counts)
        per_task = tallies[run_id]
        for task in str(task_ids).split(","):
            per_task[int(task)] = tally
    return dict(tallies)


def _usage(attempts: QuerySet[Attempt]) -> dict[int, Usage]:
    """Cost, tokens, model API calls and wall time of each run's attempts that ran.

    Every column read is in ``attempt_run_results_idx`` (by run first), so the database sums
    from the index without a sort.
    """
    rows = (
        attempts.filter(status=FINISHED, is_missing=False)
        .order_by()
        .values_list("run_id")
        .annotate(
            n=Count("id"),
            cost=Sum("cost_usd"),
            tokens=Sum(F("tokens_in") + F("tokens_out")),
            calls=Sum("steps"),
            wall=Sum("duration_sec"),
            walled=Count("duration_sec"),
        )
    )
    return {
        run_id: Usage(
            n, float(cost or 0), int(tokens or 0), int(calls or 0), float(wall or 0), walled
        )
        for run_id, n, cost, tokens, calls, wall, walled in rows
    }
