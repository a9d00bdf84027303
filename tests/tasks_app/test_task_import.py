from __future__ import annotations

import shutil

import pytest

from tasks_app.models import Suite, Task, TaskRevision
from tasks_app.services import Upsert, tasks_import
from tasks_app.spec import TaskSpecError
from tests.conftest import TASKS_DIR


@pytest.fixture
def tasks_copy(tmp_path, settings):
    target = tmp_path / "tasks"
    shutil.copytree(TASKS_DIR / "custom-dev", target / "custom-dev")
    # The copy's relative repo urls point at ../../../examples: keep them resolvable, and
    # allowed (a folder beside the tasks folder is only when TASK_PATH_ROOTS names it).
    shutil.copytree(TASKS_DIR.parent / "examples", tmp_path / "examples")
    settings.TASK_PATH_ROOTS = [tmp_path / "examples"]
    return target


def test_it_imports_the_example_suite(db, tasks_copy):
    report = tasks_import(directory=tasks_copy)
    assert len(report.created) == 7
    suite = Suite.objects.get(name="custom-dev")
    task = Task.objects.get(suite=suite, task_id="toy_fail_pytest")
    assert task.labels == ["toy", "python"]
    assert task.timeout_sec == 60
    assert task.spec["run"]["command"].endswith("tests/test_calc.py")
    assert task.gold_patch.startswith("diff --git")
    assert list(
        Task.objects.for_suite("custom-dev").with_label("flaky").values_list("task_id", flat=True)
    ) == ["toy_flaky"]


def test_a_reimport_of_the_same_files_changes_nothing(db, tasks_copy):
    tasks_import(directory=tasks_copy)
    before = list(Task.objects.values_list("id", "revision", "updated_at"))
    report = tasks_import(directory=tasks_copy)
    assert len(report.unchanged) == 7 and not report.created and not report.updated
    assert list(Task.objects.values_list("id", "revision", "updated_at")) == before


def test_a_reimport_updates_a_changed_task_and_keeps_its_attempts(db, tasks_copy):
    from runs.models import Attempt, ModelConfig, Run

    tasks_import(directory=tasks_copy)
    task = Task.objects.get(task_id="toy_fail_pytest")
    model = ModelConfig.objects.create(name="scripted", agent_variant="scripted")
    run = Run.objects.create(suite=task.suite, model_config=model)
    attempt = Attempt.objects.create(
        run=run, task=task, suite=task.suite, model_config=model, task_revision=task.revision
    )
    path = tasks_copy / "custom-dev/toy_fail_pytest/task.yaml"
    path.write_text(path.read_text().replace("timeout_sec: 60", "timeout_sec: 90"))

    report = tasks_import(directory=tasks_copy)

    assert report.updated == ["custom-dev/toy_fail_pytest"]
    task.refresh_from_db()
    assert task.timeout_sec == 90 and task.revision == 2
    revision = TaskRevision.objects.get(task=task, revision=2)
    assert "timeout_sec" in revision.changed_fields
    assert revision.previous_values["timeout_sec"] == 60
    attempt.refresh_from_db()
    assert attempt.task_id == task.id and attempt.is_stale_revision


def test_a_broken_file_imports_nothing(db, tasks_copy):
    tasks_import(directory=tasks_copy)
    good = tasks_copy / "custom-dev/toy_fail_pytest/task.yaml"
    good.write_text(good.read_text().replace("timeout_sec: 60", "timeout_sec: 75"))
    broken = tasks_copy / "custom-dev/toy_no_tests/task.yaml"
    broken.write_text(broken.read_text() + "unexpected: true\n")

    with pytest.raises(TaskSpecError) as info:
        tasks_import(directory=tasks_copy)

    assert [(p.field) for p in info.value.problems] == ["unexpected"]
    assert Task.objects.get(task_id="toy_fail_pytest").timeout_sec == 60


def test_upsert_outcomes_are_named(db):
    assert {o.value for o in Upsert} == {"created", "updated", "unchanged"}
