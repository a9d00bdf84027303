"""Gold validation of a SWE-bench suite (``ab validate-suite SUITE --variant oracle``).

Builds what is missing (in a thread of its own, just ahead of the attempts) and runs every
buildable instance twice through the normal pipeline, here or through the workers:
with the gold patch (oracle) and with no patch (nop). Gold FULL and empty NO is a valid
instance; anything else is recorded as invalid on the task (``GoldValidation``) with both
grades and the tests that went the wrong way, and the leaderboard leaves the task out of its
rates. The final tests run with a network that silently drops everything (as the official
harness's containers have a network: a test expecting a connect to time out passes); a test
that needs the internet fails, and the reason names it, so such instances show up as invalid
with that reason, not later as agent failures.

An invalid instance explains itself: beside the tests that went the wrong way, the reason
names the first error of the gold attempt's test log (an import error, an unknown module).
An instance built on an approximate environment (a newer Python than its specification asks
for) counts only when gold validation passes on it; otherwise it is not buildable here, with
the same explanation.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from django.db import transaction
from django.utils import timezone

from runs.models import AgentVariant, Attempt, AttemptStatus, Run, RunSource, RunStatus
from runs.pipeline import artifacts, validation_summary
from runs.pipeline.adhoc import model_config_for_variant, run_close, run_create
from runs.pipeline.execute import attempt_execute
from runs.pipeline.log_errors import first_error, skipped_tests
from runs.pipeline.validation_summary import VERDICTS, Verdict, listed
from runs.services import attempts_enqueue, run_cancel
from sandbox.environments.build import Builder, BuildOutcome
from tasks_app.models import GoldValidation, GoldValidationStatus, Suite, Task
from tasks_app.swebench.suites import swebench_suite_tasks

# What a test's output shows when it wanted the internet. The final tests run with a network
# that silently drops everything (sandbox/blackhole.py): a connect times out and a name does
# not resolve, as on a machine whose network reaches nothing.
NETWORK_MARKERS = (
    "Temporary failure in name resolution",
    "Name or service not known",
    "Network is unreachable",
    "socket.gaierror",
    "urlopen error",
    "Failed to establish a new connection",
    "ConnectTimeout",
    "Max retries exceeded",
    "timed out",
)
# pytest's header of one test's failure: "____ Class.test_name[param] ____".
_SECTION = re.compile(r"^_{3,} (?P<name>\S.*?) _{3,}$", re.MULTILINE)
REPORT_JSON = "gold_validation.json"


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
        """Built on an approximate environment (swebench-envs: a newer Python than the
        specification asks for): a valid one is counted "approximate-valid"."""
        return bool(self.python_asked) and self.python_asked != self.python_used

    @property
    def verdict(self) -> str:
        """valid | approximate-valid | invalid | not_buildable (the summary's columns)."""
        if self.status == GoldValidationStatus.VALID and self.approximate:
            return "approximate-valid"
        return self.status


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


# Runs the queued attempt ids through the workers and returns once every one is final.
WorkersWait = Callable[[list[int]], None]


def gold_validate(
    *,
    suite_name: str,
    builder: Builder,
    backend: str,
    instance_ids: list[str] | None = None,
    out: Path | None = None,
    progress: Callable[[Event], None] | None = None,
    jobs: int = 1,
    workers: WorkersWait | None = None,
    window: int = 4,
) -> GoldReport:
    """Build (``jobs`` levels at once) and run gold and empty on each buildable instance,
    recording each verdict: one after the other in this process, or, given ``workers``,
    queued to the workers (``runs.services.attempts_enqueue``), ``window`` instances at a
    time, and waited for with it.

    The builds run in a thread of their own while the attempts run, in the suite's order;
    each instance is handed over with its level under a use lease, kept until both its
    attempts ended. With a budget (``builder.max_bytes``) the builds run only a few instances
    ahead (``window`` plus ``jobs``), so that what is built is used before eviction could take
    it and the budget holds: only the instances between their build and their verdict cannot
    be evicted. Without one they run as far ahead as they can."""
    tasks = swebench_suite_tasks(suite_name, instance_ids)
    suite = tasks[0].suite
    report = GoldReport(suite=suite_name, backend=backend)
    in_flight_max = max(window, 1) if workers is not None else 1
    ahead = in_flight_max + max(jobs, 1) if builder.max_bytes is not None else len(tasks)
    builds = _Builds(tasks, builder, jobs=jobs, ahead=ahead, progress=progress)
    with artifacts.root_override(out):
        gold_run = _run(suite, AgentVariant.ORACLE, tasks)
        empty_run = _run(suite, AgentVariant.NOP, tasks)
        report.run_dirs = [str(artifacts.run_dir(gold_run)), str(artifacts.run_dir(empty_run))]
        status = RunStatus.FINISHED
        in_flight: list[_InFlight] = []

        def settle(item: _InFlight) -> None:
            if workers is not None:
                workers([item.gold.id, item.empty.id])
                item.gold.refresh_from_db()
                item.empty.refresh_from_db()
            item.lease.close()
            builds.done_with()
            row = judge(item.task, item.gold, item.empty, build=item.build)
            record(item.index, item.task, row, _backend_of(item.gold, backend))

        def record(index: int, task: Task, row: GoldRow, ran_on: str) -> None:
            _store(task, ran_on, row)
            report.rows.append(row)
            if progress:
                progress(Event(index, len(tasks), task.task_id, row=row))

        try:
            builds.start()
            for index, task in enumerate(tasks, start=1):
                build, lease = builds.next(task)
                if not build.ok:
                    lease.close()
                    builds.done_with()
                    error = first_error(build.log_tail) if build.status == "failed" else ""
                    row = GoldRow(
                        task.task_id,
                        GoldValidationStatus.NOT_BUILDABLE,
                        build.status,
                        reason=f"{build.status}: {build.reason}"
                        + (f" (first error: {error})" if error else ""),
                    )
                    record(index, task, row, backend)
                    continue
                if workers is None:
                    gold = attempt_execute(_attempt(gold_run, task), backend=backend)
                    empty = attempt_execute(_attempt(empty_run, task), backend=backend)
                    settle(_InFlight(index, task, build, gold, empty, lease))
                    continue
                item = _InFlight(
                    index,
                    task,
                    build,
                    _attempt(gold_run, task, queued=True),
                    _attempt(empty_run, task, queued=True),
                    lease,
                )
                attempts_enqueue([item.gold.id, item.empty.id])
                in_flight.append(item)
                while len(in_flight) >= in_flight_max:
                    settle(in_flight.pop(0))
            while in_flight:
                settle(in_flight.pop(0))
        except KeyboardInterrupt:
            status = RunStatus.CANCELLED
            if workers is not None:
                for run in (gold_run, empty_run):
                    run_cancel(run=run)
            raise
        finally:
            for item in in_flight:
                item.lease.close()
            builds.close()
            for run in (gold_run, empty_run):
                run_close(run=run, status=status)
            artifacts.write_json(artifacts.run_dir(gold_run), REPORT_JSON, _report_dict(report))
    report.rows.sort(key=lambda r: r.instance_id)
    return report


class _Builds:
    """The tasks' builds, made in their order by a thread of their own (``jobs`` levels at
    once) at most ``ahead`` instances before the validation is done with them. Each comes
    with its instance level under a use lease (an ExitStack the validation closes)."""

    def __init__(
        self,
        tasks: list[Task],
        builder: Builder,
        *,
        jobs: int,
        ahead: int,
        progress: Callable[[Event], None] | None,
    ):
        self.tasks, self.builder, self.jobs, self.progress = tasks, builder, jobs, progress
        self.slots = threading.Semaphore(max(ahead, 1))
        self.cond = threading.Condition()
        self.ready: dict[str, tuple[BuildOutcome, contextlib.ExitStack]] = {}
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="gold-builds", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def next(self, task: Task) -> tuple[BuildOutcome, contextlib.ExitStack]:
        """``task``'s build, once it is there (raises what stopped the builds)."""
        with self.cond:
            self.cond.wait_for(lambda: task.task_id in self.ready or self.error is not None)
            if task.task_id not in self.ready:
                assert self.error is not None
                raise self.error
            return self.ready.pop(task.task_id)

    def done_with(self) -> None:
        """The validation is done with one instance: the builds may go one further."""
        self.slots.release()

    def close(self) -> None:
        """Let go of the builds nobody took (the validation was interrupted)."""
        with self.cond:
            for _, lease in self.ready.values():
                lease.close()
            self.ready.clear()

    def _run(self) -> None:
        from sandbox.environments.official_images import official_record
        from sandbox.environments.parallel import build_all
        from tasks_app.swebench.own_dockerfile import build_instance, own_dockerfile

        try:
            # An instance on its official image (ab swebench build --source image|auto) is
            # not built: its image is leased as an offline build's level would be.
            to_build = []
            for index, task in enumerate(self.tasks, start=1):
                if own_dockerfile(task) is not None:  # its own Dockerfile: the engine builds it
                    self.slots.acquire()
                    outcome, source = build_instance(task)
                    self._built(index, outcome, source=source)
                    continue
                official = official_record(task.task_id)
                if official is None:
                    to_build.append(task)
                    continue
                self.slots.acquire()
                outcome = BuildOutcome(task.task_id, "image", f"official image {official.name}")
                self._built(index, outcome, image_id=official.image_id)
            build_all(
                self.builder,
                [t.spec for t in to_build],
                jobs=self.jobs,
                on_outcome=self._built,
                slots=self.slots,
            )
        except BaseException as exc:  # handed to the validation, which raises it
            with self.cond:
                self.error = exc
                self.cond.notify_all()

    def _built(
        self, index: int, outcome: BuildOutcome, *, image_id: str = "", source: Any = None
    ) -> None:
        from sandbox.environments.handles import IMAGE, OFFLINE, Source, environment_of

        lease = contextlib.ExitStack()
        # The one door to an instance's environment (leased until both its attempts end).
        if source is None:
            source = Source(IMAGE, image_id) if image_id else Source(OFFLINE, outcome.instance_id)
        if outcome.ok and lease.enter_context(environment_of(source, tree=False)) is None:
            outcome = _evicted(outcome)
        if self.progress:
            self.progress(Event(index, len(self.tasks), outcome.instance_id, build=outcome))
        with self.cond:
            self.ready[outcome.instance_id] = (outcome, lease)
            self.cond.notify_all()


@dataclass
class _InFlight:
    """An instance whose two attempts run (or are queued), its level leased until they end."""

    index: int
    task: Task
    build: BuildOutcome
    gold: Attempt
    empty: Attempt
    lease: contextlib.ExitStack


def _evicted(build: BuildOutcome) -> BuildOutcome:
    return BuildOutcome(
        build.instance_id, "failed", "its level was evicted again before its attempts started"
    )


def _backend_of(attempt: Attempt, default: str) -> str:
    """The backend the attempt ran on (a worker's own setting), from its run.json."""
    if not attempt.artifacts_dir:
        return default
    path = artifacts.folder_of(attempt.artifacts_dir) / artifacts.RUN_JSON
    try:
        backend = json.loads(path.read_text()).get("sandbox", {}).get("backend")
    except (OSError, ValueError, AttributeError):
        return default
    return backend if backend in ("docker", "bwrap") else default


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
    skipped: dict[str, str] = {}
    gold_wrong = list(wrong)
    if gold.grade != "FULL":
        problems.append(_attempt_problem("gold patch", gold, wrong))
        log = _test_log(gold)
        # A fail-to-pass test skipped (pylint's "Need 2 or more cores ...") says so, with its
        # message: the nearest error-looking line of the log would not be why.
        skipped = skipped_tests(log, list(results.get("FAIL_TO_PASS", {}).get("failure") or []))
        if skipped:
            problems.insert(
                0,
                "fail-to-pass tests skipped: "
                + "; ".join(f"{test} ({why})" for test, why in list(skipped.items())[:3])
                + (f" and {len(skipped) - 3} more" if len(skipped) > 3 else ""),
            )
        online = network_tests(log, wrong)
        if online:
            problems.insert(
                0,
                f"tests that need the internet (network errors in their output; the final "
                f"tests' network reaches nothing): {listed(online)}",
            )
        elif any(marker in log for marker in NETWORK_MARKERS):
            problems.insert(0, "the log shows network errors (the final tests reach no network)")
    passing_empty = (empty.test_results or {}).get("FAIL_TO_PASS", {}).get("success") or []
    if empty.grade != "NO":
        problems.append(_attempt_problem("no patch", empty, passing_empty))
        wrong += [f"{t} (passes with no patch)" for t in passing_empty]
    if problems:
        # The first error, unless every test that went wrong was skipped.
        unexplained = gold.grade != "FULL" and any(t not in skipped for t in gold_wrong)
        error = first_error(_test_log(gold)) if unexplained else ""
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
    return f"{what} grades {attempt.grade}" + (f": {listed(tests)}" if tests else "")


def network_tests(log: str, tests: list[str]) -> list[str]:
    """The tests among ``tests`` whose own output in ``log`` shows a network error: their
    pytest failure section, or their line of the short summary."""
    sections: dict[str, str] = {}
    found = list(_SECTION.finditer(log))
    for index, match in enumerate(found):
        end = found[index + 1].start() if index + 1 < len(found) else len(log)
        # The last failure ends where pytest's next part starts ("==== short test summary").
        rule = log.find("\n=", match.end(), end)
        sections[match.group("name")] = log[match.end() : end if rule == -1 else rule]
    summary = [line for line in log.splitlines() if line.startswith(("FAILED ", "ERROR "))]
    named = []
    for test in tests:
        parts = test.split("::")
        text = sections.get(".".join(parts[1:]), "") + sections.get(parts[-1], "")
        text += "\n".join(line for line in summary if line.split(" ")[1:2] == [test])
        if any(marker in text for marker in NETWORK_MARKERS):
            named.append(test)
    return named


def _run(suite: Suite, variant: str, tasks: list[Task]) -> Run:
    return run_create(
        suite=suite,
        model_config=model_config_for_variant(variant),
        source=RunSource.VALIDATION,
        selection={"tasks": [t.task_id for t in tasks], "gold_validation": variant},
    )


def _attempt(run: Run, task: Task, *, queued: bool = False) -> Attempt:
    """An attempt of ``run`` on ``task``: claimed by this process (running), or queued for
    the workers."""
    now = timezone.now()
    return Attempt.objects.create(
        run=run,
        task=task,
        suite=task.suite,
        model_config=run.model_config,
        task_revision=task.revision,
        status=AttemptStatus.QUEUED if queued else AttemptStatus.RUNNING,
        started_at=None if queued else now,
        heartbeat_at=None if queued else now,
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
        "counts": {
            verdict: sum(1 for r in report.rows if r.verdict == verdict) for verdict in VERDICTS
        },
        "instances": [asdict(r) | {"verdict": r.verdict} for r in report.rows],
    }


def summary_table(report: GoldReport) -> list[str]:
    """The end of a gold validation (``validation_summary``, the table every source ends
    with)."""
    return validation_summary.summary_table(
        [Verdict(r.instance_id, r.verdict, r.reason, tuple(r.failing_tests)) for r in report.rows],
        backend=report.backend,
    )


def report_json(report: GoldReport) -> str:
    return json.dumps(_report_dict(report), indent=2)
