"""The leaderboard's notices, columns and partial marker concern the rows shown (issue 29).

* The approximate-environment notice lists the selection's approximate instances that rows
  graded here attempted: none when every row is a published result (graded elsewhere), none
  on the ``labels=env-exact`` view, none for an own run that attempted only exact ones; it
  reads the Python asked and used stored on the task, says "not built on this machine" as the
  task page does, and is one closed <details>.
* Usage columns that no row has a figure for are not shown.
* A ranked row that attempted part of its denominator is "partial: n of N tasks" on the page,
  ``status: partial`` (not tied) in the API and CSV, with a link to its comparison with the
  leader.
* The request never imports the official harness (``swebench``): checked in a new process.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import textwrap

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from runs.models import AgentVariant, RunSource
from tasks_app.models import Task
from tests.conftest import REPO_ROOT
from tests.support.pages_fixtures import make_attempt, make_model, make_run, make_suite

pytestmark = pytest.mark.django_db

APPROX = ["swebench", "env-approximate"]
EXACT = ["swebench", "env-exact"]


def env_suite():
    """Four SWE-bench tasks: 0 and 1 approximate (Python 3.9 for 3.6), 2 and 3 exact; a
    published run on all four (no usage) that leads."""
    suite = make_suite("env", tasks=4, labels={0: APPROX, 1: APPROX, 2: EXACT, 3: EXACT})
    for task in Task.objects.for_suite(suite):
        approximate = "env-approximate" in task.labels
        task.source = "swebench"
        task.spec = {"repo": "pydicom/pydicom", "version": "1.3" if approximate else "2.1"}
        task.python_asked, task.python_used = ("3.6", "3.9") if approximate else ("3.8", "3.8")
        task.save()
    published = make_run(
        suite, make_model("published", AgentVariant.EXTERNAL), source=RunSource.PUBLISHED
    )
    for task in tasks(suite):
        make_attempt(
            published, task, None, cost_usd=None, tokens_in=None, tokens_out=None, duration_sec=None
        )
    return suite


def tasks(suite) -> list[Task]:
    return list(Task.objects.for_suite(suite).order_by("task_id"))


def own_run(suite, on: list[int], name: str = "own", reason: str | None = "TESTS_FAILED"):
    run = make_run(suite, make_model(name))
    for i in on:
        make_attempt(run, tasks(suite)[i], reason)
    return run


def page(client, suite, **params) -> str:
    response = client.get(reverse("suite-leaderboard", args=[suite.name]), params)
    assert response.status_code == 200
    return response.content.decode()


def test_the_notice_is_left_out_when_every_row_is_graded_elsewhere(client):
    suite = env_suite()
    body = page(client, suite)
    assert 'id="approximate-env"' not in body


def test_the_notice_lists_only_what_rows_graded_here_attempted(client):
    suite = env_suite()
    own_run(suite, on=[2, 3])  # exact instances only
    assert 'id="approximate-env"' not in page(client, suite)

    own_run(suite, on=[0], name="own-2")  # one approximate instance
    body = page(client, suite)
    notice = body[body.index('<details class="notice" id="approximate-env">') :]
    notice = notice[: notice.index("</details>")]
    assert "<summary><strong>1 instance(s) graded here on an approximate environment" in notice
    assert "(0 built on this machine)" in notice
    first = tasks(suite)[0].task_id
    assert f"{first}</a>: Python 3.9 for 3.6, not validated yet: counted " in notice
    assert "(not built on this machine)" in notice
    assert tasks(suite)[1].task_id not in notice  # no row graded here attempted it
    assert "were built" not in body
    # Its own "Exact environments only" view: no approximate instance, no notice.
    assert 'id="approximate-env"' not in page(client, suite, labels="env-exact")


def test_the_notice_label_matches_the_import_module():
    from runs.web import board_notices
    from sandbox.environments.envspec import ENV_APPROXIMATE_LABEL

    assert board_notices.ENV_APPROXIMATE_LABEL == ENV_APPROXIMATE_LABEL


def test_the_notice_costs_at_most_one_query(client):
    suite = env_suite()
    own_run(suite, on=[2])
    url = reverse("suite-leaderboard", args=[suite.name])
    client.get(url)
    with CaptureQueriesContext(connection) as without:
        client.get(url)
    own = own_run(suite, on=[2], name="own-2")
    own.attempts.update(task=tasks(suite)[0])  # now an approximate instance
    client.get(url)
    with CaptureQueriesContext(connection) as with_notice:
        assert 'id="approximate-env"' in client.get(url).content.decode()
    assert len(with_notice) <= len(without) + 1


def test_columns_no_row_has_a_figure_for_are_not_shown(client):
    suite = env_suite()
    body = page(client, suite)
    for heading in ("Cost / attempt", "Tokens / attempt", "Calls / attempt", "Wall / attempt"):
        assert heading not in body
    own_run(suite, on=[0, 1, 2, 3], reason=None)
    body = page(client, suite)
    assert "Cost / attempt" in body and "Wall / attempt" in body and "Cost / resolved" in body


def test_a_partial_row_is_marked_partial_on_the_page_and_in_the_api(client):
    suite = env_suite()
    partial = make_run(suite, make_model("half", AgentVariant.EXTERNAL), source=RunSource.PUBLISHED)
    for i, task in enumerate(tasks(suite)):
        make_attempt(partial, task, None, missing=i >= 2)
    key = f"half@{str(partial.public_id)[:8]}"
    first = suite.runs.get(model_config__name="published")
    leader = f"published@{str(first.public_id)[:8]}"
    body = page(client, suite)
    row = body[body.index(f'data-key="{key}"') :]
    row = row[: row.index("</tr>")]
    assert "partial: 2 of 4 tasks" in row and "badge tied" not in row
    assert f'href="/suites/env/compare/?models={leader},{key}"' in row
    assert "2 of 4 not attempted" in row

    api = client.get("/api/leaderboard", {"suite": suite.name}).json()["rows"]
    got = next(r for r in api if r["key"] == key)
    assert (got["status"], got["tied_with_leader"], got["rank"]) == ("partial", False, 2)
    assert (got["attempted_tasks"], got["tasks"]) == (2, 4)
    text = client.get("/api/leaderboard.csv", {"suite": suite.name}).content.decode()
    got_csv = next(r for r in csv.DictReader(io.StringIO(text)) if r["key"] == key)
    assert (got_csv["status"], got_csv["tied_with_leader"]) == ("partial", "False")


CHILD = textwrap.dedent(
    """
    import json, os, sys
    sys.path.insert(0, os.environ["REPO"])
    import django
    django.setup()
    from django.core.management import call_command
    call_command("migrate", verbosity=0, interactive=False)
    from tests.support.pages_fixtures import make_attempt, make_model, make_run, make_suite
    from runs.models import FailureReason
    from tasks_app.models import Task
    FailureReason.objects.sync_from_taxonomy()
    suite = make_suite("env", tasks=2, labels={0: ["swebench", "env-approximate"]})
    for task in Task.objects.filter(suite=suite):
        task.source = "swebench"
        task.spec = {"repo": "pydicom/pydicom", "version": "1.3"}
        task.python_asked, task.python_used = "3.6", "3.9"
        task.save()
    run = make_run(suite, make_model("own"))
    for task in Task.objects.filter(suite=suite):
        make_attempt(run, task, None)
    before = sorted(m for m in sys.modules if m.split(".")[0] == "swebench")
    from django.test import Client
    body = Client().get("/suites/env/leaderboard/").content.decode()
    after = sorted(m for m in sys.modules if m.split(".")[0] == "swebench")
    print(json.dumps({"before": before, "after": after,
                      "notice": 'id="approximate-env"' in body,
                      "python": "Python 3.9 for 3.6" in body}))
    """
)


def test_the_leaderboard_request_does_not_import_the_official_harness(tmp_path):
    """In a new process (this one imported ``swebench`` long ago): a leaderboard whose notice
    lists an approximate instance reads its Pythons from the task, never the harness."""
    env = {
        **os.environ,
        "REPO": str(REPO_ROOT),
        "AB_VAR_DIR": str(tmp_path),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "ARTIFACTS_ROOT": str(tmp_path / "artifacts"),
        "DJANGO_SETTINGS_MODULE": "benchsite.settings",
        "PAGE_CACHE": "false",
        "REQUEST_LOG_LEVEL": "WARNING",
    }
    done = subprocess.run(
        [sys.executable, "-c", CHILD],
        env=env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["notice"] and got["python"]
    assert got["before"] == [] and got["after"] == []


def test_a_write_to_another_suite_reads_none_of_this_suites_attempts(client):
    """The page cache misses after any write, but the figures are the stored per-run
    aggregates (runs.results.run_tallies): a write to another suite's attempt rereads none of
    this suite's attempts."""
    suite = env_suite()
    own_run(suite, on=[0, 1, 2, 3])
    other = make_suite("other", tasks=1)
    attempt = make_attempt(make_run(other, make_model("else")), tasks(other)[0], None)
    url = reverse("suite-leaderboard", args=[suite.name])
    client.get(url)
    attempt.steps = 3
    attempt.save(update_fields=["steps"])
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).status_code == 200
    reads = [q["sql"] for q in queries if 'FROM "runs_attempt"' in q["sql"]]
    assert reads == []
