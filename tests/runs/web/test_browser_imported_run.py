"""An imported run in a real browser: from the leaderboard to an attempt's patch and files."""

from __future__ import annotations

import json

import pytest

from runs.imports.run_import import run_folder_import
from runs.models import Attempt
from tests.runs.imports.test_run_import import MINI
from tests.support.browser_fixtures import shot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

INSTANCE = "django__django-14155"


def test_it_opens_an_imported_attempt_from_the_leaderboard(page, live_server, artifacts_root):
    run_folder_import(path=MINI, suite_name="verified-mini", model_name="mini-swe-agent")
    attempt = Attempt.objects.get(task__task_id=INSTANCE)
    submission = json.loads((MINI / "trajs" / INSTANCE / f"{INSTANCE}.traj.json").read_text())[
        "info"
    ]["submission"]
    first_file = submission.split("\n", 1)[0].split(" b/")[-1]

    page.goto(f"{live_server.url}/suites/verified-mini/leaderboard/")
    assert "mini-swe-agent" in page.inner_text("body")
    assert "55.0" in page.inner_text("body")  # 11 / 20
    page.goto(f"{live_server.url}{attempt.get_absolute_url()}")
    body = page.inner_text("body")
    assert INSTANCE in body and "Gold patch" in body
    assert first_file in page.inner_text("#patch")
    files = page.inner_text("#artifacts")
    assert "trajectory.traj.json" in files and "report.json" in files
    shot(page, "imported-attempt")
    href = page.get_attribute("#artifacts a:text-is('report.json')", "href")
    response = page.request.get(f"{live_server.url}{href}")
    assert response.status == 200
    assert json.loads(response.body()) == json.loads(
        (MINI / "logs" / INSTANCE / "report.json").read_text()
    )


def test_it_shows_the_imported_trajectory_and_finds_a_command_in_it(
    page, live_server, artifacts_root
):
    run_folder_import(path=MINI, suite_name="verified-mini", model_name="mini-swe-agent")
    attempt = Attempt.objects.get(task__task_id=INSTANCE)
    trajectory = json.loads((MINI / "trajs" / INSTANCE / f"{INSTANCE}.traj.json").read_text())
    stats = trajectory["info"]["model_stats"]
    # The reproduction script the model ran, a command found later in the conversation.
    command = "python3 tests/runtests.py urlpatterns_reverse"

    page.goto(f"{live_server.url}{attempt.get_absolute_url()}")
    page.wait_for_selector("#transcript")
    summary = page.locator(".transcript-summary").text_content()
    assert "mini-swe-agent trajectory" in summary
    assert f"{stats['api_calls']} API calls" in summary
    assert f"${stats['instance_cost']:.4f}" in summary
    # One turn a message, less the command outputs shown inside the call they answer.
    turns = page.locator("#transcript-turns .turn")
    calls = page.locator("#transcript-turns .tool-call")
    assert turns.count() + calls.count() == len(trajectory["messages"])
    assert calls.count() == attempt.tool_calls

    page.fill("#transcript-search", command)
    page.wait_for_selector("mark.hit.current")
    current = page.locator("mark.hit.current")
    assert current.text_content() == command and current.is_visible()
    assert current.locator("xpath=ancestor::*[contains(@class, 'tool-call')]").count() == 1
    assert page.locator("#transcript-hits").text_content().startswith("1 of ")
    shot(page, "imported-attempt-transcript")
