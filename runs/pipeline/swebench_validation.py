"""Gold validation of a SWE-bench suite (``ab validate-suite SUITE --variant oracle``).

Builds what is missing, then runs every buildable instance twice through the normal pipeline:
with the gold patch (oracle) and with no patch (nop). Gold FULL and empty NO is a valid
instance; anything else is recorded as invalid on the task (``GoldValidation``) with both
grades and the tests that went the wrong way, and the leaderboard leaves the task out of its
rates. A test that needs the network fails here (attempts have none), so such instances show
up as invalid with that reason, not later as agent failures.

An invalid instance explains itself: beside the tests that went the wrong way, the reason
names the first error of the gold attempt's test log (an import error, an unknown module).
An instance built on an approximate environment (a newer Python than its specification asks
for) counts only when gold validation passes on it; otherwise it is not buildable here, with
the same explanation.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from django.db import transaction
from django.utils import timezone

from runs.models import AgentVariant, Attempt, AttemptStatus, Run, RunSource, RunStatus
from runs.pipeline import artifacts
from runs.pipeline.adhoc import model_config_for_variant, run_close, run_create
from runs.pipeline.execute import attempt_execute
from runs.pipeline.log_errors import first_error
from tasks_app.models import GoldValidation, GoldValidationStatus, Suite, Task, TaskSource
from tasks_app.swebench.build import Builder, BuildOutcome

# Lines in a test log that say a test wanted the network (attempts run with none).
NETWORK_MARKERS = (
    "Temporary failure in name resolution",
    "Name or service not known",
    "Network is unreachable",
    "socket.gaierror",
    "urlopen error",
    "Failed to establish a new connection",
)
REPORT_JSON = "gold_validation.json"


class NotSwebenchSuite(ValueError):
    pass


@dataclass
class GoldRow:
    instance_id: str
    status: str  # valid | invalid | not_buildable
    build: str  # built | cached | not buildable | failed
    gold_grade: str = ""
    empty_grade: str = ""
    failing_tests: list[str] = field(default_factory=list)
    reason: str = ""
    seconds: float = 0.0
    python_asked: str = ""
    python_used: str = ""
    installs_as_of: str = ""

    @property
    def approximate(self) -> bool:
        return bool(self.python_asked) and self.python_asked != self.python_used


@dataclass
class GoldReport:
    suite: str
    backend: str
    rows: list[GoldRow] = field(default_factory=list)
    run_dirs: list[str] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for r in self.rows if r.status == status)

    def summary(self) -> str:
        approximate = sum(1 for r in self.rows if r.status == "valid" and r.approximate)
        return (
            f"{self.count('valid')} valid ({approximate} on an approximate environment), "
            f"{self.count('invalid')} invalid, "
            f"{self.count('not_buildable')} not buildable of {len(self.rows)} instance(s) "
            f"on {self.backend}"
        )


@dataclass(frozen=True)
class Event:
    """Progress: a build finished (``build``) or an instance's two attempts did (``row``)."""

    index: int
    total: int
    instance_id: str
    build: BuildOutcome | None = None
    row: GoldRow | None = None


def swebench_suite_tasks(suite_name: str, instance_ids: list[str] | None = None) -> list[Task]:
    """The SWE-bench tasks of an imported suite (all, or the ids given). Raises
    NotSwebenchSuite naming what is missing."""
    suite = Suite.objects.filter(name=suite_name).first()
    if suite is None:
        raise NotSwebenchSuite(f"no suite {suite_name!r} (import it with ab import-swebench)")
    tasks = list(Task.objects.for_suite(suite).filter(source=TaskSource.SWEBENCH))
    if not tasks:
        raise NotSwebenchSuite(f"suite {suite_name!r} holds no SWE-bench task")
    if instance_ids:
        by_id = {t.task_id: t for t in tasks}
        unknown = [i for i in instance_ids if i not in by_id]
        if unknown:
            raise NotSwebenchSuite(f"suite {suite_name!r} has no instance {', '.join(unknown)}")
        tasks = [by_id[i] for i in instance_ids]
    return sorted(tasks, key=lambda t: t.task_id)


def build_tasks(
    tasks: list[Task], builder: Builder, progress: Callable[[Event], None] | None = None
) -> dict[str, BuildOutcome]:
    outcomes = {}
    for index, task in enumerate(tasks, start=1):
        outcome = builder.build(task.spec)
        outcomes[task.task_id] = outcome
        if progress:
            progress(Event(index, len(tasks), task.task_id, build=outcome))
    return outcomes


def gold_validate(
    *,
    suite_name: str,
    builder: Builder,
    backend: str,
    instance_ids: list[str] | None = None,
    out: Path | None = None,
    progress: Callable[[Event], None] | None = None,
) -> GoldReport:
    """Build, then run gold and empty on each buildable instance; record each verdict."""
    tasks = swebench_suite_tasks(suite_name, instance_ids)
    suite = tasks[0].suite
    report = GoldReport(suite=suite_name, backend=backend)
    builds = build_tasks(tasks, builder, progress)
    runnable = [t for t in tasks if builds[t.task_id].ok]
    with artifacts.root_override(out):
        gold_run = _run(suite, AgentVariant.ORACLE, runnable)
        empty_run = _run(suite, AgentVariant.NOP, runnable)
        report.run_dirs = [str(artifacts.run_dir(gold_run)), str(artifacts.run_dir(empty_run))]
        status = RunStatus.FINISHED
        try:
            for index, task in enumerate(tasks, start=1):
                build = builds[task.task_id]
                if not build.ok:
                    error = first_error(build.log_tail) if build.status == "failed" else ""
                    row = GoldRow(
                        task.task_id, GoldValidationStatus.NOT_BUILDABLE, build.status,
                        reason=f"{build.status}: {build.reason}"
                        + (f" (first error: {error})" if error else ""),
                    )  # fmt: skip
                else:
                    gold = attempt_execute(_attempt(gold_run, task), backend=backend)
                    empty = attempt_execute(_attempt(empty_run, task), backend=backend)
                    row = judge(task, gold, empty, build=build)
                _store(task, backend, row)
                report.rows.append(row)
                if progress:
                    progress(Event(index, len(tasks), task.task_id, row=row))
        except KeyboardInterrupt:
            status = RunStatus.CANCELLED
            raise
        finally:
            for run in (gold_run, empty_run):
                run_close(run=run, status=status)
            artifacts.write_json(artifacts.run_dir(gold_run), REPORT_JSON, _report_dict(report))
    return report


