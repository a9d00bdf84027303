"""What a CLI attempt's page, API and exports say about its run, read from the gateway's
``model_calls.jsonl``: its tool calls counted as the transcript shows them, each step's time
from the calls' ``started_at``, the ATIF export's step timestamps and agent version, and the
record downloaded as what it is (issue 29, item 2 and item 9)."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from django.urls import reverse

from runs import artifacts, step_times, transcript
from runs.agents.cli.agent import _tool_calls
from runs.agents.cli.definition import get_definition
from runs.models import AgentVariant, ModelConfig
from tasks_app.models import Task
from tests.conftest import REPO_ROOT, SHARED_DIR
from tests.support.pages_fixtures import make_attempt, make_run, make_suite, write_artifact

REAL = REPO_ROOT / "tests" / "data" / "model_calls"
START = dt.datetime(2026, 11, 2, 9, 30, tzinfo=dt.UTC)
# Seconds after START each call of the recording started, and how long each took.
OFFSETS = [0.0, 12.5, 31.0, 47.25]
DURATIONS_MS = [4000, 6500, 3000, 9000]


def timed_recording(cli: str) -> bytes:
    """A real CLI's recorded calls (tests/data/model_calls) with real, distinct times."""
    lines = []
    for line, offset, ms in zip(
        (REAL / f"{cli}.jsonl").read_text().splitlines(), OFFSETS, DURATIONS_MS, strict=True
    ):
        record = json.loads(line)
        record["started_at"] = (START + dt.timedelta(seconds=offset)).isoformat()
        record["duration_ms"] = ms
        lines.append(json.dumps(record))
    return ("\n".join(lines) + "\n").encode()


@pytest.mark.parametrize("cli", ["claude-code", "codex", "mini-swe-agent"])
def test_a_cli_runs_steps_are_timed_from_its_recorded_calls(cli):
    data = timed_recording(cli)
    found = transcript.load({"model_calls.jsonl": data}.get)
    times = step_times.load({"model_calls.jsonl": data}.get, found)
    assert times is not None
    # Each step from its call's start to the next call's start; the last until its reply.
    assert [s.seconds for s in times.steps] == [12.5, 18.5, 16.25, 9.0]
    assert times.total == pytest.approx(56.25)
    assistants = [t.index for t in found.turns if t.role == "assistant"]
    assert sorted(times.by_turn) == assistants


def test_a_recording_without_times_has_no_step_times():
    data = (REAL / "codex.jsonl").read_bytes().replace(b'"duration_ms"', b'"duration_x"')
    data = data.replace(b'"started_at": "2026-01-01T00:00:00Z"', b'"started_at": null')
    found = transcript.load({"model_calls.jsonl": data}.get)
    assert step_times.load({"model_calls.jsonl": data}.get, found) is None


@pytest.mark.parametrize("cli", ["claude-code", "codex"])
def test_a_cli_in_the_sandbox_counts_the_tool_calls_its_model_asked_for(cli, tmp_path):
    (tmp_path / "model_calls.jsonl").write_bytes(timed_recording(cli))
    found = transcript.load(
        {"model_calls.jsonl": (tmp_path / "model_calls.jsonl").read_bytes()}.get
    )
    assert _tool_calls(None, tmp_path) == found.tool_call_count == 3
    # The bridge's own count wins where the commands came through it (mini-swe-agent).
    assert _tool_calls(5, tmp_path) == 5
    assert _tool_calls(None, tmp_path / "nothing-here") == 0


@pytest.fixture
def cli_attempt(artifacts_root):
    suite = make_suite("cli-facts", tasks=1)
    task = Task.objects.get(suite=suite)
    config = ModelConfig.objects.create(
        name="claude-code run", agent_variant=AgentVariant.CLI, cli_agent="claude-code"
    )
    attempt = make_attempt(make_run(suite, config), task, None)
    write_artifact(attempt, "model_calls.jsonl", timed_recording("claude-code"))
    return attempt


@pytest.mark.django_db
def test_the_attempt_page_shows_step_times_of_a_cli_run(client, bob, cli_attempt):
    client.force_login(bob)
    page = client.get(reverse("attempt-detail", args=[cli_attempt.public_id])).content.decode()
    assert "no step times recorded" not in page
    assert "4 steps in" in page


@pytest.mark.django_db
def test_the_atif_export_of_a_cli_run_has_step_times_and_the_clis_version(client, bob, cli_attempt):
    client.force_login(bob)
    response = client.get(reverse("attempt-atif", args=[cli_attempt.public_id]))
    assert response.status_code == 200
    document = json.loads(response.content)
    agent_steps = [s for s in document["steps"] if s["source"] == "agent"]
    ends = [START + dt.timedelta(seconds=s) for s in (12.5, 31.0, 47.25, 47.25 + 9.0)]
    assert [s.get("timestamp") for s in agent_steps] == [
        e.isoformat().replace("+00:00", "Z") for e in ends
    ]
    assert document["agent"]["version"] == get_definition("claude-code").spec.install.version
    # And it reads back with the same step times.
    back = transcript.parse_atif(document)
    assert transcript.atif.validate(document) == []
    assert len([t for t in back.turns if t.role == "assistant"]) == 4


def test_an_imported_mini_swe_agent_trajectory_exports_as_its_own_version():
    trajs = sorted((SHARED_DIR / "swebench" / "mini_swe_agent_run" / "trajs").rglob("*.traj.json"))
    if not trajs:
        trajs = sorted(
            (REPO_ROOT / "examples" / "swebench" / "mini_swe_agent_run").rglob("*.traj.json")
        )
    assert trajs, "the real mini-swe-agent run ships with the examples"
    data = json.loads(trajs[0].read_text())
    found = transcript.parse_mini_swe_agent(data)
    assert (found.agent_name, found.agent_version) == (
        "mini-swe-agent",
        data["info"]["mini_version"],
    )
    document = transcript.to_atif(found, agent_name="gem100", agent_version=found.agent_version)
    assert document["agent"]["version"] == "1.15.0"
    assert transcript.parse_atif(document).agent_name == "mini-swe-agent"


@pytest.mark.django_db
def test_the_gateways_record_downloads_as_json_lines(client, bob, cli_attempt):
    client.force_login(bob)
    url = reverse("attempt-artifact", args=[cli_attempt.public_id, "model_calls.jsonl"])
    response = client.get(url)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/x-ndjson; charset=utf-8"
    assert response["Content-Disposition"].startswith("attachment")
    assert response["X-Content-Type-Options"] == "nosniff"
    assert artifacts.download_content_type("logs/agent.txt") == "text/plain; charset=utf-8"
    assert artifacts.download_content_type("page.html") == "application/octet-stream"
