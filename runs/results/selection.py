"""Which runs, tasks and attempts a results surface counts, read in one grouped query.

Every results surface (leaderboard, compare, taxonomy, API, exports, CLI) reads a suite's
results through ``read_results`` and scores its rows with ``runs.results.scoring``: the
per-task tallies come from here, the arithmetic from there, so the same selection gives the
same figures.

A row is an ``Entry``: one run (key ``<config slug>@<first 8 of the run id>``) or a
configuration over its runs in the selection (key: the configuration's slug).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
from collections import defaultdict
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import PurePosixPath

import numpy as np
from django.db.models import BigIntegerField, Count, F, FloatField, Q, QuerySet, Sum

from runs.models import (
    AgentVariant,
    Attempt,
    AttemptFlag,
    ModelConfig,
    Run,
    RunDateSource,
    RunSource,
)
from runs.results import run_tallies, tally_sql, tally_store
from runs.results.scoring import (
    COUNTS,
    FINAL_STATUSES,
    FINISHED,
    MISSING,
    NOT_EVALUATED,
    UNRUN_STATUSES,
    Score,
    Tallies,
    TaskIndex,
    score,
)
from runs.usage_fields import VALID, CostBasis
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
    date_source: str = RunDateSource.HARNESS

    @property
    def short_id(self) -> str:
        return str(self.public_id)[:8]

    @property
    def date_known(self) -> bool:
        """False for an imported run whose source said nothing of when it ran: its only
        time is the import's, shown as "imported on ..." (``date`` is None)."""
        return self.date_source != RunDateSource.UNKNOWN

    @property
    def date(self) -> dt.datetime | None:
        """When the run ran (finished, or was created while it runs); None when unknown."""
        return (self.finished_at or self.created_at) if self.date_known else None


# The cost columns by class, in Usage's order.
CLASS_COLUMNS = ("cost_input", "cost_cache_write", "cost_cache_read", "cost_output")


