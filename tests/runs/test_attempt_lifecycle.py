"""One writer of an attempt's status: ``runs/lifecycle.py``. Read from the source (ast), so a
write anywhere else fails here with its file and line, whether or not a test runs that code.

What counts as a status write of an attempt, outside the lifecycle module:

- ``x.status = ...`` (or ``setattr(x, "status", ...)``), unless the value names another
  model's status (``RunStatus``, ``GoldValidationStatus``) or it is ``self.status`` of a class
  that is not the attempt (an exception's HTTP status) with no ``AttemptStatus`` in sight;
- ``status=`` given to ``update`` / ``create`` / ``get_or_create`` / ``update_or_create`` of
  attempts (the chain names ``Attempt``, ``attempts`` or an ``attempt...`` variable), or with
  an ``AttemptStatus`` value to any call but a read (``filter``, ``exclude``, ``get``, ``Q``),
  and ``{"status": AttemptStatus...}`` (a dict of fields to write);
- an attempt queryset's ``update(**fields)`` (the fields may hold the status),
  ``bulk_update(..., ["status", ...])`` of attempts,
  ``<attempt>.save(update_fields=[..., "status"])``;
- raw SQL that updates ``runs_attempt`` setting ``status``.

Allowed everywhere: creating an attempt with its first status (``Attempt(status=...)``,
``Attempt.objects.create(status=...)``, ``run.attempts.create(...)``). A new row has no state
to leave, so there is no transition to guard: a launch creates it ``queued``, ``ab run-agent``
and the validations create it ``running`` because the creating process runs it itself, and
imports record results produced elsewhere as they stand (``finished``, ``missing``,
``not_evaluated``). Migrations are left out: they are history, written against the models of
their time.
"""

from __future__ import annotations

import ast
import datetime as dt
import re
import textwrap
from pathlib import Path

import pytest
from django.utils import timezone

from runs.lifecycle import attempt_blame_the_cancel, attempt_fail, attempts_cancel_running
from runs.models import Attempt, AttemptStatus, Run, RunStatus
from runs.taxonomy import Reason
from tasks_app.models import Task
from tests.conftest import REPO_ROOT
from tests.support.pages_fixtures import make_attempt, make_model, make_run, make_suite

ROOT = REPO_ROOT
# Not ``sandbox``: it loads no Django and imports nothing of ``runs``
# (tests/architecture/test_import_cycles.py), so it cannot reach an attempt; its objects' ``status``
# (an image pull's progress) are none of this test's business.
PACKAGES = ("benchsite", "runs", "tasks_app")
LIFECYCLE = Path("runs/lifecycle.py")
OTHER_STATUSES = {"RunStatus", "GoldValidationStatus"}
READS = {"filter", "exclude", "get", "Q"}
WRITES = {"update", "create", "get_or_create", "update_or_create"}
RAW_UPDATE = re.compile(r"update\s+\W?runs_attempt\W?\s+set\b[^;]*\bstatus\b", re.I | re.S)


def _names(node: ast.AST) -> set[str]:
    """Every name and attribute named inside ``node``."""
    found = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            found.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            found.add(sub.attr)
    return found


def _chain(node: ast.AST) -> list[str]:
    """The names along a call chain's receiver: ``run.attempts.filter(...).update`` gives
    ``update, filter, attempts, run`` (arguments are not part of it)."""
    names = []
    while True:
        if isinstance(node, ast.Attribute):
            names.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, ast.Name):
            names.append(node.id)
            return names
        else:
            return names


def _of_attempts(func: ast.AST) -> bool:
    receiver = _chain(func)[1:]
    return any(n in ("Attempt", "attempts") or "attempt" in n.lower() for n in receiver)


def _has_status(node: ast.AST | None) -> bool:
    return isinstance(node, ast.List | ast.Tuple | ast.Set) and any(
        isinstance(e, ast.Constant) and e.value == "status" for e in node.elts
    )


