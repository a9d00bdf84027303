"""Comparison of two or more rows (configurations or single runs) on one suite.

The figures (summaries, pair rates, buckets, the paired test) are ``runs.results.scoring``
over the tallies of ``runs.results.selection``, exactly as on the leaderboard; the attempts are
read once more only to link each sample from the task x row matrix.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db import connections

from runs.models import ModelConfig
from runs.results.scoring import (
    FINISHED,
    PairedTest,
    Score,
    TaskTally,
    pair_figures,
    paired_test,
    score_record,
)
from runs.results.scoring import (
    MISSING as MISSING_STATUS,
)
from runs.results.selection import Entry, SuiteResults, read_results, selected_attempts
from tasks_app.models import Suite

RESOLVED = "resolved"
PARTIAL = "partial"
FAILED = "failed"
INFRA = "infra"
PENDING = "pending"
MISSING = "missing"  # never attempted: imported results without an entry for the task
NONE = "none"


@dataclass(frozen=True, slots=True)
class AttemptRef:
    public_id: str  # the attempt's public id (a UUID) as text
    sample_index: int
    run: str  # the run's short id
    outcome: str  # resolved, failed, infra, pending or missing
    reason: str  # FailureReason code, "" when resolved or pending

    @property
    def resolved(self) -> bool:
        return self.outcome == RESOLVED


@dataclass
class Cell:
    """One row's attempts on one task; its figures come from the task's tally."""

    tally: TaskTally = field(default_factory=TaskTally)
    attempts: list[AttemptRef] = field(default_factory=list)

    @property
    def scored(self) -> int:
        return self.tally.scored

    @property
    def resolved_count(self) -> int:
        return self.tally.resolved

    @property
    def pending(self) -> int:
        return self.tally.pending

    @property
    def fraction(self) -> float | None:
        """The task's success fraction (resolved / scored samples), as scored."""
        return self.tally.resolved / self.tally.scored if self.tally.scored else None

    @property
    def outcome(self) -> str:
        if not self.tally.attempts:
            return MISSING if self.tally.missing else NONE
        fraction = self.fraction
        if fraction is None:
            return PENDING if self.tally.pending else INFRA
        return RESOLVED if fraction == 1 else FAILED if fraction == 0 else PARTIAL

    @property
    def reason(self) -> str:
        """The most frequent failure reason among the samples (precedence breaks no ties)."""
        if len(self.attempts) == 1:  # most cells: one sample, no counting
            return self.attempts[0].reason
        reasons = Counter(a.reason for a in self.attempts if a.reason)
        return reasons.most_common(1)[0][0] if reasons else ""

    @property
    def first(self) -> AttemptRef | None:
        return self.attempts[0] if self.attempts else None


@dataclass
class TaskRow:
    task_pk: int
    task_id: str
    labels: list[str]
    cells: list[Cell]
    url: str = ""  # the task page, filled in by the view

    @property
    def differs(self) -> bool:
        fractions = {c.fraction for c in self.cells if c.fraction is not None}
        return len(fractions) > 1


@dataclass
class Summary:
    """One compared row's score: the same figures as its leaderboard row."""

    entry: Entry
    score: Score

    @property
    def model(self) -> ModelConfig:
        return self.entry.model

    @property
    def rate(self) -> float | None:
        return self.score.rate


@dataclass
class PairResult:
    """Row a (the reference) against row b on the tasks both rate."""

    a: Entry
    b: Entry
    score_a: Score
    score_b: Score
    test: PairedTest
    fixed_by_b: list[TaskRow]
    regressed: list[TaskRow]
    both: list[TaskRow]
    neither: list[TaskRow]

    @property
    def paired(self) -> int:
        """The tasks both rows attempted: the test's n."""
        return self.test.tasks

    @property
    def coverage_differs(self) -> bool:
        return self.test.coverage_differs

    @property
    def rate_a(self) -> float | None:
        return self.score_a.rate

    @property
    def rate_b(self) -> float | None:
        return self.score_b.rate

    @property
    def delta(self) -> float | None:
        """b's rate minus a's, as fractions (each over its own denominator)."""
        if self.rate_a is None or self.rate_b is None:
            return None
        return self.rate_b - self.rate_a

    @property
    def shared_delta(self) -> float | None:
        """b's rate minus a's on the tasks both attempted (the paired test's mean difference):
        what leads the headline of a pair whose coverage differs (issue 29)."""
        return self.test.mean_difference

    @property
    def p_value(self) -> float:
        return self.test.p_value

    @property
    def significant(self) -> bool:
        return self.test.significant

    @property
    def complete(self) -> bool:
        return self.score_a.complete and self.score_b.complete

    @property
    def same_agent(self) -> bool:
        """Two conditions of one agent: the configurations differ only in the files they add
        to the workspace (``runs.conditions``); the delta is then the condition's effect."""
        a, b = self.a.model, self.b.model
        return a.id != b.id and a.agent_key() == b.agent_key()