@dataclass
class Usage:
    """What a row's finished attempts consumed, as far as it is known: an attempt whose usage
    nothing recorded (an imported report without a trajectory) counts in none of the
    averages, and missing instances did no work. Averages are per attempt that recorded it."""

    cost: float = 0.0
    costed: int = 0  # attempts with a known cost
    tokens: int = 0
    tokened: int = 0
    calls: int = 0  # model API calls: the attempts' ``steps``
    called: int = 0
    wall: float = 0.0
    walled: int = 0
    # The cost by class (runs/pricing.py) over the ``broken_down`` attempts that recorded it;
    # attempts whose cost is unknown (a price missing) or reported by an imported run.
    cost_input: float = 0.0
    cost_cache_write: float = 0.0
    cost_cache_read: float = 0.0
    cost_output: float = 0.0
    broken_down: int = 0
    cost_unknown: int = 0
    cost_reported: int = 0

    def add(self, other: Usage) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    @property
    def mean_cost(self) -> float | None:
        """The cost per attempt with a known cost; None when none has one."""
        return self.per_attempt(self.cost, self.costed)

    @property
    def cost_shown(self) -> bool:
        """Whether there is a cost to show: a figure, or attempts whose cost is unknown or
        reported (an oracle's zeros are no cost: "—", as its leaderboard row reads)."""
        return self.mean_cost is not None or bool(self.cost_unknown or self.cost_reported)

    @property
    def mean_cost_breakdown(self) -> dict[str, float | None]:
        """The cost per attempt by class, over the attempts whose cost was broken down."""
        n = self.broken_down
        return {
            name.removeprefix("cost_"): (getattr(self, name) / n if n else None)
            for name in CLASS_COLUMNS
        }

    @property
    def cost_breakdown(self) -> dict[str, float | None]:
        """The cost of all those attempts by class; None when none was broken down."""
        n = self.broken_down
        return {
            name.removeprefix("cost_"): (getattr(self, name) if n else None)
            for name in CLASS_COLUMNS
        }

    @staticmethod
    def per_attempt(total: float, known: int) -> float | None:
        """``total`` over the attempts that recorded it; None ("—") when nothing was recorded
        (published reports without trajectories, a log without costs, the oracle and no-op)."""
        return total / known if known and total else None


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
    tallies: dict[int, Tallies[int]]  # run id -> per-task tallies over ``index``
    usage: dict[int, Usage]  # run id -> usage
    # run id -> per task over ``index``: resolved attempts carrying an integrity flag
    # (runs.integrity); counted as failures with ``count_out_flagged``.
    flagged: dict[int, np.ndarray] = field(default_factory=dict)
    count_out_flagged: bool = False
    # None until __post_init__ builds it from the universe.
    index: TaskIndex[int] = field(default=None, repr=False)  # type: ignore[arg-type]
    _scores: dict[tuple[int, ...], Score] = field(default_factory=dict, repr=False)
    _excluded_mask: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.index is None:
            self.index = TaskIndex(self.universe)

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
            if self._excluded_mask is None:
                self._excluded_mask = self.index.mask(self.excluded)
            cached = score(
                self.tally(entry),
                whole_suite=entry.whole_suite,
                k=entry.k,
                excluded=self._excluded_mask,
                flagged=self.entry_flagged(entry),
                count_out_flagged=self.count_out_flagged,
            )
            self._scores[key] = cached
        return cached

    def tally(self, entry: Entry) -> Tallies[int]:
        """The entry's per-task tallies (its runs' pooled)."""
        empty = Tallies.empty(self.index)
        tables = [self.tallies.get(r.id, empty) for r in entry.runs]
        if len(tables) == 1:
            return tables[0]
        return Tallies(self.index, sum((t.counts for t in tables), empty.counts))

    def entry_flagged(self, entry: Entry) -> np.ndarray | None:
        """The entry's flagged successes per task (its runs' summed); None: none."""
        tables = [self.flagged[r.id] for r in entry.runs if r.id in self.flagged]
        return sum(tables[1:], tables[0]) if tables else None

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
    include_undated: bool = False,
) -> QuerySet[Attempt]:
    """Attempts of a suite in the selection, every status (pending ones count as pending).

    Dates filter on when an attempt finished; attempts still pending have no such date and
    stay in unless an end date is given. Runs of unknown date (imported without one) are left
    out of a date filter, or with ``include_undated`` kept whatever its window: their only
    time is the import's.
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
        undated = list(
            Run.objects.filter(suite=suite, date_source=RunDateSource.UNKNOWN).values_list(
                "id", flat=True
            )
        )
        if undated:
            # A run of unknown date has no date to place in the window: out, or (asked for)
            # in whatever the window.
            undated_q = Q(run_id__in=undated)
            window = (window | undated_q) if include_undated else (window & ~undated_q)
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
        "resolved": scored & Q(failure_reason__isnull=True),
        "failed": scored & Q(failure_reason__isnull=False),
        "missing": Q(status=MISSING),
        "infra": Q(status=FINISHED, is_infra=True) | Q(status__in=list(UNRUN_STATUSES)),
        "pending": ~Q(status__in=list(FINAL_STATUSES)),
        "not_evaluated": Q(status=NOT_EVALUATED),
    }
    if outcome not in filters:
        raise SelectionError(f"outcome: expected one of {', '.join(OUTCOMES)}, got {outcome!r}")
    return filters[outcome]


@functools.lru_cache(maxsize=4096)
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
    include_undated: bool = False,
    count_out_flagged: bool = False,
) -> SuiteResults:
    """The selection's tasks, runs and per-task tallies: a fixed number of queries.

    ``exclude_tasks``: task pks left out of every figure; by default ``excluded_tasks(suite)``.
    ``usage``: also sum cost, tokens, calls and wall time per run (the leaderboard).
    ``include_undated``: a date filter keeps runs of unknown date too.
    ``count_out_flagged``: successes carrying an integrity flag count as failures.
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
        include_undated=include_undated,
    )
    index = TaskIndex(tasks)
    per_run = None
    if date_from is None and date_to is None and run_tallies.enabled(attempts.db):
        per_run = _per_run_tallies(suite, run_ids, index, attempts.db, usage and not labels)
    if per_run is not None:
        runs, tallies, run_usage = per_run
        if usage and labels:
            run_usage = _usage(attempts)
    else:
        runs, tallies = _read_tallies(attempts, index)
        run_usage = _usage(attempts) if usage else {}
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
        usage=run_usage,
        flagged=_flagged(attempts, index)
        if date_from or date_to
        else _flagged_of_runs(suite, runs, index, attempts.db),
        count_out_flagged=count_out_flagged,
        index=index,
    )


