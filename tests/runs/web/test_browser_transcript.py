"""The transcript viewer in a real browser: a real mini-swe-agent trajectory and a conversation
of our own LLM agent (run for real against the local OpenAI-compatible server), searched,
unfolded, and never running what the model wrote."""

from __future__ import annotations

import json

import pytest

from tasks_app.models import Task
from tests.runs.transcript.test_pages_transcript import MINI_TRAJ
from tests.support.browser_fixtures import shot
from tests.support.pages_fixtures import make_attempt, make_model, make_run, write_artifact

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PAYLOAD = "<img src=x onerror=\"window.__xss=1;document.title='pwned'\">"


def test_a_mini_swe_agent_trajectory_is_searched_and_unfolded(page, live_server, transcript_suite):
    task = Task.objects.get(suite=transcript_suite)
    attempt = make_attempt(
        make_run(transcript_suite, make_model("gemini-mini")), task, "TESTS_FAILED"
    )
    trajectory = json.loads(MINI_TRAJ.read_text())
    # Model output is untrusted: a payload in a reply and in a command's output.
    trajectory["messages"][2]["content"] += "\n" + PAYLOAD
    trajectory["messages"][3]["content"] += PAYLOAD
    write_artifact(attempt, "trajectory.traj.json", json.dumps(trajectory).encode())

    page.goto(live_server.url + f"/attempts/{attempt.public_id}/")
    page.wait_for_selector("#transcript")
    assert page.locator("#transcript-turns .turn").count() == 40
    assert page.locator(".turn.role-assistant .tool-call").count() == 34
    assert page.evaluate("window.__xss") is None and page.title() != "pwned"
    assert PAYLOAD in page.locator("#transcript-turns .turn").nth(2).text_content()

    # A long output starts folded; "show all" unfolds it.
    folded = page.locator("pre.block.folded").first
    height = folded.bounding_box()["height"]
    folded.locator("xpath=following-sibling::button[1]").click()
    assert folded.bounding_box()["height"] > height

    # Search: every match marked, the first one current and scrolled to, Enter steps on.
    page.fill("#transcript-search", "itrs_observed_transforms")
    page.wait_for_selector("mark.hit.current")
    hits = page.locator("mark.hit").count()
    assert hits >= 5
    assert page.locator("#transcript-hits").text_content().startswith(f"1 of {hits} matches")
    page.press("#transcript-search", "Enter")
    assert page.locator("#transcript-hits").text_content().startswith(f"2 of {hits}")
    current = page.locator("mark.hit.current")
    assert current.text_content().lower() == "itrs_observed_transforms"
    assert current.is_visible()
    # Only the matching turns.
    page.check("#transcript-only")
    page.wait_for_function("document.querySelectorAll('#transcript-turns .turn.hidden').length > 0")
    visible = page.locator("#transcript-turns .turn:not(.hidden)").count()
    assert 0 < visible < 40
    shot(page, "transcript-mini-swe-agent-search")
    # Searching a payload's text finds it as text and runs nothing.
    page.uncheck("#transcript-only")
    page.fill("#transcript-search", "onerror=")
    page.wait_for_function("document.querySelectorAll('mark.hit').length === 2")
    assert page.evaluate("window.__xss") is None
    page.fill("#transcript-search", "")
    page.wait_for_function("document.querySelectorAll('mark.hit').length === 0")
    assert page.locator("#transcript-turns .turn.hidden").count() == 0


@pytest.mark.slow
def test_our_llm_agents_conversation_shows_tokens_and_the_applied_patch(
    page,
    live_server,
    transcript_suite,
    tmp_path,
    artifacts_root,
):
    from tests.support.transcript_fixtures import run_llm_agent

    task = Task.objects.get(suite=transcript_suite)
    attempt = make_attempt(make_run(transcript_suite, make_model("fake-llm")), task, None)
    attempt.artifacts_dir = f"llm/{attempt.public_id}"
    attempt.save(update_fields=["artifacts_dir"])
    run_llm_agent(tmp_path, artifacts_root / attempt.artifacts_dir)

    page.goto(live_server.url + f"/attempts/{attempt.public_id}/")
    page.wait_for_selector("#transcript")
    assert "LLM conversation" in page.locator(".transcript-summary").text_content()
    turns = page.locator("#transcript-turns .turn")
    assert turns.count() == 6
    assert "120 in · 15 out" in turns.nth(2).text_content()
    assert "300 in · 60 out" in turns.nth(3).text_content()
    patch = turns.nth(3).locator("pre.patch")
    assert patch.locator("span.add").first.text_content().startswith("+")
    assert "return total(values) / len(values)" in patch.text_content()
    assert "exit_code=0" in turns.nth(4).text_content()
    page.fill("#transcript-search", "total(values)")
    page.wait_for_selector("mark.hit.current")
    assert page.locator("mark.hit").count() >= 2
    shot(page, "transcript-llm-agent")
