"""Baseline validation of a whole suite: every task's tests must fail before any fix.

Tasks labelled ``flaky`` are skipped unless asked for; each other task gets a baseline attempt
(clone, setup, tests without network, a re-run for flakiness) in one run recorded in the
database, and the run folder gets a ``run.json`` summary next to the attempts' own.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.db import transaction
from django.utils import timezone

from runs.lifecycle import attempts_cancel_running
from runs.models import AgentVariant, Attempt, AttemptStatus, RunSource, RunStatus
from runs.pipeline import artifacts
from runs.pipeline.adhoc import model_config_for_variant, run_close, run_create
from runs.pipeline.execute import attempt_execute
from runs.pipeline.log_errors import first_error
from runs.pipeline.record import RECORD_SCHEMA_VERSION, provenance
from tasks_app.models import Suite, TaskSource
from tasks_app.services import local_path_rules, task_fields_from_spec, task_upsert
from tasks_app.spec import load_task_dir

SKIP_LABEL = "flaky"


class SuiteNotFound(ValueError):
    pass


@dataclass
class SuiteValidationRow:
    task_id: str
    status: str  # finished | skipped | cancelled
    reason: str | None
    stage: str
    flaky_baseline: bool
    duration_sec: float
    artifacts_dir: str
    note: str = ""

    @property
    def valid(self) -> bool:
        return self.status == AttemptStatus.FINISHED and self.reason is None

    @property
    def verdict(self) -> str:
        if self.status == AttemptStatus.SKIPPED:
            return "skipped"
        if self.valid:
            return "valid (flaky)" if self.flaky_baseline else "valid"
        return self.reason or self.status


@dataclass(frozen=True)
class ProgressEvent:
    index: int  # 1-based among the tasks that run
    total: int
    task_id: str
    row: SuiteValidationRow | None = None  # None: the task is starting


@dataclass
class SuiteValidationReport:
    suite: str
    run_public_id: str
    run_dir: Path
    include_flaky: bool
    rows: list[SuiteValidationRow] = field(default_factory=list)

    @property
    def valid(self) -> list[SuiteValidationRow]:
        return [r for r in self.rows if r.valid]

    @property
    def skipped(self) -> list[SuiteValidationRow]:
        return [r for r in self.rows if r.status == AttemptStatus.SKIPPED]

    @property
    def invalid(self) -> list[SuiteValidationRow]:
        return [r for r in self.rows if not r.valid and r.status != AttemptStatus.SKIPPED]

    def summary(self) -> str:
        return (
            f"{len(self.valid)} valid, {len(self.invalid)} invalid, "
            f"{len(self.skipped)} skipped of {len(self.rows)} task(s)"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": RECORD_SCHEMA_VERSION,
            "kind": "suite_validation",
            "written_at": datetime.now(UTC).isoformat(),
            "provenance": asdict(provenance()),
            "suite": self.suite,
            "run_public_id": self.run_public_id,
            "include_flaky": self.include_flaky,
            "summary": {
                "valid": len(self.valid),
                "invalid": len(self.invalid),
                "skipped": len(self.skipped),
                "total": len(self.rows),
            },
            "tasks": [asdict(r) | {"verdict": r.verdict} for r in self.rows],
        }


def suite_validate(
    *,
    suite: str,
    tasks_dir: Path,
    include_flaky: bool,
    out: Path | None,
    progress: Callable[[ProgressEvent], None] | None = None,
    backend: str | None = None,
) -> SuiteValidationReport:
    """Import (or update) the suite's tasks from ``tasks_dir`` and validate each baseline.

    Raises ``TaskSpecError`` for invalid task files and ``SuiteNotFound`` when the folder holds
    no task of ``suite``. Artifacts go under ``out`` (default ARTIFACTS_ROOT).
    """
    loaded = sorted(
        (
            t
            for t in load_task_dir(tasks_dir, rules=local_path_rules(tasks_dir))
            if t.spec.suite == suite
        ),
        key=lambda t: t.spec.id,
    )
    if not loaded:
        raise SuiteNotFound(f"no tasks of suite {suite!r} under {tasks_dir}")
    with artifacts.root_override(out):
        run, attempts = _prepare(suite, loaded, include_flaky=include_flaky)
        folder = artifacts.run_dir(run)
        report = SuiteValidationReport(
            suite=suite,
            run_public_id=str(run.public_id),
            run_dir=folder,
            include_flaky=include_flaky,
        )
        to_run = [a for a in attempts if a.status == AttemptStatus.RUNNING]
        status = RunStatus.FINISHED
        try:
            for index, attempt in enumerate(to_run, start=1):
                if progress:
                    progress(ProgressEvent(index, len(to_run), attempt.task.task_id))
                attempt = attempt_execute(attempt, backend=backend)
                if progress:
                    progress(ProgressEvent(index, len(to_run), attempt.task.task_id, _row(attempt)))
        except KeyboardInterrupt:
            status = RunStatus.CANCELLED
            attempts_cancel_running(run=run, text="interrupted before it ran")
            raise
        finally:
            run_close(run=run, status=status)
            report.rows = [_row(a) for a in run.attempts.select_related("task").order_by("id")]
            artifacts.write_json(folder, artifacts.RUN_JSON, report.to_dict())
    return report


def _prepare(suite_name: str, loaded: list, *, include_flaky: bool):
    config = model_config_for_variant(AgentVariant.BASELINE)
    now = timezone.now()
    with transaction.atomic():
        suite, _ = Suite.objects.get_or_create(
            name=suite_name, defaults={"source": TaskSource.TASK_YAML}
        )
        tasks = [
            task_upsert(
                suite=suite,
                task_id=item.spec.id,
                fields=task_fields_from_spec(item),
                source_file=str(item.path),
            )[0]
            for item in loaded
        ]
        run = run_create(
            suite=suite,
            model_config=config,
            source=RunSource.VALIDATION,
            selection={
                "tasks": [t.task_id for t in tasks],
                "include_flaky": include_flaky,
                "skip_labels": [] if include_flaky else [SKIP_LABEL],
            },
        )
        attempts = []
        for task in tasks:
            skip = not include_flaky and task.is_flaky
            attempts.append(
                Attempt.objects.create(
                    run=run,
                    task=task,
                    suite=suite,
                    model_config=config,
                    task_revision=task.revision,
                    status=AttemptStatus.SKIPPED if skip else AttemptStatus.RUNNING,
                    started_at=None if skip else now,
                    heartbeat_at=None if skip else now,
                    finished_at=now if skip else None,
                    error_text=(
                        f"skipped: labelled {SKIP_LABEL} (use --include-flaky)" if skip else ""
                    ),
                )
            )
    return run, attempts


def _row(attempt: Attempt) -> SuiteValidationRow:
    return SuiteValidationRow(
        task_id=attempt.task.task_id,
        status=attempt.status,
        reason=attempt.failure_reason_id,
        stage=attempt.failure_stage,
        flaky_baseline=_flaky(attempt),
        duration_sec=round(attempt.duration_sec or 0.0, 2),
        artifacts_dir=attempt.artifacts_dir,
        note=_note(attempt),
    )


def _note(attempt: Attempt) -> str:
    """The attempt's own error line and, for a task found invalid, the first error of its logs
    (a setup that failed on a missing module says which), so the verdict explains itself."""
    own = attempt.error_text.splitlines()[0] if attempt.error_text else ""
    if attempt.failure_reason_id is None or not attempt.artifacts_dir:
        return own
    folder = artifacts.folder_of(attempt.artifacts_dir)
    for name in artifacts.LOG_NAMES.values():
        try:
            error = first_error((folder / name).read_text(errors="replace"))
        except OSError:
            continue
        if error:
            return "; ".join(n for n in (own, f"first error ({name}): {error}") if n)
    return own


def _flaky(attempt: Attempt) -> bool:
    if not attempt.artifacts_dir:
        return False
    path = artifacts.folder_of(attempt.artifacts_dir) / artifacts.RUN_JSON
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return bool(record.get("baseline", {}).get("flaky_baseline"))
