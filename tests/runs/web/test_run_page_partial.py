"""A partial run's page and its attempts, read as a researcher does (issue 29, items 6 and 8):
progress over the attempts made, the "not attempted" stubs behind a filter of their own on the
run page, the attempt list (page, API, CSV) and previous / next, and no "$0.0000" for an
attempt that has not run yet."""

from __future__ import annotations

import csv
import io
import re

import pytest
from django.urls import reverse

from runs.models import AttemptStatus, RunSource, RunStatus
from tasks_app.models import Task
from tests.support.pages_fixtures import make_attempt, make_model, make_run, make_suite

pytestmark = pytest.mark.django_db


@pytest.fixture
def partial():
    """Two of five tasks attempted (one resolved, one failed); three never attempted."""
    suite = make_suite("part", tasks=5)
    run = make_run(suite, make_model("gem100"), source=RunSource.PUBLISHED)
    tasks = list(Task.objects.for_suite(suite).order_by("task_id"))
    make_attempt(run, tasks[0], None)
    make_attempt(run, tasks[1], "TESTS_FAILED")
    for task in tasks[2:]:
        make_attempt(run, task, missing=True)
    return run


def rows(body: str) -> list[str]:
    table = body.split('id="run-attempts"', 1)[1].split("</table>", 1)[0]
    return re.findall(r'data-status="([a-z_]+)"', table)


def test_the_progress_counts_the_attempts_made_and_says_the_run_is_partial(client, partial):
    body = client.get(reverse("run-detail", args=[partial.public_id])).content.decode()
    assert "2 of 2 attempts final (100%)" in body
    assert "5 of 5" not in body
    assert "partial: 2 of 5 tasks attempted" in body


def test_the_attempts_table_lists_the_attempts_made_unless_asked(client, partial):
    url = reverse("run-detail", args=[partial.public_id])
    assert rows(client.get(url).content.decode()) == ["finished", "finished"]
    assert rows(client.get(url + "?show=missing").content.decode()) == ["missing"] * 3
    assert len(rows(client.get(url + "?show=all").content.decode())) == 5
    shown = client.get(url).content.decode()
    assert 'href="?show=missing">the 3 not attempted</a>' in shown


def test_a_whole_run_lists_every_attempt_without_a_filter(client):
    suite = make_suite("whole", tasks=2)
    run = make_run(suite, make_model("full"))
    for task in Task.objects.for_suite(suite):
        make_attempt(run, task, None)
    body = client.get(reverse("run-detail", args=[run.public_id])).content.decode()
    assert "2 of 2 attempts final (100%)" in body and "partial:" not in body
    assert 'id="run-attempts-show"' not in body and len(rows(body)) == 2


def test_the_attempt_list_filters_the_attempts_made_on_page_api_and_csv(client, partial):
    page = reverse("suite-attempts", args=["part"])
    made = client.get(page + "?attempted=true").content.decode()
    assert made.count('class="attempt-link"') == 2
    stubs = client.get(page + "?attempted=false").content.decode()
    assert stubs.count('class="attempt-link"') == 3
    api = client.get("/api/attempts", {"suite": "part", "attempted": "true"}).json()
    assert api["count"] == 2 and {a["status"] for a in api["items"]} == {"finished"}
    api = client.get("/api/attempts", {"suite": "part", "attempted": "false"}).json()
    assert api["count"] == 3
    exported = client.get("/api/attempts", {"suite": "part", "attempted": "true", "format": "csv"})
    lines = list(csv.DictReader(io.StringIO(b"".join(exported.streaming_content).decode())))
    assert [r["status"] for r in lines] == ["finished", "finished"]


def test_previous_and_next_within_a_run_skip_the_not_attempted_stubs(client, bob, partial):
    client.force_login(bob)
    first, second = partial.attempts.exclude(status=AttemptStatus.MISSING).order_by("task__task_id")
    body = client.get(reverse("attempt-detail", args=[first.public_id])).content.decode()
    assert "1 of 2" in body
    assert reverse("attempt-detail", args=[second.public_id]) in body
    stub = partial.attempts.filter(status=AttemptStatus.MISSING).order_by("task__task_id")[0]
    body = client.get(reverse("attempt-detail", args=[stub.public_id])).content.decode()
    assert "1 of 5" not in body and "of 5" in body  # a stub walks its whole run


def test_an_attempt_that_has_not_run_shows_no_cost(client, bob):
    suite = make_suite("waits", tasks=1)
    run = make_run(suite, make_model("waiting"), status=RunStatus.QUEUED)
    task = Task.objects.get(suite=suite)
    attempt = make_attempt(
        run, task, status=AttemptStatus.QUEUED, cost_usd=0, tokens_in=0, tokens_out=0
    )
    body = client.get(reverse("run-detail", args=[run.public_id])).content.decode()
    assert "$0.0000" not in body
    listed = client.get(reverse("suite-attempts", args=["waits"])).content.decode()
    assert "$0.0000" not in listed
    api = client.get("/api/attempts", {"suite": "waits"}).json()["items"][0]
    assert api["cost_usd"] is None and api["tokens_in"] is None
    listing_csv = client.get(reverse("suite-attempts", args=["waits"]), {"format": "csv"})
    text = (
        b"".join(listing_csv.streaming_content).decode()
        if listing_csv.streaming
        else listing_csv.content.decode()
    )
    (row,) = csv.DictReader(io.StringIO(text))
    assert (row["cost_usd"], row["tokens_in"], row["steps"]) == ("", "", "")
    client.force_login(bob)
    detail = client.get(reverse("attempt-detail", args=[attempt.public_id])).content.decode()
    assert "$0.0000" not in detail and "none recorded yet" in detail
    # Side by side with a finished attempt: the waiting side's cost and tokens are "—" too.
    done = make_attempt(
        run, task, sample=1, status=AttemptStatus.FINISHED, cost_usd=0.5, tokens_in=10
    )
    vs = client.get(reverse("attempt-vs", args=[attempt.public_id, done.public_id]))
    sides = re.findall(r"<dt>Cost</dt><dd>([^<]*)</dd>", vs.content.decode())
    assert sides == ["—", "$0.5000"]


def test_a_run_launched_from_the_page_or_the_api_keeps_its_sandbox(client, alice):
    suite = make_suite("launch", tasks=2)
    config = make_model("scripted-agent", variant="scripted")
    client.force_login(alice)
    page = client.get(reverse("suite-detail", args=["launch"])).content.decode()
    assert 'name="backend"' in page and "bubblewrap" in page
    assert "scripted-agent (scripted)" in page  # the configuration says which agent it runs
    response = client.post(
        reverse("suite-launch", args=["launch"]),
        {"model": config.slug, "samples": 1, "backend": "bwrap"},
    )
    assert response.status_code == 302
    run = suite.runs.get()
    assert run.backend == "bwrap"
    body = client.get(reverse("run-detail", args=[run.public_id])).content.decode()
    assert "bubblewrap" in body
    api = client.get(f"/api/runs/{run.public_id}").json()
    assert api["backend"] == "bwrap"
