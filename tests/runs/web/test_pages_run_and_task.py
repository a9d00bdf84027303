"""Run page with live progress and staff actions; suite and task pages."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.urls import reverse
from django.utils import timezone

from runs.imports.run_import import run_folder_import
from runs.models import AttemptStatus, Run, RunSource, RunStatus
from tasks_app.models import Task
from tests.runs.imports.test_run_import import MINI
from tests.support.pages_fixtures import make_attempt, make_model, make_run, make_suite

pytestmark = pytest.mark.django_db


@pytest.fixture
def running():
    suite = make_suite("live", tasks=3)
    run = make_run(suite, make_model("runner"), status=RunStatus.RUNNING)
    tasks = list(Task.objects.for_suite(suite).order_by("task_id"))
    make_attempt(run, tasks[0], None)
    make_attempt(run, tasks[1], "SANDBOX_ERROR")
    make_attempt(run, tasks[2], None, status=AttemptStatus.RUNNING)
    return run


def test_the_progress_fragment_counts_by_status_and_reason(client, running):
    response = client.get(reverse("run-progress", args=[running.public_id]))
    assert response.status_code == 200
    body = response.content.decode()
    assert 'data-final="0"' in body
    assert "2 of 3 attempts final (67%)" in body
    assert "SANDBOX_ERROR" in body and "infrastructure" in body


def test_the_run_page_polls_the_fragment_until_final(client, running):
    body = client.get(reverse("run-detail", args=[running.public_id])).content.decode()
    assert f'data-poll="{reverse("run-progress", args=[running.public_id])}"' in body
    assert "js/poll.js" in body
    running.status = RunStatus.FINISHED
    running.save(update_fields=["status"])
    fragment = client.get(reverse("run-progress", args=[running.public_id])).content.decode()
    assert 'data-final="1"' in fragment


def buttons(body: str) -> dict[str, str]:
    """The run page's staff buttons: form action -> button label."""
    return dict(re.findall(r'<form method="post" action="([^"]+)">.*?<button[^>]*>([^<]*)<', body))


def url(name: str, run) -> str:
    return reverse(name, args=[run.public_id])


def test_staff_see_the_buttons_that_can_act_on_the_run_and_others_see_none(
    client, running, alice, bob
):
    # Running, one infrastructure failure, one attempt still running: cancel only (a retry
    # waits until nothing of the run is left to run).
    client.force_login(bob)
    body = client.get(url("run-detail", running)).content.decode()
    assert 'id="run-actions"' not in body and buttons(body) == {}
    client.force_login(alice)
    body = client.get(url("run-detail", running)).content.decode()
    assert buttons(body) == {url("run-cancel", running): "Cancel"}
    # The live fragment carries them: they change as the run does.
    fragment = client.get(url("run-progress", running)).content.decode()
    assert buttons(fragment) == buttons(body)
    running.attempts.filter(status=AttemptStatus.RUNNING).update(
        status=AttemptStatus.FINISHED, finished_at=timezone.now()
    )
    assert buttons(client.get(url("run-progress", running)).content.decode()) == {
        url("run-cancel", running): "Cancel",
        url("run-retry", running): "Retry failed (1)",
    }

    # Queued attempts waiting their turn are no reason to "Resume"; ones nothing has moved
    # for five minutes (the broker lost them, the workers are down) are.
    queued = make_run(running.suite, make_model("waiting"), status=RunStatus.QUEUED)
    for task in Task.objects.for_suite(running.suite):
        make_attempt(queued, task, status=AttemptStatus.QUEUED)
    assert buttons(client.get(url("run-detail", queued)).content.decode()) == {
        url("run-cancel", queued): "Cancel",
    }
    queued.attempts.update(queued_at=timezone.now() - dt.timedelta(minutes=6))
    assert buttons(client.get(url("run-detail", queued)).content.decode()) == {
        url("run-cancel", queued): "Cancel",
        url("run-resume", queued): "Resume (3 queued)",
    }


def test_a_finished_imported_run_shows_no_button_and_evaluate_only_what_waits(
    client,
    alice,
    artifacts_root,
):
    client.force_login(alice)
    run_folder_import(path=MINI, suite_name="verified-mini", model_name="mini")
    imported = Run.objects.get(model_config__name="mini")
    assert imported.is_final
    body = client.get(url("run-detail", imported)).content.decode()
    assert 'id="run-actions"' not in body and buttons(body) == {}

    predictions = make_run(imported.suite, make_model("preds"), source=RunSource.PREDICTIONS)
    tasks = list(Task.objects.for_suite(imported.suite).order_by("task_id"))
    make_attempt(predictions, tasks[0], "TESTS_FAILED")
    for task in tasks[1:3]:
        make_attempt(predictions, task, status=AttemptStatus.NOT_EVALUATED)
    body = client.get(url("run-detail", predictions)).content.decode()
    assert buttons(body) == {url("run-evaluate", predictions): "Evaluate (2)"}


def test_the_task_page_lists_every_attempt_and_marks_stale_ones(client, running):
    task = Task.objects.for_suite(running.suite).order_by("task_id").first()
    make_attempt(make_run(running.suite, make_model("second")), task, "TESTS_FAILED")
    Task.objects.filter(id=task.id).update(
        revision=2, problem_statement="<script>window.__xss=1</script>"
    )
    response = client.get(reverse("task-detail", args=[running.suite.name, task.task_id]))
    body = response.content.decode()
    assert len(response.context["attempts"]) == 2
    assert body.count("stale r1") == 2
    assert "&lt;script&gt;window.__xss=1&lt;/script&gt;" in body
    assert "<script>window.__xss=1</script>" not in body


def test_the_suite_page_links_its_results(client, running):
    body = client.get(reverse("suite-detail", args=[running.suite.name])).content.decode()
    for name in ("suite-leaderboard", "suite-compare", "suite-taxonomy", "suite-attempts"):
        assert reverse(name, args=[running.suite.name]) in body
    assert "task-002" in body


def test_home_links_every_suites_leaderboard(client, running):
    body = client.get(reverse("home")).content.decode()
    assert reverse("suite-leaderboard", args=["live"]) in body


def test_run_and_task_pages_use_a_fixed_number_of_queries(client, db):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    counts = []
    for name, tasks in (("qsmall", 2), ("qlarge", 30)):
        suite = make_suite(name, tasks=tasks)
        run = make_run(suite, make_model(f"{name}-model"), samples=2)
        all_tasks = list(Task.objects.for_suite(suite).order_by("task_id"))
        for task in all_tasks:
            make_attempt(run, task, None, sample=0)
            make_attempt(run, task, "TESTS_FAILED", sample=1)
        for other in range(1 if tasks == 2 else 5):
            make_attempt(make_run(suite, make_model(f"{name}-o{other}")), all_tasks[0], None)
        measured = []
        for url in (
            reverse("run-detail", args=[run.public_id]),
            reverse("run-progress", args=[run.public_id]),
            reverse("task-detail", args=[name, all_tasks[0].task_id]),
        ):
            with CaptureQueriesContext(connection) as ctx:
                assert client.get(url).status_code == 200
            measured.append(len(ctx))
        counts.append(measured)
    assert counts[0] == counts[1]