class _Finder(ast.NodeVisitor):
    def __init__(self) -> None:
        self.found: list[tuple[int, str]] = []
        self.classes: list[str] = []

    def _flag(self, node: ast.AST, what: str) -> None:
        self.found.append((getattr(node, "lineno", 0), what))

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.classes.append(node.name)
        self.generic_visit(node)
        self.classes.pop()

    def _store(self, target: ast.AST, value: ast.AST | None, node: ast.AST) -> None:
        if isinstance(target, ast.Tuple | ast.List):
            for element in target.elts:
                self._store(element, value, node)
            return
        if not (isinstance(target, ast.Attribute) and target.attr == "status"):
            return
        named = _names(value) if value is not None else set()
        if "AttemptStatus" not in named:
            if named & OTHER_STATUSES:
                return
            in_other_class = bool(self.classes) and self.classes[-1] != "Attempt"
            if isinstance(target.value, ast.Name) and target.value.id == "self" and in_other_class:
                return
        self._flag(node, f"assigns {ast.unparse(target)}")

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._store(target, node.value, node)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._store(node.target, node.value, node)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._store(node.target, node.value, node)
        self.generic_visit(node)

    def visit_Dict(self, node: ast.Dict) -> None:
        for key, value in zip(node.keys, node.values, strict=True):
            status_key = isinstance(key, ast.Constant) and key.value == "status"
            if status_key and "AttemptStatus" in _names(value):
                self._flag(node, "a field dict sets status to an AttemptStatus")
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and RAW_UPDATE.search(node.value):
            self._flag(node, "raw SQL updates runs_attempt.status")

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = _chain(func)[0] if _chain(func) else ""
        creation = (isinstance(func, ast.Name) and func.id == "Attempt") or (
            name == "create" and _of_attempts(func)
        )
        if name == "setattr" and len(node.args) >= 2:
            field = node.args[1]
            if isinstance(field, ast.Constant) and field.value == "status":
                self._flag(node, "setattr(..., 'status', ...)")
        for keyword in node.keywords:
            if keyword.arg == "status" and not creation and name not in READS:
                of_attempts = name in WRITES and _of_attempts(func)
                if of_attempts or "AttemptStatus" in _names(keyword.value):
                    self._flag(node, f"{name}(status=...)")
            elif keyword.arg is None and name == "update" and _of_attempts(func):
                self._flag(node, "update(**fields) of attempts (the fields may hold status)")
            elif keyword.arg == "update_fields" and name == "save":
                receiver = _chain(func)[1:]
                if _has_status(keyword.value) and any("attempt" in n.lower() for n in receiver):
                    self._flag(node, "save(update_fields=[..., 'status'])")
        if name == "bulk_update" and _of_attempts(func):
            fields = node.args[1] if len(node.args) > 1 else None
            for keyword in node.keywords:
                if keyword.arg == "fields":
                    fields = keyword.value
            if _has_status(fields):
                self._flag(node, "bulk_update of attempts' status")
        self.generic_visit(node)


def status_writes(source: str) -> list[tuple[int, str]]:
    """(line, what) of every write of an attempt's status in ``source``."""
    finder = _Finder()
    finder.visit(ast.parse(source))
    return sorted(finder.found)


def _app_files():
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT)
            if "migrations" in relative.parts or relative == LIFECYCLE:
                continue
            yield relative


def test_it_finds_no_status_write_outside_the_lifecycle_module():
    files = list(_app_files())
    assert len(files) > 100  # the whole app is read, not an empty folder
    writes = [
        f"{path}:{line}: {what}"
        for path in files
        for line, what in status_writes((ROOT / path).read_text())
    ]
    assert writes == [], (
        "an attempt's status is written outside runs/lifecycle.py; call (or add) a function "
        "there instead (not an attempt's status? this file's docstring says what passes):\n"
        + "\n".join(writes)
    )


def test_the_lifecycle_module_holds_every_transition():
    """The writes are where the docstring's table says, so the rules above see real code."""
    tree = ast.parse((ROOT / LIFECYCLE).read_text())
    writers = set()
    for node in tree.body:
        if not status_writes(ast.unparse(node)):
            continue
        if isinstance(node, ast.FunctionDef):
            writers.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            writers.add(ast.unparse(target))
    assert writers == {
        "attempt_claim",
        "attempt_finish",
        "attempt_fail",
        "attempt_blame_the_cancel",
        "_RESET_FIELDS",
        "attempts_queue_for_evaluation",
        "_cancel",
        "attempts_skip_queued",
        "attempt_mark_not_evaluated",
        "attempt_replace_with_import",
    }


