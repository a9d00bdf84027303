"""Comparison of two or more model configurations on one suite: pure reads over attempts.

The task x model matrix, the outcome buckets of every pair and an exact McNemar test per
pair. One query for the suite's tasks and one for the compared models' finished attempts.
"""

from __future__ import annotations

import itertools
import uuid
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property

from runs.leaderboard import finished_attempts, suite_tasks
from runs.models import ModelConfig
from runs.stats import majority_resolved, mcnemar_exact
from tasks_app.models import Suite

RESOLVED = "resolved"
FAILED = "failed"
INFRA = "infra"
NONE = "none"


@dataclass(frozen=True, slots=True)
class AttemptRef:
    public_id: uuid.UUID
    sample_index: int
    resolved: bool
    is_infra: bool
    reason: str  # FailureReason code, "" when resolved


@dataclass
class Cell:
    """One model's attempts on one task and the outcome they add up to."""

    attempts: list[AttemptRef] = field(default_factory=list)

    # Cached: a cell is read many times (matrix, buckets, summaries) once it is filled.
    @cached_property
    def scored(self) -> int:
        return sum(1 for a in self.attempts if not a.is_infra)

    @cached_property
    def resolved_count(self) -> int:
        return sum(1 for a in self.attempts if a.resolved)

    @cached_property
    def outcome(self) -> str:
        if not self.attempts:
            return NONE
        if not self.scored:
            return INFRA
        return RESOLVED if majority_resolved(self.scored, self.resolved_count) else FAILED

    @cached_property
    def reason(self) -> str:
        """The most frequent failure reason among the samples (precedence breaks no ties)."""
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
        outcomes = {c.outcome for c in self.cells if c.outcome in (RESOLVED, FAILED)}
        return len(outcomes) > 1


@dataclass
class ModelSummary:
    model: ModelConfig
    attempts: int
    scored: int
    resolved: int
    infra: int

    @property
    def rate(self) -> float | None:
        return self.resolved / self.scored if self.scored else None


@dataclass
class PairResult:
    """Model a (the reference) against model b on tasks where both have an outcome."""

    a: ModelConfig
    b: ModelConfig
    fixed_by_b: list[TaskRow]
    regressed: list[TaskRow]
    both: list[TaskRow]
    neither: list[TaskRow]
    p_value: float

    @property
    def paired(self) -> int:
        return len(self.fixed_by_b) + len(self.regressed) + len(self.both) + len(self.neither)

    @property
    def rate_a(self) -> float | None:
        return (len(self.both) + len(self.regressed)) / self.paired if self.paired else None

    @property
    def rate_b(self) -> float | None:
        return (len(self.both) + len(self.fixed_by_b)) / self.paired if self.paired else None

    @property
    def delta(self) -> float | None:
        """Success-rate change from a to b, in fractions, over the paired tasks."""
        if not self.paired:
            return None
        return (len(self.fixed_by_b) - len(self.regressed)) / self.paired

    @property
    def significant(self) -> bool:
        return self.p_value < 0.05


@dataclass
class Comparison:
    suite: Suite
    models: list[ModelConfig]
    rows: list[TaskRow]
    summaries: list[ModelSummary]
    pairs: list[PairResult]


def compare_models(
    *,
    suite: Suite,
    models: list[ModelConfig],
    labels: list[str] | None = None,
) -> Comparison:
    """Compare ``models`` (the first is the reference for buckets) on ``suite``.

    A cell's outcome is the majority of its scored samples; a cell with only infrastructure
    failures has no outcome and leaves that task out of the pair's buckets and test.
    """
    tasks = list(
        suite_tasks(suite, labels).order_by("task_id").values_list("id", "task_id", "labels")
    )
    column = {m.id: i for i, m in enumerate(models)}
    rows = {
        pk: TaskRow(pk, task_id, labels_ or [], [Cell() for _ in models])
        for pk, task_id, labels_ in tasks
    }
    attempts = (
        finished_attempts(suite=suite, labels=labels, model_ids=list(column))
        .order_by("sample_index")
        .values_list(
            "task_id",
            "model_config_id",
            "public_id",
            "sample_index",
            "failure_reason_id",
            "is_infra",
            "is_missing",
        )
    )
    for task_pk, model_id, public_id, sample, reason, is_infra, is_missing in attempts:
        row = rows.get(task_pk)
        if row is None:
            continue
        resolved = reason is None and not is_infra and not is_missing
        row.cells[column[model_id]].attempts.append(
            AttemptRef(public_id, sample, resolved, is_infra, reason or "")
        )
    ordered = list(rows.values())
    summaries = [_summary(m, [r.cells[i] for r in ordered]) for i, m in enumerate(models)]
    pairs = [
        _pair(models[i], models[j], ordered, i, j)
        for i, j in itertools.combinations(range(len(models)), 2)
    ]
    return Comparison(suite=suite, models=models, rows=ordered, summaries=summaries, pairs=pairs)


def _summary(model: ModelConfig, cells: list[Cell]) -> ModelSummary:
    attempts = scored = resolved = infra = 0
    for cell in cells:
        for a in cell.attempts:
            attempts += 1
            infra += a.is_infra
            scored += not a.is_infra
            resolved += a.resolved
    return ModelSummary(model, attempts, scored, resolved, infra)


def _pair(a: ModelConfig, b: ModelConfig, rows: list[TaskRow], i: int, j: int) -> PairResult:
    buckets: dict[tuple[bool, bool], list[TaskRow]] = {
        (True, True): [],
        (True, False): [],
        (False, True): [],
        (False, False): [],
    }
    for row in rows:
        oa, ob = row.cells[i].outcome, row.cells[j].outcome
        if oa in (RESOLVED, FAILED) and ob in (RESOLVED, FAILED):
            buckets[(oa == RESOLVED, ob == RESOLVED)].append(row)
    regressed, fixed = buckets[(True, False)], buckets[(False, True)]
    return PairResult(
        a=a,
        b=b,
        fixed_by_b=fixed,
        regressed=regressed,
        both=buckets[(True, True)],
        neither=buckets[(False, False)],
        p_value=mcnemar_exact(len(regressed), len(fixed)),
    )


def comparison_records(comparison: Comparison) -> list[dict]:
    """Flat per-task records for CSV and JSON export: what the page's matrix shows."""
    records = []
    for row in comparison.rows:
        record: dict = {"task_id": row.task_id}
        for model, cell in zip(comparison.models, row.cells, strict=True):
            record[f"{model.name}:outcome"] = cell.outcome
            record[f"{model.name}:reason"] = cell.reason
            record[f"{model.name}:resolved"] = cell.resolved_count
            record[f"{model.name}:scored"] = cell.scored
            record[f"{model.name}:attempts"] = " ".join(str(a.public_id) for a in cell.attempts)
        records.append(record)
    return records