def _flagged(attempts: QuerySet[Attempt], index: TaskIndex[int]) -> dict[int, np.ndarray]:
    """Per run, per task: the selection's resolved attempts carrying an integrity flag. Flags
    are few: one query through the flags' attempt index, a handful of rows."""
    rows = (
        attempts.filter(
            status=FINISHED, is_infra=False, failure_reason__isnull=True, flags__isnull=False
        )
        .order_by()
        .values_list("run_id", "task_id")
        .annotate(n=Count("id", distinct=True))
    )
    return _flag_tables(rows, index)


def _flagged_of_runs(
    suite: Suite, runs: Collection[int], index: TaskIndex[int], using: str
) -> dict[int, np.ndarray]:
    """``_flagged`` without a date window, read from the flags' side: only the flagged
    attempts are read (by key), never the suite's others, so a page whose per-run aggregates
    are kept (``runs.results.run_tallies``) still reads no attempt it has not to. Tasks out
    of the selection (labels) fall outside ``index`` and are dropped there."""
    if not runs:
        return {}
    rows = (
        AttemptFlag.objects.using(using)
        .filter(
            attempt__suite=suite,
            attempt__run_id__in=list(runs),
            attempt__status=FINISHED,
            attempt__is_infra=False,
            attempt__failure_reason__isnull=True,
        )
        .order_by()
        .values_list("attempt__run_id", "attempt__task_id")
        .annotate(n=Count("attempt_id", distinct=True))
    )
    return _flag_tables(rows, index)


def _flag_tables(rows, index: TaskIndex[int]) -> dict[int, np.ndarray]:
    out: dict[int, np.ndarray] = {}
    for run_id, task_id, n in rows:
        at = index.position.get(task_id)
        if at is not None:
            out.setdefault(run_id, np.zeros(len(index), dtype=np.int64))[at] += n
    return out


# A run's usage sums in the database (``runs.results.tally_store``); None: no finished attempt.
_USAGE_CODEC = tally_store.NumbersCodec(Usage)

_RUN_FIELDS = (
    "id",
    "public_id",
    "model_config_id",
    "samples",
    "source",
    "status",
    "created_at",
    "finished_at",
    "date_source",
)


def _read_tallies(
    attempts: QuerySet[Attempt], index: TaskIndex[int]
) -> tuple[dict[int, RunFacts], dict[int, Tallies]]:
    """The selection's runs and their tallies, read from every attempt of the selection."""
    grouped = tally_sql.grouped_rows(attempts)
    runs = {
        r[0]: RunFacts(*r)
        for r in Run.objects.filter(id__in={row[0] for row in grouped}).values_list(*_RUN_FIELDS)
    }
    # A run holds at most ``samples`` attempts a task (one per sample index): past the codes'
    # range, count again one filter per count.
    if any(r.samples >= tally_sql.BASE for r in runs.values()):
        return runs, tally_sql.grouped_tallies_counted(attempts, index)
    return runs, tally_sql.tables(
        index, ((run, tally_sql.decode(int(code)), ids) for run, code, ids in grouped)
    )


def _per_run_tallies(
    suite: Suite,
    run_ids: Collection[int] | None,
    index: TaskIndex[int],
    using: str,
    usage: bool,
) -> tuple[dict[int, RunFacts], dict[int, Tallies], dict[int, Usage]] | None:
    """The same as ``_read_tallies`` (and ``_usage`` when ``usage``) from the aggregates kept
    per run (``runs.results.run_tallies``): only runs whose attempts changed are read again.
    None when a run has too many samples a task for the class codes (read directly)."""
    candidates = Run.objects.using(using).filter(suite=suite)
    if run_ids is not None:
        candidates = candidates.filter(id__in=list(run_ids))
    # The stamps before the attempts: an entry is never older than the stamp it is kept under.
    facts = {
        row[0]: (RunFacts(*row[:-1]), row[-1])
        for row in candidates.annotate(stamp=run_tallies.stamp_sql()).values_list(
            *_RUN_FIELDS, "stamp"
        )
    }
    if any(f.samples >= tally_sql.BASE for f, _ in facts.values()):
        return None
    stamps = {run: stamp for run, (_, stamp) in facts.items()}

    def of_runs(ids: list[int]) -> QuerySet[Attempt]:
        attempts = Attempt.objects.using(using).for_suite(suite)
        # Every run of the suite (a cold read): the suite's attempts as they are, one scan in
        # the covering index's order rather than one range per run.
        return (
            attempts
            if run_ids is None and len(ids) == len(facts)
            else attempts.filter(run_id__in=ids)
        )

    def read_rows(ids: list[int]) -> dict[int, run_tallies.RunRows]:
        grouped = tally_sql.grouped_rows(of_runs(ids))
        return run_tallies.run_rows(
            (run, tally_sql.decode(int(code)), ts) for run, code, ts in grouped
        )

    def read_usage(ids: list[int]) -> dict[int, Usage | None]:
        return dict(_usage(of_runs(ids)))

    empty = run_tallies.RunRows(
        np.zeros(0, dtype=np.int64), np.zeros((0, len(COUNTS)), dtype=np.int64)
    )
    kinds: list[run_tallies.Kind] = [
        run_tallies.Kind("tallies", read_rows, empty, run_tallies.ROWS)
    ]
    if usage:
        kinds.append(run_tallies.Kind("usage", read_usage, None, _USAGE_CODEC))
    rows, *kept_usage = run_tallies.cached(kinds, using=using, suite_id=suite.id, stamps=stamps)
    position = np.full(max(index.keys, default=0) + 1, -1, dtype=np.int64)
    position[list(index.keys)] = np.arange(len(index))
    tallies: dict[int, Tallies] = {}
    for run, kept in rows.items():
        counts = run_tallies.scatter(kept, index.keys, position)
        if counts is not None:  # a run with no attempt in the selection is not a row
            tallies[run] = Tallies(index, counts)
    runs = {run: facts[run][0] for run in tallies}
    run_usage: dict[int, Usage] = {}
    for of_run in kept_usage:
        # Copies: a row's total is summed into a Usage of its own.
        run_usage = {run: dataclasses.replace(u) for run, u in of_run.items() if u is not None}
    return runs, tallies, run_usage