def judge(task: Task, gold: Attempt, empty: Attempt, *, build: BuildOutcome) -> GoldRow:
    """The verdict of one instance from its gold and empty attempts."""
    built = build.built
    row = GoldRow(
        task.task_id,
        GoldValidationStatus.VALID,
        build.status,
        gold_grade=gold.grade,
        empty_grade=empty.grade,
        seconds=round((gold.duration_sec or 0) + (empty.duration_sec or 0), 1),
        python_asked=built.python_asked if built else "",
        python_used=built.python if built else "",
        installs_as_of=f"env {built.env_date}, instance {built.date}" if built else "",
    )
    problems = []
    results = gold.test_results or {}
    wrong = [
        *(results.get("FAIL_TO_PASS", {}).get("failure") or []),
        *(results.get("PASS_TO_PASS", {}).get("failure") or []),
    ]
    if gold.grade != "FULL":
        problems.append(_attempt_problem("gold patch", gold, wrong))
        if _needs_network(gold):
            problems.insert(0, "the tests need the network (attempts have none)")
    passing_empty = (empty.test_results or {}).get("FAIL_TO_PASS", {}).get("success") or []
    if empty.grade != "NO":
        problems.append(_attempt_problem("no patch", empty, passing_empty))
        wrong += [f"{t} (passes with no patch)" for t in passing_empty]
    if problems:
        error = first_error(_test_log(gold)) if gold.grade != "FULL" else ""
        if error:
            problems.append(f"first error: {error}")
        if built and built.note:
            problems.append(f"built with: {built.note}")
        row.status = GoldValidationStatus.INVALID
        if row.approximate:
            # Counted only when the gold patch passes on it: otherwise not buildable here.
            row.status = GoldValidationStatus.NOT_BUILDABLE
            problems.insert(
                0,
                f"approximate environment (Python {row.python_used} for {row.python_asked}) "
                "fails gold validation",
            )
        row.reason = "; ".join(problems)
        row.failing_tests = wrong
    return row


def _test_log(attempt: Attempt) -> str:
    if not attempt.artifacts_dir:
        return ""
    log = artifacts.folder_of(attempt.artifacts_dir) / "logs" / "final_test.txt"
    try:
        return log.read_text(errors="replace")
    except OSError:
        return ""


def _attempt_problem(what: str, attempt: Attempt, tests: list[str]) -> str:
    if attempt.status != AttemptStatus.FINISHED or not attempt.grade:
        first = (attempt.error_text or "").strip().splitlines()[:1]
        return f"{what}: attempt ended {attempt.failure_reason_id or attempt.status}" + (
            f" ({first[0][:200]})" if first else ""
        )
    shown = ", ".join(tests[:5]) + (f" and {len(tests) - 5} more" if len(tests) > 5 else "")
    return f"{what} grades {attempt.grade}" + (f": {shown}" if tests else "")


def _needs_network(attempt: Attempt) -> bool:
    text = _test_log(attempt)
    return any(marker in text for marker in NETWORK_MARKERS)


def _run(suite: Suite, variant: str, tasks: list[Task]) -> Run:
    return run_create(
        suite=suite,
        model_config=model_config_for_variant(variant),
        source=RunSource.VALIDATION,
        selection={"tasks": [t.task_id for t in tasks], "gold_validation": variant},
    )


def _attempt(run: Run, task: Task) -> Attempt:
    now = timezone.now()
    return Attempt.objects.create(
        run=run,
        task=task,
        suite=task.suite,
        model_config=run.model_config,
        task_revision=task.revision,
        status=AttemptStatus.RUNNING,
        started_at=now,
        heartbeat_at=now,
    )


def _store(task: Task, backend: str, row: GoldRow) -> None:
    with transaction.atomic():
        GoldValidation.objects.update_or_create(
            task=task,
            backend=backend,
            defaults={
                "status": row.status,
                "gold_grade": row.gold_grade,
                "empty_grade": row.empty_grade,
                "failing_tests": row.failing_tests,
                "reason": row.reason,
                "python_asked": row.python_asked,
                "python_used": row.python_used,
                "installs_as_of": row.installs_as_of,
            },
        )


def _report_dict(report: GoldReport) -> dict[str, Any]:
    return {
        "kind": "swebench_gold_validation",
        "suite": report.suite,
        "backend": report.backend,
        "summary": report.summary(),
        "runs": report.run_dirs,
        "instances": [asdict(r) for r in report.rows],
    }


def report_json(report: GoldReport) -> str:
    return json.dumps(_report_dict(report), indent=2)
