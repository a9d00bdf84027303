"""The run page's staff buttons (cancel, retry, resume) and the admin actions over runs and
model configurations. Personas: alice is staff, bob is not."""

from __future__ import annotations

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.test import Client
from django.urls import reverse

from runs.models import AttemptStatus, ModelConfig, Run, RunStatus
from runs.services import run_launch
from tests.support.orchestration_fixtures import finish


@pytest.fixture
def run(custom_dev, scripted, broker, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        run = run_launch(suite=custom_dev, model_config=scripted, task_ids=["toy_fail_pytest"])
    broker.drain()
    return run


def post(client: Client, name: str, run: Run, *, follow: bool = False):
    return client.post(reverse(name, args=[run.public_id]), follow=follow)


def test_staff_can_cancel_a_run_from_its_page(
    client, alice, run, django_capture_on_commit_callbacks
):
    client.force_login(alice)
    with django_capture_on_commit_callbacks(execute=True):
        response = post(client, "run-cancel", run)
    assert response.status_code == 302 and response["Location"] == run.get_absolute_url()
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED
    assert run.attempts.get().status == AttemptStatus.CANCELLED
    messages = [str(m) for m in response.wsgi_request._messages]
    assert messages == ["Run cancelled: 1 queued attempt(s) cancelled, running ones told to stop."]


def test_staff_can_retry_and_resume(client, alice, run, broker, django_capture_on_commit_callbacks):
    finish(run.attempts.get(), "SANDBOX_ERROR", "docker: connection refused")
    client.force_login(alice)
    with django_capture_on_commit_callbacks(execute=True):
        response = post(client, "run-retry", run)
    assert response.status_code == 302
    assert run.attempts.get().status == AttemptStatus.QUEUED
    assert broker.attempt_ids() == [run.attempts.get().id]
    with django_capture_on_commit_callbacks(execute=True):
        post(client, "run-resume", run)
    assert broker.attempt_ids() == [run.attempts.get().id]


def test_a_plain_user_cannot_control_a_run(client, bob, run):
    client.force_login(bob)
    for name in ("run-cancel", "run-retry", "run-resume"):
        response = post(client, name, run)
        assert response.status_code == 403
        assert "needs a staff account" in response.content.decode()
    run.refresh_from_db()
    assert run.status == RunStatus.QUEUED


def test_controls_need_post_and_a_csrf_token(alice, run):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    assert client.get(reverse("run-cancel", args=[run.public_id])).status_code == 405
    assert post(client, "run-cancel", run).status_code == 403
    run.refresh_from_db()
    assert run.status == RunStatus.QUEUED


def test_admin_actions_cancel_runs(client, alice, run, django_capture_on_commit_callbacks):
    client.force_login(alice)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            reverse("admin:runs_run_changelist"),
            {"action": "cancel_runs", ACTION_CHECKBOX_NAME: [run.pk]},
        )
    assert response.status_code == 302
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED


def test_admin_launches_runs_of_selected_model_configurations(
    client,
    alice,
    custom_dev,
    scripted,
    broker,
    django_capture_on_commit_callbacks,
):
    other = ModelConfig.objects.create(name="nop", agent_variant="nop")
    client.force_login(alice)
    url = reverse("admin:runs_modelconfig_changelist")
    selected = {"action": "launch_runs", ACTION_CHECKBOX_NAME: [scripted.pk, other.pk]}
    form = client.post(url, selected)
    assert form.status_code == 200
    assert b"Launch one run per model configuration" in form.content
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            url,
            selected
            | {"apply": "Launch", "suite": custom_dev.pk, "samples": 2, "labels": "python"},
        )
    assert response.status_code == 302
    runs = Run.objects.order_by("model_config__name")
    assert [r.model_config.name for r in runs] == ["nop", "scripted"]
    assert all(r.attempts.count() == 2 for r in runs)
    assert len(broker.attempt_ids()) == 4


def test_the_run_page_shows_the_buttons_to_staff_and_the_outcome_after(client, alice, bob, run):
    cancel_url = reverse("run-cancel", args=[run.public_id])
    client.force_login(bob)
    assert cancel_url not in client.get(run.get_absolute_url()).content.decode()
    client.force_login(alice)
    assert cancel_url in client.get(run.get_absolute_url()).content.decode()
    page = client.post(cancel_url, follow=True)
    assert page.status_code == 200
    assert "Run cancelled: 1 queued attempt(s) cancelled" in page.content.decode()


def test_page_controls_are_audited(client, alice, run, django_capture_on_commit_callbacks):
    from benchsite.accounts.models import AuditEvent

    finish(run.attempts.get(), "SANDBOX_ERROR", "docker: connection refused")
    client.force_login(alice)
    with django_capture_on_commit_callbacks(execute=True):
        post(client, "run-retry", run)
        post(client, "run-resume", run)
        post(client, "run-cancel", run)
    events = list(AuditEvent.objects.order_by("id").values_list("action", "via", "actor_name"))
    assert events == [
        ("run.retry", "page", "alice"),
        ("run.resume", "page", "alice"),
        ("run.cancel", "page", "alice"),
    ]
    assert all(str(run.public_id) in str(e.object_ids) for e in AuditEvent.objects.all())
