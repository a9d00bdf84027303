"""An attempt's outcome badge says what scores count it as (``Attempt.outcome``, which is
``runs.results.scoring.attempt_outcome``) on the attempt page, its list of other attempts, the
two-attempt view, the attempt list and the task page: a queued, running or not-evaluated
attempt is never shown as failed."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from runs.models import AttemptStatus, RunSource
from tasks_app.models import Task
from tests.support.pages_fixtures import make_attempt, make_model, make_run, make_suite

pytestmark = pytest.mark.django_db

# (failure reason, status, missing) -> the badge's outcome and text.
CASES = {
    "resolved": ((None, AttemptStatus.FINISHED, False), "resolved"),
    "failed": (("TESTS_FAILED", AttemptStatus.FINISHED, False), "failed"),
    "infra": (("SANDBOX_ERROR", AttemptStatus.FINISHED, False), "infrastructure failure"),
    "cancelled": ((None, AttemptStatus.CANCELLED, False), "cancelled"),
    "missing": ((None, AttemptStatus.MISSING, True), "not attempted"),
    "queued": ((None, AttemptStatus.QUEUED, False), "queued"),
    "running": ((None, AttemptStatus.RUNNING, False), "running"),
    "not_evaluated": ((None, AttemptStatus.NOT_EVALUATED, False), "not evaluated"),
}
OUTCOME = {
    "resolved": "resolved",
    "failed": "failed",
    "infra": "infra",
    "cancelled": "infra",
    "missing": "missing",
    "queued": "pending",
    "running": "pending",
    "not_evaluated": "not_evaluated",
}


@pytest.fixture
def attempts(artifacts_root):
    """One attempt of each kind, all on the same task."""
    suite = make_suite("badges", tasks=1)
    task = Task.objects.get(suite=suite)
    out = {}
    for name, ((reason, status, missing), _) in CASES.items():
        source = RunSource.PUBLISHED if missing else RunSource.HARNESS
        run = make_run(suite, make_model(f"model-{name}"), source=source)
        out[name] = make_attempt(run, task, reason, status=status, missing=missing)
    return out


def badges(html: str) -> list[tuple[str, str]]:
    """(data-outcome, text) of every outcome badge in ``html``."""
    pattern = r'<span class="badge outcome [^"]*" data-outcome="([^"]*)"[^>]*>([^<]*)<'
    return re.findall(pattern, html)


def test_it_badges_each_attempt_page_with_the_outcome_scores_count(client, attempts):
    for name, attempt in attempts.items():
        assert attempt.outcome == OUTCOME[name]
        body = client.get(reverse("attempt-detail", args=[attempt.public_id])).content.decode()
        header = body[body.index("<h1>") : body.index("</p>", body.index("<h1>"))]
        assert badges(header) == [(OUTCOME[name], CASES[name][1])], name


def test_the_two_attempt_view_never_calls_a_pending_attempt_failed(client, attempts):
    for name in ("queued", "running", "not_evaluated", "resolved", "infra", "missing"):
        url = reverse("attempt-vs", args=[attempts["failed"].public_id, attempts[name].public_id])
        shown = badges(client.get(url).content.decode())
        assert shown == [("failed", "failed"), (OUTCOME[name], CASES[name][1])], name


def test_the_lists_of_attempts_use_the_same_badge(client, attempts):
    failed = attempts["failed"]
    # The attempt page lists the task's other finished attempts.
    body = client.get(reverse("attempt-detail", args=[failed.public_id])).content.decode()
    others = body[body.index("</h1>") :]
    others = others[others.index("</p>") :]
    # Finished ones only: a missing instance was never attempted.
    finished = {"resolved", "infra"}
    assert sorted(badges(others)) == sorted((OUTCOME[n], CASES[n][1]) for n in finished)

    task = failed.task
    page = client.get(reverse("task-detail", args=[task.suite.name, task.task_id]))
    assert sorted(badges(page.content.decode())) == sorted((OUTCOME[n], CASES[n][1]) for n in CASES)