WRITES_CAUGHT = {
    "an attempt's field": "attempt.status = AttemptStatus.FINISHED",
    "a locked row, status from a variable": "locked.status = new_status",
    "a chained assignment": "a.finished_at = b.status = AttemptStatus.CANCELLED",
    "a helper object carrying an AttemptStatus": (
        "class Execution:\n    def stop(self):\n        self.status = AttemptStatus.CANCELLED"
    ),
    "the attempt model's own method": (
        "class Attempt:\n    def cancel(self, value):\n        self.status = value"
    ),
    "a compare-and-set of a run's attempts": (
        "run.attempts.filter(status=AttemptStatus.QUEUED).update(status=AttemptStatus.SKIPPED)"
    ),
    "an update through the manager": (
        "Attempt.objects.filter(id=1, status='queued').update(status='running')"
    ),
    "an update of a queryset variable": "stale.update(status=AttemptStatus.QUEUED)",
    "a result object given the status": "AttemptResult(status=AttemptStatus.CANCELLED)",
    "a dict of fields": "RESET = {'status': AttemptStatus.QUEUED, 'worker': ''}",
    "setattr": "setattr(attempt, 'status', 'finished')",
    "an update from a dict of fields": "Attempt.objects.filter(pk=pk).update(**fields)",
    "a save naming the status": "attempt.save(update_fields=['status', 'error_text'])",
    "a bulk update": "Attempt.objects.bulk_update(rows, ['status'])",
    "raw SQL": "cursor.execute('UPDATE runs_attempt SET status = %s WHERE id = %s', [s, i])",
}


@pytest.mark.parametrize("source", WRITES_CAUGHT.values(), ids=WRITES_CAUGHT.keys())
def test_the_check_catches_each_way_of_writing_a_status(source):
    assert status_writes(textwrap.dedent(source)) != []


NOT_WRITES = {
    "reads": (
        "Attempt.objects.filter(status=AttemptStatus.QUEUED).exclude(status='x').get(pk=1)\n"
        "Q(status=AttemptStatus.MISSING)\n"
        "if attempt.status == AttemptStatus.FINISHED:\n    pass"
    ),
    "a run's status": (
        "run.status = RunStatus.CANCELLED\n"
        "Run.objects.filter(attempts__id=1, status=RunStatus.QUEUED).update(status='running')\n"
        "run.save(update_fields=['status', 'totals'])"
    ),
    "another model's status": "row.status = GoldValidationStatus.INVALID",
    "an exception's HTTP status": (
        "class ApiError(Exception):\n    def __init__(self, status):\n        self.status = status"
    ),
    "a creation with the first status": (
        "Attempt(run=run, status=AttemptStatus.QUEUED)\n"
        "Attempt.objects.create(run=run, status=AttemptStatus.RUNNING)\n"
        "run.attempts.create(task=task, status=AttemptStatus.MISSING)"
    ),
    "a copy into a report": "SuiteValidationRow(status=attempt.status)",
    "stage rows": "AttemptStage.objects.bulk_update(stages, ['name', 'order'])",
}


@pytest.mark.parametrize("source", NOT_WRITES.values(), ids=NOT_WRITES.keys())
def test_the_check_leaves_reads_and_other_models_alone(source):
    assert status_writes(source) == []


# --- The transitions no other test drives directly ---------------------------------------


def _running(run: Run, task, **fields) -> Attempt:
    started = timezone.now() - dt.timedelta(seconds=30)
    return make_attempt(
        run,
        task,
        status=AttemptStatus.RUNNING,
        started_at=started,
        heartbeat_at=started,
        duration_sec=None,
        **fields,
    )


@pytest.mark.django_db
def test_it_fails_an_attempt_writing_only_what_the_caller_gives():
    suite = make_suite("lifecycle-fail", tasks=2)
    run = make_run(suite, make_model("lifecycle-fail-model"), status=RunStatus.RUNNING)
    first, second = Task.objects.for_suite(suite).order_by("task_id")
    # The worker's task: the Celery time limit (a timeout, the text its own fingerprint).
    timed_out = _running(run, first, error_kind="kept")
    text = "[timeout] the attempt exceeded its overall time budget " + "x" * 300
    attempt_fail(timed_out, reason=Reason.TIMEOUT, text=text, is_timeout=True)
    timed_out.refresh_from_db()
    assert timed_out.status == AttemptStatus.FINISHED
    assert (timed_out.failure_reason_id, timed_out.is_infra) == ("TIMEOUT", True)
    assert timed_out.is_timeout and timed_out.error_text == text
    assert timed_out.error_fingerprint == text[:200]
    assert timed_out.error_kind == "kept"  # not given: left alone
    assert timed_out.finished_at is not None and timed_out.duration_sec >= 30
    # The reaper: a lost worker in a run that ended meanwhile.
    lost = _running(run, second, is_timeout=True)
    attempt_fail(
        lost,
        reason=Reason.INTERRUPTED,
        text="[worker-lost] w:1 ...",
        cancelled=True,
        fingerprint="[worker-lost]",
        error_kind="transient",
    )
    lost.refresh_from_db()
    assert (lost.status, lost.failure_reason_id) == (AttemptStatus.CANCELLED, "INTERRUPTED")
    assert (lost.error_fingerprint, lost.error_kind) == ("[worker-lost]", "transient")
    assert lost.is_timeout  # not given: left alone


