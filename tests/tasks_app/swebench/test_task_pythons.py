"""The Python a SWE-bench task's specification asks for and the one used here are stored on
the task at import (issue 29: pages read them there instead of importing the official harness
in a request), and an import of unchanged instances fills them without a new revision."""

from __future__ import annotations

import pytest

from sandbox.environments.envspec import ENV_APPROXIMATE_LABEL, approximate_pythons
from tasks_app.models import Task, TaskRevision
from tasks_app.swebench.importer import swebench_import
from tests.support.swebench_fixtures import VERIFIED

pytestmark = pytest.mark.django_db


def test_the_import_stores_the_python_asked_and_used_on_each_task():
    swebench_import(source=VERIFIED, suite_name="verified-sample")
    tasks = list(Task.objects.filter(suite__name="verified-sample"))
    assert tasks
    for task in tasks:
        want = approximate_pythons(task.spec["repo"], str(task.spec["version"]))
        assert (task.python_asked, task.python_used) == want
        assert task.approximate_environment == (ENV_APPROXIMATE_LABEL in task.labels)


def test_a_reimport_fills_what_tasks_imported_before_lack_without_a_revision():
    swebench_import(source=VERIFIED, suite_name="verified-sample")
    Task.objects.filter(suite__name="verified-sample").update(python_asked="", python_used="")
    revisions = TaskRevision.objects.count()

    report = swebench_import(source=VERIFIED, suite_name="verified-sample")

    assert not report.updated and report.unchanged
    assert TaskRevision.objects.count() == revisions
    assert not Task.objects.filter(suite__name="verified-sample", python_asked="").exists()


def test_the_task_page_says_which_python_and_how_to_build_it(client):
    from django.urls import reverse

    swebench_import(source=VERIFIED, suite_name="verified-sample")
    tasks = Task.objects.filter(suite__name="verified-sample")
    approximate = next(t for t in tasks if t.approximate_environment)
    exact = next(t for t in tasks if t.python_asked and not t.approximate_environment)

    def badge(task) -> str:
        url = reverse("task-detail", args=["verified-sample", task.task_id])
        body = client.get(url).content.decode()
        assert f"ab swebench build verified-sample --instance {task.task_id}" in body
        return body.split('id="env-badge"', 1)[1].split("</span>", 1)[0]

    shown = badge(approximate)
    assert f"approximate: Python {approximate.python_used} for {approximate.python_asked}" in shown
    assert f"exact: Python {exact.python_asked}" in badge(exact)