@dataclass
class Comparison:
    suite: Suite
    entries: list[Entry]
    rows: list[TaskRow]
    summaries: list[Summary]
    pairs: list[PairResult]

    @property
    def models(self) -> list[ModelConfig]:
        return [e.model for e in self.entries]


def compare_models(
    *,
    suite: Suite,
    models: list[ModelConfig] | None = None,
    keys: list[str] | None = None,
    labels: list[str] | None = None,
    exclude_tasks: Iterable[int] | None = None,
) -> Comparison:
    """Compare rows on ``suite``; the first is the reference for buckets.

    ``keys`` name rows as the leaderboard does (a configuration's slug for all its runs,
    ``slug@<run id>`` for one run); ``models`` is shorthand for their slugs. Raises
    ``runs.results.selection.SelectionError`` for a key with no results here.
    """
    keys = list(keys or []) + [m.slug for m in models or []]
    slugs = {k.partition("@")[0] for k in keys}
    model_ids = list(ModelConfig.objects.filter(slug__in=slugs).values_list("id", flat=True))
    results = read_results(
        suite=suite, labels=labels, model_ids=model_ids, exclude_tasks=exclude_tasks
    )
    entries = [results.entry(k) for k in keys]
    scores = [results.score(e) for e in entries]
    rows = _task_rows(results, entries)
    _attach_attempts(results, entries, rows, labels)
    ordered = [rows[pk] for pk in sorted(rows, key=lambda pk: rows[pk].task_id)]
    pairs = [
        _pair(entries[i], entries[j], scores[i], scores[j], rows)
        for i, j in itertools.combinations(range(len(entries)), 2)
    ]
    summaries = [Summary(e, s) for e, s in zip(entries, scores, strict=True)]
    return Comparison(suite, entries, ordered, summaries, pairs)


def _task_rows(results: SuiteResults, entries: list[Entry]) -> dict[int, TaskRow]:
    empty = TaskTally()
    # Each entry's tallies as one list per task (one conversion from the arrays, not one a cell).
    columns = [results.tally(e).counts.T.tolist() for e in entries]
    position = results.index.position
    rows = {}
    for pk in results.universe:
        if pk in results.excluded:
            continue
        facts = results.tasks[pk]
        at = position[pk]
        cells = [Cell(TaskTally(*c[at]) if any(c[at]) else empty) for c in columns]
        rows[pk] = TaskRow(pk, facts.task_id, list(facts.labels), cells)
    return rows


