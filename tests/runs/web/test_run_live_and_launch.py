"""The run page lives until the run is final (its polled fragment carries the attempts table),
and staff launch runs from the suite page; the admin's launch message links to the runs.
Personas: alice is staff, bob is not."""

from __future__ import annotations

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.urls import reverse

from benchsite.accounts.models import AuditEvent
from runs.models import Attempt, AttemptStatus, ModelConfig, Run, RunStatus
from runs.services import run_launch
from tests.support.orchestration_fixtures import finish

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(custom_dev, scripted, broker, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        run = run_launch(suite=custom_dev, model_config=scripted, samples=2, labels=["python"])
    broker.drain()
    return run


def fragment(client, run: Run) -> str:
    response = client.get(reverse("run-progress", args=[run.public_id]))
    assert response.status_code == 200
    return response.content.decode()


def test_the_polled_fragment_carries_the_attempts_table_until_the_run_is_final(client, run):
    body = fragment(client, run)
    assert 'data-final="0"' in body and 'id="run-attempts"' in body
    assert body.count('data-status="queued"') == 2
    first, second = run.attempts.order_by("sample_index")
    Attempt.objects.filter(pk=first.pk).update(status=AttemptStatus.RUNNING)
    body = fragment(client, run)
    assert body.count('data-status="running"') == 1 and "updates live" in body
    finish(first, None)
    finish(second, "TESTS_FAILED")
    run.refresh_from_db()
    assert run.status == RunStatus.FINISHED
    body = fragment(client, run)
    assert 'data-final="1"' in body and body.count('data-status="finished"') == 2
    assert "TESTS_FAILED" in body and '<span class="ok">resolved</span>' in body
    assert "updates live" not in body and "finished 20" in body


def test_the_run_page_polls_the_page_of_attempts_it_shows(client, run):
    body = client.get(reverse("run-detail", args=[run.public_id]) + "?page=1").content.decode()
    assert f'data-poll="{reverse("run-progress", args=[run.public_id])}"' in body
    assert body.count('id="run-attempts"') == 1


def test_staff_launch_a_run_from_the_suite_page(
    client,
    alice,
    custom_dev,
    scripted,
    broker,
    django_capture_on_commit_callbacks,
):
    client.force_login(alice)
    page = client.get(reverse("suite-detail", args=[custom_dev.name])).content.decode()
    assert 'id="launch-run"' in page and f'value="{scripted.slug}"' in page
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            reverse("suite-launch", args=[custom_dev.name]),
            {"model": scripted.slug, "samples": 2, "labels": "python"},
        )
    run = Run.objects.get()
    assert response.status_code == 302 and response["Location"] == run.get_absolute_url()
    assert run.samples == 2 and run.attempts.count() == 2 and run.created_by == alice
    assert len(broker.attempt_ids()) == 2
    event = AuditEvent.objects.get(action="run.launch")
    assert event.via == "page" and event.object_ids == [str(run.public_id)]
    page = client.get(response["Location"]).content.decode()
    assert "Launched a run of 2 attempt(s)" in page


def test_a_launch_that_selects_nothing_says_why_and_stores_nothing(
    client,
    alice,
    custom_dev,
    scripted,
):
    client.force_login(alice)
    response = client.post(
        reverse("suite-launch", args=[custom_dev.name]),
        {"model": scripted.slug, "samples": 1, "labels": "no-such-label"},
        follow=True,
    )
    assert response.redirect_chain[-1][0] == reverse("suite-detail", args=[custom_dev.name])
    assert "Nothing launched." in response.content.decode()
    assert "no task of suite custom-dev matches the selection" in response.content.decode()
    bad = client.post(
        reverse("suite-launch", args=[custom_dev.name]),
        {"model": scripted.slug, "samples": 0},
        follow=True,
    )
    assert "samples:" in bad.content.decode()
    assert not Run.objects.exists()


def test_only_staff_see_and_use_the_launch_form(client, bob, custom_dev, scripted):
    client.force_login(bob)
    page = client.get(reverse("suite-detail", args=[custom_dev.name])).content.decode()
    assert 'id="launch-run"' not in page
    response = client.post(
        reverse("suite-launch", args=[custom_dev.name]), {"model": scripted.slug, "samples": 1}
    )
    assert response.status_code == 403
    assert not Run.objects.exists()


def test_the_admins_launched_message_links_to_each_run(
    client,
    alice,
    custom_dev,
    scripted,
    broker,
    django_capture_on_commit_callbacks,
):
    ModelConfig.objects.create(name="<b>nop</b>", agent_variant="nop")
    client.force_login(alice)
    url = reverse("admin:runs_modelconfig_changelist")
    selected = {
        "action": "launch_runs",
        ACTION_CHECKBOX_NAME: list(ModelConfig.objects.values_list("pk", flat=True)),
    }
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            url, selected | {"apply": "Launch", "suite": custom_dev.pk, "samples": 1}, follow=True
        )
    body = response.content.decode()
    assert "Launched 2 run(s):" in body
    for run in Run.objects.all():
        assert f'href="{run.get_absolute_url()}"' in body
    assert "&lt;b&gt;nop&lt;/b&gt; on custom-dev" in body


def test_a_fail_fast_stop_shows_up_in_the_live_fragment(client, run):
    assert 'id="run-stopped"' not in fragment(client, run)
    Run.objects.filter(pk=run.pk).update(
        fail_fast_code="LLM_ERROR", fail_fast_reason="3 consecutive <b>LLM_ERROR</b>"
    )
    body = fragment(client, run)
    assert "Stopped by fail-fast: <code>LLM_ERROR</code>" in body
    assert "&lt;b&gt;LLM_ERROR&lt;/b&gt;" in body
