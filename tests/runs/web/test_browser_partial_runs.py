"""Runs that cover part of a suite in a real browser (Chromium): the leaderboard, compare,
taxonomy, run and attempt pages show the not-attempted state in its own colour, both rates,
the paired test's n and coverage warning, and the run of unknown date (issue 22)."""

from __future__ import annotations

import pytest

from runs.models import Attempt, AttemptStatus
from tests.support.browser_fixtures import shot
from tests.support.partial_fixtures import FULL, PARTIAL, PARTIAL_IDS, run_of

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

MISSING_COLOUR = "rgb(68, 84, 106)"  # .badge.missing / .missing-count, not a failure's red


def key_of(model: str) -> str:
    run = run_of(model)
    return f"{run.model_config.slug}@{str(run.public_id)[:8]}"


def test_a_partial_run_from_the_leaderboard_to_compare_to_an_unattempted_instance(
    page, live_server, partial_suite
):
    base = live_server.url
    page.goto(f"{base}/suites/{partial_suite.name}/leaderboard/")
    row = page.locator(f'#leaderboard tr[data-key="{key_of(PARTIAL)}"]')
    text = row.inner_text()
    assert "25.0%" in text and "5 / 20" in text  # the whole-suite rate, the table's order
    assert "50.0%" in row.locator("td.attempted").inner_text()  # on the 10 attempted
    assert "5 / 10" in text and "10 of 20 not attempted" in text
    # Ranked by its whole-suite rate, compared on the 10 shared tasks: marked partial, never
    # tied / not tied with the leader (issue 29).
    assert "imported on" in text and "partial: 10 of 20 tasks" in text
    assert "vs leader on the 10 shared" in text and "tied" not in text
    colour = row.locator(".missing-count").evaluate("e => getComputedStyle(e).color")
    assert colour == MISSING_COLOUR
    shot(page, "partial-leaderboard")

    # A date window leaves the run of unknown date out unless asked.
    page.fill('input[name="date_from"]', "2025-11-01")
    page.fill('input[name="date_to"]', "2025-11-30")
    page.click("#lb-filters button[type=submit]")
    page.wait_for_url("**date_from=2025-11-01**")
    assert page.locator(f'#leaderboard tr[data-key="{key_of(PARTIAL)}"]').count() == 0
    assert page.locator(f'#leaderboard tr[data-key="{key_of(FULL)}"]').count() == 1
    page.check('input[name="include_undated"]')
    page.click("#lb-filters button[type=submit]")
    page.wait_for_url("**include_undated=1**")
    assert page.locator(f'#leaderboard tr[data-key="{key_of(PARTIAL)}"]').count() == 1

    page.goto(
        f"{base}/suites/{partial_suite.name}/compare/?models={key_of(PARTIAL)},{key_of(FULL)}"
    )
    pair = page.locator("p.pair").inner_text()
    assert "p = 1.000" in pair and "10 tasks both attempted" in pair
    assert "0 better vs 0 worse" in pair
    notice = page.locator("p.coverage-warning").inner_text()
    assert "10 only by" in notice and "cover only the 10 both attempted" in notice
    missing_cells = page.locator("#matrix td.cell.missing")
    assert missing_cells.count() == 10
    badge = missing_cells.first.locator(".badge.missing")
    assert badge.inner_text() == "not attempted"
    assert badge.evaluate("e => getComputedStyle(e).color") == MISSING_COLOUR
    assert page.locator("#matrix td.cell.failed").count() >= 1  # the full run's failures
    shot(page, "partial-compare")

    never = Attempt.objects.get(
        run=run_of(PARTIAL), status=AttemptStatus.MISSING, task__task_id=missing_task_id()
    )
    page.goto(f"{base}{never.get_absolute_url()}")
    header = page.locator("h1 + p.sub").inner_text()
    assert "not attempted" in header
    reason = page.locator("#reason").inner_text()
    assert reason.startswith("Not attempted") and "TESTS_FAILED" not in reason
    facts = page.locator("dl.facts").inner_text()
    assert "Grade\n—" in facts and "Cost\n—" in facts
    shot(page, "partial-missing-attempt")

    page.goto(f"{base}{run_of(PARTIAL).get_absolute_url()}")
    cards = page.locator("#run-score").inner_text()
    assert "25.0%" in cards and "50.0%" in cards and "Not attempted\n10" in cards
    assert "unknown" in page.locator("#run-date").inner_text()
    assert "partial" in page.locator("#run-import").inner_text()
    shot(page, "partial-run")


def missing_task_id() -> str:
    from tests.support.partial_fixtures import IDS

    return sorted(set(IDS) - set(PARTIAL_IDS))[0]


def test_the_taxonomy_counts_missing_apart_and_charts_an_undated_run_only_when_asked(
    page, live_server, partial_suite
):
    page.goto(f"{live_server.url}/suites/{partial_suite.name}/taxonomy/")
    row = page.locator(f'#taxonomy-table tr[data-model="{run_of(PARTIAL).model_config.slug}"]')
    cells = row.locator("td").all_inner_texts()
    header = page.locator("#taxonomy-table thead th").all_inner_texts()
    assert cells[header.index("not attempted")] == "10"
    assert cells[header.index("TESTS_FAILED")] == "5"
    page.wait_for_selector("#taxonomy-chart svg.main-svg")
    page.wait_for_selector("#trend-chart svg.main-svg")
    legend = page.locator("#taxonomy-chart .legendtext").all_text_contents()
    assert not any("attempted" in name or "missing" in name for name in legend)
    lines = page.locator("#trend-chart .legendtext").all_text_contents()
    assert FULL in lines and PARTIAL not in lines
    shot(page, "partial-taxonomy")

    page.click("#include-undated")
    page.wait_for_url("**undated=1**")
    page.wait_for_selector("#trend-chart svg.main-svg")
    lines = page.locator("#trend-chart .legendtext").all_text_contents()
    assert PARTIAL in lines
