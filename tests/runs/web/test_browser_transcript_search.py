"""Transcript search in Chromium: Enter right after typing a new query searches for it, never
steps through the previous query's hits (issue 29, item 1: the debounce timer was cleared
and the old marks stepped)."""

from __future__ import annotations

import pytest

from tasks_app.models import Task
from tests.runs.transcript.test_pages_transcript import MINI_TRAJ
from tests.support.pages_fixtures import make_attempt, make_model, make_run, write_artifact

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_enter_after_a_new_query_searches_for_it(page, live_server, transcript_suite):
    task = Task.objects.get(suite=transcript_suite)
    attempt = make_attempt(
        make_run(transcript_suite, make_model("gemini-mini")), task, "TESTS_FAILED"
    )
    write_artifact(attempt, "trajectory.traj.json", MINI_TRAJ.read_bytes())
    page.goto(live_server.url + f"/attempts/{attempt.public_id}/")
    page.wait_for_selector("#transcript")
    text = page.locator("#transcript-turns").text_content().lower()
    first, second = "itrs_observed_transforms", "astropy"
    want = text.count(second)
    assert text.count(first) >= 5 and want >= 2

    page.fill("#transcript-search", first)
    page.wait_for_selector("mark.hit.current")
    page.press("#transcript-search", "Enter")
    assert page.locator("#transcript-hits").text_content().startswith("2 of")

    # Replace the query and press Enter at once (before the 200 ms debounce runs).
    page.fill("#transcript-search", second)
    page.press("#transcript-search", "Enter")
    counter = page.locator("#transcript-hits").text_content()
    assert counter.startswith(f"1 of {want} matches"), counter
    marks = page.locator("mark.hit").all_text_contents()
    assert marks and {m.lower() for m in marks} == {second}
    assert page.locator("mark.hit.current").text_content().lower() == second
    # A second Enter steps through the new hits; the debounced search does not reset it.
    page.press("#transcript-search", "Enter")
    page.wait_for_timeout(400)
    assert page.locator("#transcript-hits").text_content().startswith(f"2 of {want}")
