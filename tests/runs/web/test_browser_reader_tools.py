"""The reader's tools in a real browser (Chromium, issue 22): the attempt list's filter form,
sorting, paging and export; an attempt's previous / next with the keyboard; its test log
beside the per-test table; step times; old parameter names redirected; untrusted task ids,
errors and logs escaped on every one of these pages."""

from __future__ import annotations

import csv
import io
import json
import re
from decimal import Decimal
from pathlib import Path

import pytest

from runs.models import Attempt
from tasks_app.models import Suite, Task
from tests.conftest import SHARED_DIR
from tests.runs.web.test_browser_pages import PAYLOAD, SCRIPT, assert_no_xss
from tests.support.browser_fixtures import shot
from tests.support.pages_fixtures import (
    add_stage,
    make_attempt,
    make_model,
    make_run,
    write_artifact,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

MINI_TRAJ = (
    SHARED_DIR / "swebench/mini_swe_agent_run/trajs/psf__requests-1142/psf__requests-1142.traj.json"
)
EVIL_TASK = "evil" + PAYLOAD.replace("/", "")


@pytest.fixture
def tools_suite(artifacts_root):
    """12 tasks (one id a script payload), a partial run (4 not attempted) and a full one."""
    suite = Suite.objects.create(name="tools")
    tasks = []
    for i in range(12):
        tasks.append(
            Task.objects.create(
                suite=suite,
                task_id=EVIL_TASK if i == 5 else f"org__repo-{i:03d}",
                repo_url="https://github.com/org/repo" if i < 8 else "https://github.com/org/lib",
                test_command="pytest -q",
                labels=["even" if i % 2 == 0 else "odd"],
            )
        )
    partial, full = make_run(suite, make_model("partial")), make_run(suite, make_model("full"))
    for i, task in enumerate(tasks):
        if i < 8:
            make_attempt(
                partial,
                task,
                None if i % 2 else "TESTS_FAILED",
                cost_usd=Decimal(f"0.{i + 1:02d}"),
                error_text=SCRIPT if i == 0 else "",
            )
        else:
            make_attempt(partial, task, None, missing=True)
        make_attempt(full, task, None if i % 3 else "TESTS_FAILED", cost_usd=Decimal("0.05"))
    graded = Attempt.objects.get(run=partial, task=tasks[0])
    graded.test_results = {
        "FAIL_TO_PASS": {"success": [], "failure": ["tests/test_x.py::test_fix"]},
        "PASS_TO_PASS": {"success": ["tests/test_x.py::test_old"], "failure": []},
    }
    graded.save()
    filler = "".join(f"tests/test_x.py::test_filler_{n} PASSED\n" for n in range(120))
    log = (
        "+ git apply -v -\n+ : '>>>>> Start Test Output'\n"
        f"{filler}tests/test_x.py::test_old PASSED\n"
        f"E   AssertionError: {SCRIPT}{PAYLOAD}\n"
        "FAILED tests/test_x.py::test_fix - AssertionError\n+ : '>>>>> End Test Output'\n"
    )
    write_artifact(graded, "logs/final_test.txt", log.encode())
    add_stage(graded, "final_test", "logs/final_test.txt", order=5, exit_code=1)
    write_artifact(graded, "trajectory.traj.json", MINI_TRAJ.read_bytes())
    return suite


def attempt_ids(page) -> list[str]:
    return page.locator("#attempts tbody tr").evaluate_all(
        "rows => rows.map(r => r.dataset.attempt)"
    )


def test_the_attempt_list_filters_sorts_pages_and_exports(page, live_server, tools_suite):
    base = f"{live_server.url}/suites/tools/attempts/"
    page.goto(base)
    assert page.locator("#attempts tbody tr").count() == 24
    # The form: a model and the not-attempted state.
    page.select_option('select[name="models"]', "partial")
    page.select_option('select[name="outcome"]', "missing")
    page.click("#attempt-filters button[type=submit]")
    page.wait_for_url("**outcome=missing**")
    assert "models=partial" in page.url
    assert page.locator("#attempts tbody tr").count() == 4
    assert page.locator("#attempts .badge.missing").count() == 4
    shot(page, "attempts-missing")

    # Repository and free text; then clear.
    page.goto(base + "?repo=org/lib")
    assert page.locator("#attempts tbody tr").count() == 8
    page.fill('input[name="q"]', "repo-01")
    page.click("#attempt-filters button[type=submit]")
    page.wait_for_url("**q=repo-01**")
    # org__repo-010 and -011 (both runs); repo-001 .. -007 contain the text but are in org/repo.
    assert page.locator("#attempts tbody tr").count() == 4
    assert all("repo-01" in t for t in page.locator("#attempts tbody tr").all_inner_texts())
    page.click("#clear-filters")
    page.wait_for_url(base)

    # Sort by cost: a click sorts (most first), a second click reverses; unknown cost last.
    page.goto(base + "?models=partial")
    page.click('th a[data-sort="cost"]')
    page.wait_for_url("**sort=cost**")
    costs = page.locator("#attempts tbody tr td:nth-child(6)").all_inner_texts()
    assert costs[:2] == ["$0.0800", "$0.0700"] and costs[-1] == "—"
    page.click('th a[data-sort="cost"]')
    page.wait_for_url("**order=asc**")
    costs = page.locator("#attempts tbody tr td:nth-child(6)").all_inner_texts()
    assert costs[:2] == ["$0.0100", "$0.0200"] and costs[-1] == "—"
    assert page.locator('th a[data-sort="cost"][aria-sort="ascending"]').count() == 1
    sorted_order = attempt_ids(page)

    # Pages of 5 (a size given in the URL), with their counts, keeping the order; the form
    # offers that size and keeps it.
    page.goto(page.url + "&page_size=5")
    page.click("#attempt-filters button[type=submit]")
    page.wait_for_url("**page_size=5**")
    assert page.locator('select[name="page_size"]').input_value() == "5"
    assert page.locator("#shown-range").inner_text() == "1\N{EN DASH}5"
    seen = attempt_ids(page)
    page.click("#pagination a[rel=next]")
    page.wait_for_url("**page=2**")
    assert page.locator("#shown-range").inner_text() == "6\N{EN DASH}10"
    seen += attempt_ids(page)
    page.click("#pagination a[rel=next]")
    page.wait_for_url("**page=3**")
    seen += attempt_ids(page)
    assert seen == sorted_order
    shot(page, "attempts-paged")

    # The export is every row of the filter, in its order.
    with page.expect_download() as download:
        page.click("#export-csv")
    rows = list(csv.DictReader(io.StringIO(Path(download.value.path()).read_text())))
    assert [r["attempt"] for r in rows] == sorted_order
    with page.expect_download() as download:
        page.click("#export-json")
    document = json.loads(Path(download.value.path()).read_text())
    assert [r["attempt"] for r in document["items"]] == sorted_order
    assert_no_xss(page)


def test_an_attempt_steps_through_its_list_with_links_and_keys(page, live_server, tools_suite):
    page.goto(f"{live_server.url}/suites/tools/attempts/?models=partial&sort=cost&order=desc")
    order = attempt_ids(page)
    page.locator("#attempts a.attempt-link").first.click()
    # The page's load (its shortcut script included), not only its markup: a key pressed
    # before the script runs is lost.
    page.wait_for_url(f"**/attempts/{order[0]}/**")
    page.wait_for_selector("#attempt-nav")
    assert page.locator("#nav-position").inner_text() == "1 of 12 in this list"
    assert page.locator("#nav-prev").count() == 0
    page.keyboard.press("j")
    page.wait_for_url(f"**/attempts/{order[1]}/**")
    assert page.locator("#nav-position").inner_text() == "2 of 12 in this list"
    page.click("#nav-next")
    page.wait_for_url(f"**/attempts/{order[2]}/**")
    page.keyboard.press("k")
    page.wait_for_url(f"**/attempts/{order[1]}/**")
    # Typing in the transcript's search box is no shortcut.
    page.goto(f"{live_server.url}/attempts/{order[-1]}/?models=partial&sort=cost&order=desc")
    assert page.locator("#nav-next").count() == 0
    page.keyboard.press("u")
    page.wait_for_url("**/suites/tools/attempts/?models=partial&sort=cost&order=desc**")
    assert page.locator(f"#attempt-{order[-1]}").count() == 1
    shot(page, "attempt-nav-back")


def test_a_test_links_to_its_line_in_the_log_beside_and_steps_are_timed(
    page, live_server, tools_suite
):
    graded = Attempt.objects.get(run__model_config__name="partial", task__task_id="org__repo-000")
    page.goto(f"{live_server.url}/attempts/{graded.public_id}/")
    page.wait_for_selector("#test-log")
    link = page.locator('#tests a.test-line:has-text("tests/test_x.py::test_fix")')
    target = link.get_attribute("href")
    line = page.locator(target)
    assert line.inner_text().endswith("FAILED tests/test_x.py::test_fix - AssertionError")
    link.click()
    page.wait_for_url(f"**{target}")
    assert line.evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(255, 241, 184)"
    box, shown = page.locator("#test-log").bounding_box(), line.bounding_box()
    assert box["y"] <= shown["y"] <= box["y"] + box["height"]  # scrolled into the log's view
    # The log sits beside the table, not under it.
    table = page.locator("#tests").bounding_box()
    assert box["x"] > table["x"] + table["width"] - 1
    assert SCRIPT in page.locator("#test-log").inner_text()
    # Each step of the trajectory with its duration, and the total.
    steps = page.locator(".turn .step-time")
    assert steps.count() > 10
    assert re.fullmatch(r"step 1 · \d+\.\d s", steps.first.inner_text())
    assert steps.last.inner_text().endswith("· —")
    assert re.match(r"\d+ steps in \d+ min \d\d s", page.locator("#step-total").inner_text())
    shot(page, "attempt-test-log")
    assert_no_xss(page)


def test_old_parameter_names_land_on_the_canonical_urls(page, live_server, tools_suite):
    base = live_server.url + "/suites/tools"
    partial = Attempt.objects.filter(run__model_config__name="partial").first().run
    short = str(partial.public_id)[:8]
    for old, new in (
        (
            "/leaderboard/?label=even&from=2020-01-01&undated=1",
            "/leaderboard/?labels=even&date_from=2020-01-01&include_undated=1",
        ),
        ("/compare/?models=partial,full&label=odd", "/compare/?models=partial%2Cfull&labels=odd"),
        ("/taxonomy/?undated=1", "/taxonomy/?include_undated=1"),
        (f"/attempts/?model=full&run={short}", f"/attempts/?models=full&runs={short}"),
    ):
        page.goto(base + old)
        assert page.url == base + new
    # The old names applied: that run is partial's, not full's, so nothing matches.
    assert page.locator("#attempts tbody tr[data-attempt]").count() == 0
    assert page.locator("#attempts td.empty").inner_text() == "No attempts match."
    # The leaderboard's form now uses the same names: its labels filter applies.
    page.goto(base + "/leaderboard/?labels=even&colour=red")
    assert "not applied: 'colour'" in page.locator(".notice.unknown-params").inner_text()
    assert page.locator('input[name="labels"][value="even"]').is_checked()
    page.goto(base + f"/attempts/?q={PAYLOAD}")
    page.wait_for_timeout(150)
    assert_no_xss(page)
    page.goto(base + f"/attempts/?q={EVIL_TASK[:10]}")
    assert page.locator("#attempts a.attempt-link").first.inner_text() == EVIL_TASK
    assert_no_xss(page)