def _usage(attempts: QuerySet[Attempt]) -> dict[int, Usage]:
    """Cost, tokens, model API calls and wall time of each run's finished attempts, with how
    many recorded each (NULL: unknown).

    Every column read is in ``attempt_run_results_idx`` (by run first), so the database sums
    from the index without a sort.
    """
    # The ignore: django-stubs takes the annotation "tokens" in values_list() rows for a
    # redefinition of the model's property of that name; the rows are tuples, no Attempt.
    rows = (
        attempts.filter(status=FINISHED)  # type: ignore[no-redef]
        .order_by()
        .values_list("run_id")
        .annotate(
            # Only values in their column's range (runs.usage_fields): a broken row neither
            # overflows a sum nor moves a mean. Plain output fields: a total may pass what
            # one attempt can hold.
            cost=Sum("cost_usd", filter=VALID["cost_usd"], output_field=FloatField()),
            costed=Count("cost_usd", filter=VALID["cost_usd"]),
            tokens=Sum(
                F("tokens_in") + F("tokens_out"),
                filter=VALID["tokens"],
                output_field=BigIntegerField(),
            ),
            tokened=Count("tokens_in", filter=VALID["tokens"]),
            calls=Sum("steps", filter=VALID["steps"], output_field=BigIntegerField()),
            called=Count("steps", filter=VALID["steps"]),
            wall=Sum("duration_sec", filter=VALID["duration_sec"], output_field=FloatField()),
            walled=Count("duration_sec", filter=VALID["duration_sec"]),
            # Not in the covering index: read from the rows, once per run and data stamp
            # (the run tallies keep the sums).
            **{
                name: Sum(f"{name}_usd", filter=VALID["cost_classes"], output_field=FloatField())
                for name in CLASS_COLUMNS
            },
            broken_down=Count("cost_input_usd", filter=VALID["cost_classes"]),
            cost_unknown=Count("id", filter=Q(cost_basis=CostBasis.UNKNOWN)),
            cost_reported=Count("id", filter=Q(cost_basis=CostBasis.REPORTED)),
        )
    )
    out = {}
    for run_id, cost, costed, tokens, tokened, calls, called, wall, walled, *more in rows:
        *classes, broken_down, unknown, reported = more
        out[run_id] = Usage(
            float(cost or 0),
            costed,
            int(tokens or 0),
            tokened,
            int(calls or 0),
            called,
            float(wall or 0),
            walled,
            **{name: float(value or 0) for name, value in zip(CLASS_COLUMNS, classes, strict=True)},
            broken_down=broken_down,
            cost_unknown=unknown,
            cost_reported=reported,
        )
    return out


def run_usage(run_id: int) -> Usage | None:
    """One run's usage, summed as the leaderboard sums its row (the run page's cost)."""
    return _usage(Attempt.objects.filter(run_id=run_id)).get(run_id)
