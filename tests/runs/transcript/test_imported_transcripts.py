"""An imported run's attempt page shows its trajectory in the transcript viewer.

`ab import-run` stores each trajectory unchanged (runs.transcript names the files) and the
attempt page reads it back: model text, each command with its output, cost and API calls, the
submission beside the gold patch. The figures the importer puts on the attempt (tool calls,
API calls, cost) are the ones the transcript shows. Real files: the mini-swe-agent run of 20
Verified instances and a real Inspect .eval log; the SWE-agent .traj files are written in
SWE-agent's shape (examples/imports/SOURCE.md).
"""

from __future__ import annotations

import html
import json

import pytest
from django.urls import reverse

from runs.artifacts import read_transcript
from runs.imports.run_import import run_folder_import
from runs.models import Attempt
from tasks_app.swebench.importer import swebench_import
from tests.runs.imports.test_run_import import IMPORTS, INSPECT_JSON_LOG, INSPECT_LOG, MINI
from tests.support.swebench_fixtures import LITE_DEV

pytestmark = pytest.mark.django_db

MINI_INSTANCE = "django__django-14155"
SWE_AGENT_INSTANCE = "marshmallow-code__marshmallow-1359"


@pytest.fixture
def reader(client, bob):
    client.force_login(bob)
    return client


def attempt_page(client, attempt: Attempt) -> str:
    response = client.get(reverse("attempt-detail", args=[attempt.public_id]))
    assert response.status_code == 200
    return response.content.decode()


def transcript_html(body: str) -> str:
    start = body.index('id="transcript"')
    return body[start:]


def test_it_shows_an_imported_mini_swe_agent_attempt_with_commands_outputs_and_cost(
    reader,
    artifacts_root,
):
    run_folder_import(path=MINI, suite_name="verified-mini", model_name="mini-swe-agent")
    attempt = Attempt.objects.get(task__task_id=MINI_INSTANCE)
    raw = json.loads((MINI / "trajs" / MINI_INSTANCE / f"{MINI_INSTANCE}.traj.json").read_text())
    body = attempt_page(reader, attempt)

    shown = transcript_html(body)
    assert "mini-swe-agent trajectory" in shown
    # The first command the model ran and what it printed.
    assert html.escape('find . -name "*.py" | xargs grep -l "class ResolverMatch"') in shown
    assert "./django/urls/resolvers.py" in shown
    # The model's own words (its THOUGHT), and the figures of info.model_stats.
    assert "I need to locate the `ResolverMatch` class" in html.unescape(shown)
    stats = raw["info"]["model_stats"]
    assert f"{stats['api_calls']} API calls" in shown
    assert f"${stats['instance_cost']:.4f}" in shown
    # The submission is the attempt's patch, shown beside the gold patch.
    assert "Agent&#x27;s final patch" in body or "Agent's final patch" in body
    assert "Gold patch" in body
    assert "functools.partial" in html.unescape(body)
    assert "report.json" in body


def test_it_counts_the_same_calls_and_cost_on_the_attempt_as_in_its_transcript(
    artifacts_root,
):
    run_folder_import(path=MINI, suite_name="verified-mini", model_name="mini-swe-agent")
    attempts = list(Attempt.objects.filter(suite__name="verified-mini"))
    assert len(attempts) == 20
    format_errors = 0
    for attempt in attempts:
        shown = read_transcript(attempt)
        assert shown is not None and shown.error == "", attempt.task.task_id
        assert attempt.tool_calls == shown.tool_call_count, attempt.task.task_id
        assert attempt.steps == shown.api_calls, attempt.task.task_id
        assert float(attempt.cost_usd) == pytest.approx(shown.cost_usd, abs=1e-6)
        assert (attempt.tokens_in, attempt.tokens_out) == (shown.tokens_in, shown.tokens_out)
        format_errors += attempt.steps - attempt.tool_calls
    # A reply with two bash blocks runs nothing in mini-swe-agent; the run has such replies.
    assert format_errors > 0


def test_it_shows_an_imported_swe_agent_traj_with_every_action(reader, artifacts_root):
    swebench_import(source=LITE_DEV, suite_name="lite-dev")
    run_folder_import(path=IMPORTS / "swe_agent", suite_name="lite-dev", model_name="swe-agent")
    attempt = Attempt.objects.get(task__task_id=SWE_AGENT_INSTANCE)
    raw = json.loads((IMPORTS / "swe_agent" / f"{SWE_AGENT_INSTANCE}.traj").read_text())
    shown = transcript_html(attempt_page(reader, attempt))

    assert "SWE-agent trajectory" in shown
    # Every step's action and observation, although the file's history stops after the first.
    for step in raw["trajectory"]:
        assert html.escape(step["action"]) in shown
        assert html.escape(step["observation"].splitlines()[0]) in shown
    assert f"{len(raw['trajectory'])} tool calls" in shown
    assert attempt.tool_calls == len(raw["trajectory"])
    assert "$0.1234" in shown and "3 API calls" in shown


def test_it_shows_an_imported_inspect_sample_with_its_score_and_tokens(reader, artifacts_root):
    swebench_import(source=MINI / "instances.jsonl", suite_name="verified-mini")
    run_folder_import(path=INSPECT_LOG, suite_name="verified-mini", model_name="insp")
    attempt = Attempt.objects.get(task__task_id="psf__requests-1142")
    shown = transcript_html(attempt_page(reader, attempt))

    assert "Inspect AI sample" in shown
    assert "Fix the issue of psf__requests-1142." in shown
    assert "THOUGHT: inspect the code, then patch it (sample 0)." in shown
    assert "patch_scorer = <code>C</code>" in shown
    assert "1200 in · 300 out" in shown
    transcript = read_transcript(attempt)
    assert transcript is not None
    assert (attempt.tokens_in, attempt.tokens_out) == (transcript.tokens_in, transcript.tokens_out)


def test_it_shows_a_sample_of_an_inspect_json_log_with_its_tool_call(reader, artifacts_root):
    swebench_import(source=MINI / "instances.jsonl", suite_name="verified-mini")
    run_folder_import(path=INSPECT_JSON_LOG, suite_name="verified-mini", model_name="insp-json")
    attempt = Attempt.objects.get(task__task_id="psf__requests-1142")
    shown = transcript_html(attempt_page(reader, attempt))

    assert "Inspect AI sample" in shown and "1 tool call" in shown
    assert "ls # sample 0" in shown  # the call's arguments
    assert "$ ls # sample 0\nrequests/\nsetup.py" in html.unescape(shown)  # its result
    assert "Patched it (sample 0)." in shown
    assert "800 in · 40 out" in shown and "900 in · 60 out" in shown
    assert attempt.tool_calls == read_transcript(attempt).tool_call_count == 1
