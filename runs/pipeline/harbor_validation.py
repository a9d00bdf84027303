"""Gold validation of a Harbor suite or a ``task.yaml`` suite (``ab validate-suite SUITE
--variant oracle``): every source but SWE-bench (``swebench_validation``), whatever the task's
environment (a Dockerfile built here, an image pulled, the runner's).

Each task with a solution (a Harbor task's ``solution/solve.sh``, a task.yaml's
``reference_solution``) runs twice through the normal pipeline: the oracle (the solution,
then the verifier or the task's tests) must be a success and the no-op agent must leave the
tests failing (``TESTS_FAILED``). Anything else is recorded on the task
(``GoldValidation``, per backend) with both outcomes and why: invalid when the verifier judged
wrongly, not buildable when the environment could not be had (its build failed, timed out or
went over the budget) or the verifier gave no reward. Leaderboards leave invalid tasks out of
their rates, as for SWE-bench. A task without a solution cannot be validated: it is listed as
such and nothing is recorded.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from django.db import transaction
from django.utils import timezone

from runs.models import AgentVariant, Attempt, AttemptStatus, Run, RunSource
from runs.pipeline import artifacts
from runs.pipeline.adhoc import model_config_for_variant, run_close, run_create
from runs.pipeline.execute import attempt_execute
from runs.pipeline.validation_summary import Verdict, summary_table
from tasks_app.models import GoldValidation, GoldValidationStatus, Suite, Task, TaskSource

NO_SOLUTION = "no solution"
COLUMNS = ("valid", "invalid", "not_buildable", NO_SOLUTION)
SOURCES = (TaskSource.HARBOR, TaskSource.TASK_YAML)


class NotHarborSuite(ValueError):
    pass


@dataclass
class HarborRow:
    task_id: str
    status: str  # valid | invalid | not_buildable | no solution
    oracle: str = ""  # the oracle attempt's outcome: success or its reason
    nop: str = ""
    reason: str = ""
    seconds: float = 0.0


@dataclass
class HarborReport:
    suite: str
    backend: str
    rows: list[HarborRow] = field(default_factory=list)
    run_dirs: list[str] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for r in self.rows if r.status == status)

    def summary(self) -> str:
        return (
            f"{self.count('valid')} valid, {self.count('invalid')} invalid, "
            f"{self.count('not_buildable')} not buildable, {self.count(NO_SOLUTION)} without a "
            f"solution of {len(self.rows)} task(s) on {self.backend}"
        )

    def summary_table(self) -> list[str]:
        """The table every gold validation ends with (``validation_summary``)."""
        return summary_table(
            [Verdict(r.task_id, r.status, r.reason) for r in self.rows],
            backend=self.backend,
            unit="task",
            columns=COLUMNS,
        )


def is_harbor_suite(name: str) -> bool:
    """Whether the suite is one this module validates: Harbor or task.yaml tasks (a SWE-bench
    suite is ``swebench_validation``'s)."""
    return Task.objects.filter(suite__name=name, source__in=SOURCES).exists()


def has_solution(task: Task) -> bool:
    if task.source == TaskSource.HARBOR:
        return bool(task.spec.get("has_solution"))
    return bool(task.gold_patch)


def harbor_validate(
    *,
    suite_name: str,
    backend: str,
    task_ids: list[str] | None = None,
    out: Path | None = None,
    progress: Callable[[int, int, HarborRow], None] | None = None,
) -> HarborReport:
    """Run the oracle and the no-op agent on every Harbor or task.yaml task of the suite (or
    ``task_ids``) and record each task's verdict for ``backend``."""
    suite = Suite.objects.filter(name=suite_name).first()
    tasks = list(
        Task.objects.filter(suite__name=suite_name, source__in=SOURCES).order_by("task_id")
    )
    if suite is None or not tasks:
        raise NotHarborSuite(
            f"suite {suite_name!r} has no Harbor or task.yaml task (ab import-tasks DIR)"
        )
    if task_ids:
        tasks = [t for t in tasks if t.task_id in set(task_ids)]
    report = HarborReport(suite=suite_name, backend=backend)
    runnable = [t for t in tasks if has_solution(t)]
    report.rows += [
        HarborRow(t.task_id, NO_SOLUTION, reason=NO_SOLUTION) for t in tasks if t not in runnable
    ]
    with artifacts.root_override(out):
        runs = {v: _run(suite, v, runnable) for v in (AgentVariant.ORACLE, AgentVariant.NOP)}
        try:
            for index, task in enumerate(runnable, start=1):
                started = time.monotonic()
                oracle = _attempt(runs[AgentVariant.ORACLE], task, backend)
                nop = _attempt(runs[AgentVariant.NOP], task, backend)
                row = _judge(task, oracle, nop, backend)
                row.seconds = time.monotonic() - started
                report.rows.append(row)
                if progress:
                    progress(index, len(runnable), row)
        finally:
            for run in runs.values():
                run_close(run=run)
                report.run_dirs.append(str(artifacts.run_dir(run)))
    report.rows.sort(key=lambda r: r.task_id)
    return report


def _run(suite: Suite, variant: str, tasks: list[Task]) -> Run:
    return run_create(
        suite=suite,
        model_config=model_config_for_variant(variant),
        source=RunSource.VALIDATION,
        selection={"tasks": [t.task_id for t in tasks], "harbor_gold": variant},
    )


def _attempt(run: Run, task: Task, backend: str) -> Attempt:
    now = timezone.now()
    attempt = Attempt.objects.create(
        run=run,
        task=task,
        suite=run.suite,
        model_config=run.model_config,
        task_revision=task.revision,
        status=AttemptStatus.RUNNING,
        started_at=now,
        heartbeat_at=now,
    )
    return attempt_execute(attempt, backend=backend)


def _outcome(attempt: Attempt) -> str:
    return "success" if attempt.failure_reason_id is None else str(attempt.failure_reason_id)


def _judge(task: Task, oracle: Attempt, nop: Attempt, backend: str) -> HarborRow:
    row = HarborRow(task.task_id, GoldValidationStatus.VALID, _outcome(oracle), _outcome(nop))
    first_line = (oracle.error_text or nop.error_text or "").splitlines()[:1]
    if oracle.is_infra or nop.is_infra:
        infra = oracle if oracle.is_infra else nop
        row.status = GoldValidationStatus.NOT_BUILDABLE
        row.reason = (
            f"{'oracle' if infra is oracle else 'nop'} attempt: {infra.failure_reason_id}: "
            + (infra.error_text.splitlines() or [""])[0]
        )
    elif oracle.failure_reason_id is not None:
        row.status = GoldValidationStatus.INVALID
        row.reason = f"the oracle (its solution) does not pass: {''.join(first_line)}"
    elif nop.failure_reason_id != "TESTS_FAILED":
        row.status = GoldValidationStatus.INVALID
        row.reason = "the tests pass with no change at all (the no-op agent succeeds)"
    with transaction.atomic():
        GoldValidation.objects.update_or_create(
            task=task,
            backend=backend,
            defaults={
                "status": row.status,
                "gold_grade": oracle.grade,
                "empty_grade": nop.grade,
                "failing_tests": [],
                "reason": row.reason[:2000],
            },
        )
    return row
