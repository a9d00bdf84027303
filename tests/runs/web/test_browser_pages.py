"""The results pages in a real browser (Debian's Chromium through Playwright).

Navigation by clicking (home -> leaderboard -> compare -> attempt), charts drawn by the
vendored plotly.js, and XSS payloads in every untrusted field that must never run.
"""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

from runs.models import Attempt
from tasks_app.models import Task
from tests.support.browser_fixtures import shot
from tests.support.pages_fixtures import (
    add_stage,
    make_attempt,
    make_model,
    make_run,
    write_artifact,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Playwright's sync API runs an event loop in this thread; the ORM calls the tests make
# between page actions are still plain synchronous calls.
PAYLOAD = "<img src=x onerror=\"window.__xss=1;document.title='pwned'\">"
SCRIPT = "<script>window.__xss=1;document.title='pwned'</script>"


@pytest.fixture
def demo(artifacts_root):
    call_command("seed_demo")


def assert_no_xss(page) -> None:
    assert page.evaluate("window.__xss") is None
    assert page.title() != "pwned"


def test_it_goes_from_the_leaderboard_to_a_comparison_to_an_attempt(page, live_server, demo):
    page.goto(live_server.url + "/")
    page.click("text=Leaderboard >> nth=1")  # the SWE-bench suite (sorted after custom-dev)
    page.wait_for_selector("#leaderboard")
    assert "swebench-lite-dev" in page.title()
    # Runs are rows: 7 competing runs (two each of gpt-4o and claude), references apart.
    rows = page.locator("#leaderboard > tbody:first-of-type > tr")
    assert rows.count() == 7
    assert page.locator("#references tr.reference").count() == 2
    assert page.locator("#leaderboard .run-links a[href^='/runs/']").count() >= 9
    assert page.locator(".badge.tied, .badge.resolved").count() >= 1
    shot(page, "leaderboard")
    page.click("#view-configs")
    page.wait_for_selector("#view-runs")
    assert page.locator("#leaderboard > tbody:first-of-type > tr").count() == 5
    shot(page, "leaderboard-configs")

    page.click("#compare-top")
    page.wait_for_selector("#matrix")
    assert page.locator("#matrix tbody tr").count() == 23
    # Both rows attempted every task: the paired test runs over all 23, with no coverage notice.
    assert page.locator(".pair .paired-n").first.inner_text() == "23"
    assert "tasks both attempted" in page.locator(".pair").first.inner_text()
    assert page.locator(".coverage-warning").count() == 0
    shot(page, "compare")

    page.locator("#matrix a.attempt-link").first.click()
    page.wait_for_selector("h2:has-text('Patch')")
    assert page.locator("table.diff").count() >= 1
    assert page.locator("#timeline li").count() >= 3
    shot(page, "attempt")
    page.click(".view-toggle a:has-text('Side by side')")
    page.wait_for_selector("table.diff.split")
    shot(page, "attempt-split")


def test_the_compare_picker_keeps_the_order_of_clicks(page, live_server, demo):
    page.goto(live_server.url + "/suites/swebench-lite-dev/compare/")
    page.wait_for_selector("#compare-pick")
    second = page.locator("#pick-configs input").nth(3)
    first = page.locator("#pick-configs input").nth(0)
    run = page.locator("#pick-runs input").nth(2)
    keys = [second.get_attribute("value"), run.get_attribute("value")]
    second.check()
    first.check()
    run.check()
    first.uncheck()
    page.click("#compare-pick button")
    page.wait_for_selector("#matrix")
    headers = page.locator("#matrix thead th").all_inner_texts()
    labels = page.locator(".card.summary").evaluate_all("cards => cards.map(c => c.dataset.key)")
    assert labels == keys
    assert len(headers) == 4  # task, the two picked in click order, side by side


def test_the_taxonomy_chart_draws_and_a_segment_opens_its_attempts(page, live_server, demo):
    page.goto(live_server.url + "/suites/swebench-lite-dev/taxonomy/")
    page.wait_for_selector("#taxonomy-chart svg.main-svg")
    page.wait_for_selector("#trend-chart svg.main-svg")
    assert page.locator("#taxonomy-chart g.trace.bars").count() >= 3
    assert page.locator("#trend-chart g.trace.scatter").count() >= 5
    shot(page, "taxonomy")
    page.locator("#taxonomy-chart g.trace.bars g.point path").first.click(force=True)
    page.wait_for_url("**/attempts/?models=*")
    assert page.locator("#attempts tbody tr").count() >= 1
    shot(page, "attempts-list")


def test_the_run_page_and_task_page_render(page, live_server, demo):
    attempt = Attempt.objects.filter(suite__name="custom-dev").first()
    page.goto(live_server.url + f"/runs/{attempt.run.public_id}/")
    page.wait_for_selector("#run-progress")
    shot(page, "run")
    page.goto(live_server.url + f"/suites/custom-dev/tasks/{attempt.task.task_id}/")
    page.wait_for_selector("#task-attempts")
    shot(page, "task")


def test_untrusted_content_never_runs_in_the_browser(page, live_server, artifacts_root):
    from tasks_app.models import Suite

    suite = Suite.objects.create(name="xss", description=SCRIPT)
    task = Task.objects.create(
        suite=suite,
        task_id=PAYLOAD.replace("/", ""),
        repo_url=PAYLOAD,
        test_command=SCRIPT,
        labels=[PAYLOAD],
        problem_statement=SCRIPT + PAYLOAD,
        gold_patch=f"--- a/x.html\n+++ b/x.html\n@@ -1 +1 @@\n-{SCRIPT}\n+{PAYLOAD}\n",
    )
    evil = make_model(PAYLOAD)
    plain = make_model("plain")
    attempt = make_attempt(
        make_run(suite, evil),
        task,
        "TESTS_FAILED",
        final_patch=f"--- a/{PAYLOAD}\n+++ b/{PAYLOAD}\n@@ -1 +1 @@\n-{SCRIPT}\n+{PAYLOAD}\n",
        error_text=SCRIPT,
        test_results={"FAIL_TO_PASS": {"success": [], "failure": [PAYLOAD]}},
    )
    other = make_attempt(make_run(suite, plain), task, None, final_patch=attempt.final_patch)
    write_artifact(attempt, "logs/final_test.txt", (SCRIPT + PAYLOAD + "\n").encode())
    add_stage(attempt, "final_test", "logs/final_test.txt", exit_code=1)
    events = [
        {"event": "tool_start", "tool": PAYLOAD, "input": {"path": SCRIPT}},
        {"event": "tool_finish", "tool": "read_file", "output": SCRIPT + PAYLOAD},
        {"type": SCRIPT, PAYLOAD: PAYLOAD},
    ]
    write_artifact(attempt, "events.jsonl", "\n".join(map(json.dumps, events)).encode())

    pages = [
        "/",
        "/suites/xss/",
        "/suites/xss/leaderboard/",
        f"/suites/xss/compare/?models={evil.slug},{plain.slug}",
        "/suites/xss/compare/",
        "/suites/xss/taxonomy/",
        "/suites/xss/attempts/",
        f"/attempts/{attempt.public_id}/",
        f"/attempts/{attempt.public_id}/?view=split",
        f"/attempts/{attempt.public_id}/vs/{other.public_id}/",
        f"/runs/{attempt.run.public_id}/",
        task.get_absolute_url(),
    ]
    for path in pages:
        page.goto(live_server.url + path)
        page.wait_for_load_state("load")
        page.wait_for_timeout(150)  # let any injected handler fire
        assert_no_xss(page)
    page.goto(live_server.url + f"/attempts/{attempt.public_id}/")
    assert SCRIPT in page.locator("pre.log").text_content()
    assert page.locator("#timeline pre").count() >= 2
    shot(page, "xss-attempt")
    page.goto(live_server.url + "/suites/xss/taxonomy/")
    page.wait_for_selector("#taxonomy-chart svg.main-svg")
    assert_no_xss(page)
