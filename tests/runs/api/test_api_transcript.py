"""GET /api/attempts/{id}/transcript: the attempt page's normalised transcript as JSON.

On an imported attempt of the real mini-swe-agent run and on an Inspect sample; read like
the other artifacts (readers' tokens and sessions, staff, ANONYMOUS_READ_ARTIFACTS).
"""

from __future__ import annotations

import json

import pytest

from benchsite.accounts.services import api_token_create
from runs.imports.run_import import run_folder_import
from runs.models import Attempt
from tasks_app.models import Task
from tasks_app.swebench.importer import swebench_import
from tests.runs.imports.test_run_import import INSPECT_LOG, MINI
from tests.support.pages_fixtures import (
    make_attempt,
    make_model,
    make_run,
    make_suite,
    write_artifact,
)

pytestmark = pytest.mark.django_db

INSTANCE = "django__django-14155"


@pytest.fixture
def imported(artifacts_root, settings) -> Attempt:
    settings.ANONYMOUS_READ_ARTIFACTS = False
    run_folder_import(path=MINI, suite_name="verified-mini", model_name="mini-swe-agent")
    return Attempt.objects.get(task__task_id=INSTANCE)


def url(attempt: Attempt) -> str:
    return f"/api/attempts/{attempt.public_id}/transcript"


def test_it_returns_an_imported_trajectory_turn_by_turn(client, bob, imported):
    _, token = api_token_create(user=bob, name="reader")
    response = client.get(url(imported), HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 200
    data = response.json()
    raw = json.loads((MINI / "trajs" / INSTANCE / f"{INSTANCE}.traj.json").read_text())
    stats = raw["info"]["model_stats"]

    assert (data["source"], data["file"]) == ("mini-swe-agent", "trajectory.traj.json")
    assert data["error"] == "" and data["exit_status"] == raw["info"]["exit_status"]
    assert data["submission"] == raw["info"]["submission"] == imported.final_patch
    assert data["api_calls"] == stats["api_calls"] == imported.steps
    assert data["cost_usd"] == pytest.approx(stats["instance_cost"])
    assert data["tool_call_count"] == imported.tool_calls
    # Every message is a turn or the result of the command before it.
    calls = [c for t in data["turns"] for c in t["tool_calls"]]
    assert len(data["turns"]) + len(calls) == len(raw["messages"])
    assert data["turns"][0]["role"] == "system"
    assert data["turns"][0]["text"]["text"] == raw["messages"][0]["content"]
    first = calls[0]
    assert first["name"] == "bash"
    assert first["arguments"]["text"] == 'find . -name "*.py" | xargs grep -l "class ResolverMatch"'
    assert first["result"]["text"] == raw["messages"][3]["content"]
    assert first["result"]["total_chars"] == len(raw["messages"][3]["content"])
    assert sum(t["tokens_in"] or 0 for t in data["turns"]) == data["tokens_in"]


def test_it_returns_an_inspect_sample_with_its_scores(client, alice, artifacts_root):
    swebench_import(source=MINI / "instances.jsonl", suite_name="verified-mini")
    run_folder_import(path=INSPECT_LOG, suite_name="verified-mini", model_name="insp")
    attempt = Attempt.objects.get(task__task_id="psf__requests-1142")
    client.force_login(alice)  # staff read without the readers group
    data = client.get(url(attempt)).json()
    assert data["source"] == "inspect" and data["model"] == "mockllm/model"
    assert data["scores"] == [{"scorer": "patch_scorer", "value": "C"}]
    assistant = [t for t in data["turns"] if t["role"] == "assistant"]
    assert (assistant[0]["tokens_in"], assistant[0]["tokens_out"]) == (1200, 300)


def test_it_follows_the_artifact_access_rule(client, dave, imported, settings):
    assert client.get(url(imported)).status_code == 401
    _, plain = api_token_create(user=dave, name="plain")
    refused = client.get(url(imported), HTTP_AUTHORIZATION=f"Bearer {plain}")
    assert refused.status_code == 403 and "readers" in refused.json()["detail"]
    settings.ANONYMOUS_READ_ARTIFACTS = True
    assert client.get(url(imported)).json()["source"] == "mini-swe-agent"


def test_it_says_when_there_is_no_transcript_or_it_cannot_be_read(client, alice, artifacts_root):
    suite = make_suite("nt", tasks=1)
    attempt = make_attempt(make_run(suite, make_model("m")), Task.objects.get(suite=suite))
    client.force_login(alice)
    missing = client.get(url(attempt))
    assert missing.status_code == 404 and "no transcript" in missing.json()["detail"]
    write_artifact(attempt, "trajectory.traj.json", b'{"messages": [1, 2,]}')
    broken = client.get(url(attempt))
    assert broken.status_code == 200
    assert broken.json()["error"].startswith("trajectory.traj.json:")
    assert broken.json()["turns"] == []