@pytest.mark.django_db
def test_a_sandbox_error_while_the_run_is_cancelled_is_blamed_on_the_cancel():
    suite = make_suite("lifecycle-blame", tasks=3)
    cancelled = make_run(suite, make_model("lifecycle-blame-model"), status=RunStatus.CANCELLED)
    going = make_run(suite, cancelled.model_config, status=RunStatus.RUNNING)
    first, second, third = Task.objects.for_suite(suite).order_by("task_id")
    broken = make_attempt(cancelled, first, "SANDBOX_ERROR", error_text="container gone")
    failed = make_attempt(cancelled, second, "TESTS_FAILED", error_text="2 failed")
    elsewhere = make_attempt(going, third, "SANDBOX_ERROR", error_text="container gone")
    for attempt in (broken, failed, elsewhere):
        attempt_blame_the_cancel(attempt)
        attempt.refresh_from_db()
    assert (broken.status, broken.failure_reason_id) == (AttemptStatus.CANCELLED, "INTERRUPTED")
    assert broken.error_text == (
        "[cancelled] the run was cancelled while this attempt ran; it then ended with "
        "SANDBOX_ERROR: container gone"
    )
    # The agent's own failure, and a run nobody cancelled, keep their outcome.
    assert (failed.status, failed.failure_reason_id) == (AttemptStatus.FINISHED, "TESTS_FAILED")
    assert (elsewhere.status, elsewhere.failure_reason_id) == (
        AttemptStatus.FINISHED,
        "SANDBOX_ERROR",
    )


@pytest.mark.django_db
def test_a_ctrl_c_cancels_the_running_attempts_of_its_run_only():
    suite = make_suite("lifecycle-ctrl-c", tasks=3)
    run = make_run(suite, make_model("lifecycle-ctrl-c-model"), status=RunStatus.RUNNING)
    other = make_run(suite, run.model_config, status=RunStatus.RUNNING)
    first, second, third = Task.objects.for_suite(suite).order_by("task_id")
    running = _running(run, first)
    done = make_attempt(run, second, "TESTS_FAILED")
    elsewhere = _running(other, third)
    assert attempts_cancel_running(run=run, text="interrupted before it ran") == 1
    running.refresh_from_db()
    assert (running.status, running.failure_reason_id) == (AttemptStatus.CANCELLED, "INTERRUPTED")
    assert running.is_infra and running.error_text == "interrupted before it ran"
    assert running.finished_at is not None
    done.refresh_from_db()
    elsewhere.refresh_from_db()
    assert (done.status, elsewhere.status) == (AttemptStatus.FINISHED, AttemptStatus.RUNNING)


@pytest.mark.django_db
def test_the_admin_change_form_cannot_change_an_attempts_state(client, alice):
    """The AST check cannot see a ModelForm: the admin's attempt form shows the state and the
    verdict read-only, so a staff edit never bypasses the lifecycle (its actions do that)."""
    from django.urls import reverse

    suite = make_suite("admin-state", tasks=1)
    run = make_run(suite, make_model("admin-state"))
    attempt = make_attempt(run, Task.objects.get(suite=suite), status=AttemptStatus.QUEUED)
    client.force_login(alice)
    url = reverse("admin:runs_attempt_change", args=[attempt.pk])
    form = client.get(url)
    assert form.status_code == 200
    assert 'name="status"' not in form.content.decode()

    response = client.post(
        url,
        {
            "run": run.pk,
            "task": attempt.task_id,
            "suite": suite.pk,
            "model_config": run.model_config_id,
            "sample_index": 0,
            "task_revision": attempt.task_revision,
            "status": AttemptStatus.FINISHED,
            "failure_reason": "",
            "stages-TOTAL_FORMS": 0,
            "stages-INITIAL_FORMS": 0,
        },
    )
    assert response.status_code in (200, 302)
    attempt.refresh_from_db()
    assert attempt.status == AttemptStatus.QUEUED