def _attach_attempts(
    results: SuiteResults, entries: list[Entry], rows: dict[int, TaskRow], labels
) -> None:
    columns: dict[int, list[int]] = {}
    for i, entry in enumerate(entries):
        for run in entry.runs:
            columns.setdefault(run.id, []).append(i)
    short = {run.id: run.short_id for run in results.runs.values()}
    rank = {
        run.id: i
        for i, run in enumerate(sorted(results.runs.values(), key=lambda r: (r.created_at, r.id)))
    }
    query = (
        selected_attempts(suite=results.suite, labels=labels, run_ids=list(columns))
        .order_by()
        .values_list(
            "task_id",
            "run_id",
            "public_id",
            "sample_index",
            "status",
            "failure_reason_id",
            "is_infra",
        )
    )
    # Read with the cursor, not the queryset: a 500-task comparison links thousands of
    # attempts, and building a UUID object per id (to print it again) dominated this read.
    sql, params = query.query.sql_with_params()
    with connections[query.db].cursor() as cursor:
        cursor.execute(sql, params)
        attempts = cursor.fetchall()
    attempts.sort(key=lambda a: (rank.get(a[1], 0), a[3]))
    for task_pk, run_id, public_id, sample, status, reason, is_infra in attempts:
        row = rows.get(task_pk)
        if row is None:
            continue
        if status == MISSING_STATUS:
            outcome = MISSING
        elif status != FINISHED and reason is None:
            outcome = PENDING
        elif status != FINISHED or is_infra:
            outcome = INFRA
        elif reason is None:
            outcome = RESOLVED
        else:
            outcome = FAILED
        ref = AttemptRef(_uuid_text(public_id), sample, short[run_id], outcome, reason or "")
        for column in columns[run_id]:
            row.cells[column].attempts.append(ref)


def _uuid_text(value) -> str:
    """An attempt's public id as text: SQLite keeps 32 hex digits, PostgreSQL a UUID."""
    if isinstance(value, str) and len(value) == 32:
        return f"{value[:8]}-{value[8:12]}-{value[12:16]}-{value[16:20]}-{value[20:]}"
    return str(value)


def _pair(a: Entry, b: Entry, sa: Score, sb: Score, rows: dict[int, TaskRow]) -> PairResult:
    test = paired_test(sa, sb)

    def task_rows(pks: tuple[int, ...]) -> list[TaskRow]:
        return sorted((rows[pk] for pk in pks if pk in rows), key=lambda r: r.task_id)

    return PairResult(
        a=a,
        b=b,
        score_a=sa,
        score_b=sb,
        test=test,
        fixed_by_b=task_rows(test.better),
        regressed=task_rows(test.worse),
        both=task_rows(test.same),
        neither=task_rows(test.neither),
    )


def comparison_records(comparison: Comparison) -> list[dict]:
    """Flat per-task records for CSV and JSON export: what the page's matrix shows."""
    records = []
    for row in comparison.rows:
        record: dict = {"task_id": row.task_id}
        for entry, cell in zip(comparison.entries, row.cells, strict=True):
            name = entry.label
            record[f"{name}:outcome"] = cell.outcome
            record[f"{name}:reason"] = cell.reason
            record[f"{name}:resolved"] = cell.resolved_count
            record[f"{name}:scored"] = cell.scored
            record[f"{name}:pending"] = cell.pending
            record[f"{name}:attempts"] = " ".join(str(a.public_id) for a in cell.attempts)
        records.append(record)
    return records


def entry_record(entry: Entry) -> dict:
    """What a compared row stands for, as plain values."""
    return {
        "key": entry.key,
        "kind": entry.kind,
        "label": entry.label,
        "model": {
            "public_id": entry.model.public_id,
            "name": entry.model.name,
            "slug": entry.model.slug,
        },
        "condition": entry.model.condition,
        "run": entry.run.public_id if entry.run else None,
        "runs": [r.public_id for r in entry.runs],
    }


def summary_record(summary: Summary) -> dict:
    """A compared row's score (the page's cards, the API's and the JSON export's summaries)."""
    return {**entry_record(summary.entry), **score_record(summary.score)}


def pair_record(pair: PairResult) -> dict:
    """A pair's rates, buckets and paired test, as plain values."""
    return {
        "a": entry_record(pair.a),
        "b": entry_record(pair.b),
        "same_agent": pair.same_agent,
        **pair_figures(pair.test),
        "fixed_by_b": [r.task_id for r in pair.fixed_by_b],
        "regressed": [r.task_id for r in pair.regressed],
        "both": [r.task_id for r in pair.both],
        "neither": [r.task_id for r in pair.neither],
        "rate_a": pair.rate_a,
        "rate_b": pair.rate_b,
        "delta": pair.delta,
        "attempted_rate_a": pair.score_a.attempted_rate,
        "attempted_rate_b": pair.score_b.attempted_rate,
        "mean_paired_difference": pair.test.mean_difference,
        "significant": pair.significant,
        "complete": pair.complete,
    }
