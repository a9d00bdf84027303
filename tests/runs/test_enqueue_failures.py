"""A broker that fails while a launch sends its messages never fails the launch after its rows
committed: one more try on a fresh producer, then the attempts stay queued for the reaper
(kombu's SQL transport on a busy SQLite loses its channel mid-publish: AttributeError)."""

from __future__ import annotations

import logging

import pytest

from runs.models import AttemptStatus
from runs.services import attempts_enqueue, run_launch
from runs.workers import tasks
from tests.support.pages_fixtures import make_model, make_suite

pytestmark = pytest.mark.django_db


@pytest.fixture
def queued_run(settings):
    settings.CELERY_TASK_ALWAYS_EAGER = False
    suite = make_suite("enq", tasks=3)
    return suite, make_model("enq-agent", variant="scripted")


def test_a_send_that_fails_once_is_sent_again(
    monkeypatch, queued_run, django_capture_on_commit_callbacks
):
    sent: list[int] = []
    failed = []

    def apply_async(*, args, **_):
        if not failed:
            failed.append(args[0])
            raise AttributeError("'NoneType' object has no attribute 'client'")
        sent.append(args[0])

    monkeypatch.setattr(tasks.attempt_run, "apply_async", apply_async)
    suite, model = queued_run
    with django_capture_on_commit_callbacks(execute=True):
        run = run_launch(suite=suite, model_config=model)
    ids = sorted(run.attempts.values_list("id", flat=True))
    assert sorted(sent) == ids and len(failed) == 1  # every message sent, the failed one again


def test_a_broker_that_keeps_failing_leaves_the_attempts_queued(monkeypatch, queued_run, caplog):
    def apply_async(**_):
        raise OSError("broker gone")

    monkeypatch.setattr(tasks.attempt_run, "apply_async", apply_async)
    suite, model = queued_run
    run = run_launch(suite=suite, model_config=model)
    ids = list(run.attempts.values_list("id", flat=True))
    with caplog.at_level(logging.WARNING, logger="runs.services"):
        attempts_enqueue(ids)  # no exception reaches the caller
    assert set(run.attempts.values_list("status", flat=True)) == {AttemptStatus.QUEUED}
    assert "3 attempt message(s) not sent" in caplog.text
