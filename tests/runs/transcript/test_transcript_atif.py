"""Trajectories in and out as ATIF (Harbor's Agent Trajectory Interchange Format).

Out: every kind of transcript exports to a document the ``atif`` models (and Harbor's extra
rules) accept, on the API (``?format=atif``) and the attempt page, with the transcript's
rights. In: ``ab import-run`` reads Harbor's job folders (``<trial>/agent/trajectory.json`` with
the trial's ``result.json``) and our own exports; a broken file names itself and the field.
Round trip: our transcript -> ATIF -> import -> the same turns.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from django.urls import reverse

from benchsite.accounts.services import api_token_create
from runs import transcript
from runs.imports.run_import import run_folder_import
from runs.models import Attempt
from runs.transcript import atif
from tasks_app.models import Task
from tasks_app.swebench.errors import SwebenchInputError
from tests.runs.transcript.test_pages_transcript import INSPECT_SAMPLE, MINI_TRAJ, SWE_AGENT_TRAJ
from tests.support.ab_cli import ab
from tests.support.model_calls_fixtures import CONVERSATIONS, jsonl
from tests.support.pages_fixtures import (
    make_attempt,
    make_model,
    make_run,
    make_suite,
    write_artifact,
)

MINI_RUN = MINI_TRAJ.parents[2]


def shape(t: transcript.Transcript) -> list[tuple]:
    return [
        (
            turn.role,
            turn.title,
            turn.text.text,
            turn.reasoning.text if turn.reasoning else "",
            turn.is_error,
            (turn.tokens_in, turn.tokens_out, turn.cost_usd),
            [
                (c.name, c.arguments.text, c.result.text if c.result else None, c.is_error, c.patch)
                for c in turn.tool_calls
            ],
        )
        for turn in t.turns
    ]


def export(t: transcript.Transcript) -> dict:
    return transcript.to_atif(t, agent_name="agentbench-test", agent_version="0.1.0")


def transcripts() -> dict[str, transcript.Transcript]:
    found = {
        "mini-swe-agent": transcript.parse_mini_swe_agent(json.loads(MINI_TRAJ.read_text())),
        "swe-agent": transcript.parse_swe_agent(SWE_AGENT_TRAJ),
        "inspect": transcript.parse_inspect_sample(INSPECT_SAMPLE),
    }
    for api, conversation in CONVERSATIONS.items():
        found[f"calls-{api}"] = transcript.parse_model_calls(jsonl(conversation(True)))
    return found


@pytest.mark.parametrize("kind", list(transcripts()))
def test_every_transcript_exports_to_valid_atif_and_reads_back_the_same(kind):
    original = transcripts()[kind]
    document = export(original)
    assert atif.validate(document) == []
    assert document["schema_version"] == "ATIF-v1.7"
    assert [s["step_id"] for s in document["steps"]] == list(range(1, len(original.turns) + 1))
    back = transcript.parse_atif(json.loads(json.dumps(document)))
    assert shape(back) == shape(original)
    assert (back.tokens_in, back.tokens_out, back.cost_usd) == (
        original.tokens_in,
        original.tokens_out,
        original.cost_usd,
    )
    assert back.submission == original.submission and back.exit_status == original.exit_status


@pytest.mark.slow  # our LLM agent in a real sandbox (either backend)
def test_our_llm_agents_run_exports_with_its_applied_patch(tmp_path):
    from tests.support.transcript_fixtures import run_llm_agent

    folder = run_llm_agent(tmp_path)
    original = transcript.load(lambda rel: _file(folder, rel))
    document = export(original)
    assert atif.validate(document) == []
    patched = [
        c
        for s in document["steps"]
        for c in s.get("tool_calls", [])
        if c["function_name"] == "apply_patch"
    ]
    assert patched and "+    return total(values) / len(values)" in json.dumps(patched)
    assert shape(transcript.parse_atif(document)) == shape(original)


def _file(root: Path, relative: str) -> bytes | None:
    path = root / relative
    return path.read_bytes() if path.is_file() else None


def test_the_check_names_what_breaks_the_format():
    good = export(transcripts()["swe-agent"])
    assert atif.validate(good) == []
    bad = json.loads(json.dumps(good))
    bad["schema_version"] = "ATIF-v9"
    bad["steps"][1]["step_id"] = 7
    bad["steps"][2]["tool_calls"][0].pop("function_name")
    problems = atif.validate(bad)
    assert any(p.startswith("schema_version: 'ATIF-v9' is not one of") for p in problems)
    assert any("steps.2.tool_calls.0.function_name: Field required" in p for p in problems)
    no_steps = dict(good, steps=[])
    assert "steps: at least one step is needed" in atif.validate(no_steps)
    user_metrics = json.loads(json.dumps(good))
    user_metrics["steps"][1]["metrics"] = {"prompt_tokens": 1}  # agent-only field
    assert any("only valid on `source='agent'`" in p for p in atif.validate(user_metrics))


# --- the API and the page --------------------------------------------------------------------


@pytest.fixture
def attempt(artifacts_root, settings):
    settings.ANONYMOUS_READ_ARTIFACTS = False
    suite = make_suite("atif", tasks=2)
    task = Task.objects.get(suite=suite, task_id="task-000")
    found = make_attempt(
        make_run(suite, make_model("claude-code")),
        task,
        "TESTS_FAILED",
        final_patch="diff --git a/x b/x\n",
    )
    write_artifact(found, "model_calls.jsonl", jsonl(CONVERSATIONS["anthropic"](True)))
    return found


def api_url(attempt: Attempt) -> str:
    return f"/api/attempts/{attempt.public_id}/transcript?format=atif"


@pytest.mark.django_db
def test_the_api_exports_atif_with_the_transcripts_rights(client, bob, dave, attempt):
    assert client.get(api_url(attempt)).status_code == 401
    _, token = api_token_create(user=bob, name="reader")
    response = client.get(api_url(attempt), HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 200, response.content
    assert "task-000__0.atif.json" in response["Content-Disposition"]
    document = response.json()
    assert atif.validate(document) == []
    ours = document["extra"]["agentbench"]
    assert ours["attempt"] == str(attempt.public_id) and ours["task_id"] == "task-000"
    assert ours["submission"] == "diff --git a/x b/x\n"
    assert document["agent"]["model_name"] == "claude-sonnet-4-5"
    shown = client.get(
        f"/api/attempts/{attempt.public_id}/transcript", HTTP_AUTHORIZATION=f"Bearer {token}"
    ).json()
    assert len(document["steps"]) == len(shown["turns"])
    # An account outside the readers group is refused, as for the transcript.
    _, other = api_token_create(user=dave, name="not a reader")
    assert client.get(api_url(attempt), HTTP_AUTHORIZATION=f"Bearer {other}").status_code == 403


@pytest.mark.django_db
def test_an_attempt_without_a_transcript_has_no_atif(client, bob, attempt):
    other = make_attempt(attempt.run, Task.objects.get(task_id="task-001"), None)
    client.force_login(bob)
    assert client.get(api_url(other)).status_code == 404
    assert client.get(reverse("attempt-atif", args=[other.public_id])).status_code == 404


@pytest.mark.django_db
def test_the_attempt_page_links_the_atif_download(client, bob, attempt):
    page = reverse("attempt-detail", args=[attempt.public_id])
    download = reverse("attempt-atif", args=[attempt.public_id])
    assert client.get(download).status_code == 302  # a visitor goes to the login page
    client.force_login(bob)
    assert f'href="{download}"' in client.get(page).content.decode()
    response = client.get(download)
    assert response.status_code == 200 and "attachment" in response["Content-Disposition"]
    assert atif.validate(json.loads(response.content)) == []


# --- import ----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_round_trip_our_transcript_to_atif_to_an_import_gives_the_same_turns(
    client, bob, attempt, tmp_path
):
    client.force_login(bob)
    exported = client.get(api_url(attempt)).content
    folder = tmp_path / "exported"
    folder.mkdir()
    (folder / "anything.atif.json").write_bytes(exported)  # the task comes from extra
    report = run_folder_import(path=folder, suite_name="atif", model_name="claude-code (ATIF)")
    imported = Attempt.objects.get(run__public_id=report.run_id, task__task_id="task-000")
    assert imported.status == "not_evaluated" and imported.final_patch == attempt.final_patch
    assert imported.steps == 3 and imported.tool_calls == 2
    assert (imported.tokens_in, imported.tokens_out) == (840, 82)
    first = client.get(f"/api/attempts/{attempt.public_id}/transcript").json()
    again = client.get(f"/api/attempts/{imported.public_id}/transcript").json()
    assert again["source"] == "atif" and again["file"] == "trajectory.atif.json"
    assert again["turns"] == first["turns"]
    assert again["submission"] == attempt.final_patch


def harbor_trajectory(task: str, *, broken: bool = False) -> dict:
    """What Harbor's claude-code agent writes to ``<trial>/agent/trajectory.json``."""
    steps = [
        {
            "step_id": 1,
            "timestamp": "2026-01-05T10:00:00Z",
            "source": "user",
            "message": f"Solve {task}",
        },
        {
            "step_id": 2,
            "timestamp": "2026-01-05T10:00:07Z",
            "source": "agent",
            "model_name": "claude-sonnet-4-5",
            "message": "Let me look.",
            "reasoning_content": "Start with the tests.",
            "tool_calls": [
                {
                    "tool_call_id": "toolu_1",
                    "function_name": "Bash",
                    "arguments": {"command": "ls", "description": "list"},
                }
            ],
            "observation": {"results": [{"source_call_id": "toolu_1", "content": "setup.py"}]},
            "metrics": {"prompt_tokens": 1000, "completion_tokens": 50, "cost_usd": 0.01},
        },
        {
            "step_id": 3,
            "timestamp": "2026-01-05T10:01:07Z",
            "source": "agent",
            "message": "Fixed.",
            "metrics": {"prompt_tokens": 1200, "completion_tokens": 20, "cost_usd": 0.02},
        },
    ]
    if broken:
        steps[1]["observation"]["results"][0]["source_call_id"] = "toolu_nope"
    return {
        "schema_version": "ATIF-v1.6",
        "session_id": f"session-{task}",
        "agent": {"name": "claude-code", "version": "2.0.31", "model_name": "claude-sonnet-4-5"},
        "steps": steps,
        "final_metrics": {
            "total_prompt_tokens": 2200,
            "total_completion_tokens": 70,
            "total_cost_usd": 0.03,
            "total_steps": 3,
        },
    }


def harbor_job(root: Path, trials: dict[str, float | None], broken: str = "") -> Path:
    """A Harbor job folder: one trial per task (reward, or None for an exception)."""
    job = root / "jobs" / "2026-01-05__10-00-00"
    job.mkdir(parents=True)
    shutil.copy(MINI_RUN / "instances.jsonl", job / "instances.jsonl")
    (job / "config.json").write_text(json.dumps({"job_name": "x", "agents": [{"name": "cc"}]}))
    (job / "result.json").write_text(
        json.dumps(
            {
                "id": "j",
                "started_at": "2026-01-05T10:00:00Z",
                "n_total_trials": len(trials),
                "stats": {},
            }
        )
    )
    for task, reward in trials.items():
        trial = job / f"{task[:32]}__AbC1234"
        (trial / "agent").mkdir(parents=True)
        (trial / "agent" / "trajectory.json").write_text(
            json.dumps(harbor_trajectory(task, broken=task == broken))
        )
        (trial / "agent" / "claude-code.txt").write_text("raw CLI output")
        (trial / "config.json").write_text(json.dumps({"task": {"path": task}}))
        result = {
            "task_name": task,
            "trial_name": trial.name,
            "agent_info": {"name": "claude-code", "version": "2.0.31"},
            "verifier_result": None,
        }
        if reward is None:
            result["exception_info"] = {
                "exception_type": "AgentTimeoutError",
                "exception_message": "agent timed out after 900 s",
            }
        else:
            result["verifier_result"] = {"rewards": {"reward": reward}}
        (trial / "result.json").write_text(json.dumps(result))
    return job


TASKS = {"astropy__astropy-13398": 1.0, "django__django-14155": 0.0, "psf__requests-1142": None}


@pytest.mark.django_db
def test_a_harbor_job_folder_imports_its_trials_with_their_verdicts(tmp_path, artifacts_root):
    job = harbor_job(tmp_path, TASKS)
    report = run_folder_import(path=job, suite_name="verified-mini", model_name="cc (Harbor)")
    assert report.counts == {"resolved": 1, "TESTS_FAILED": 1, "SANDBOX_ERROR": 1, "missing": 17}
    resolved = Attempt.objects.get(
        task__task_id="astropy__astropy-13398", model_config__name="cc (Harbor)"
    )
    assert (resolved.tokens_in, resolved.tokens_out, resolved.steps) == (2200, 70, 2)
    assert resolved.duration_sec == 67 and float(resolved.cost_usd) == pytest.approx(0.03)
    shown = transcript.load(lambda rel: _stored(resolved, rel))
    assert shown.source == "atif" and [t.role for t in shown.turns] == [
        "user",
        "assistant",
        "assistant",
    ]
    (call,) = shown.turns[1].tool_calls
    assert call.name == "Bash" and call.result.text == "setup.py"
    errored = Attempt.objects.get(
        task__task_id="psf__requests-1142", model_config__name="cc (Harbor)"
    )
    assert errored.is_infra
    assert "AgentTimeoutError agent timed out after 900 s" in errored.error_text


def _stored(attempt: Attempt, relative: str) -> bytes | None:
    from runs.artifacts import read_bytes

    return read_bytes(attempt, relative, 1 << 24)


@pytest.mark.django_db
def test_a_broken_atif_file_names_itself_and_the_field_and_stores_nothing(tmp_path, artifacts_root):
    job = harbor_job(tmp_path, TASKS, broken="django__django-14155")
    with pytest.raises(SwebenchInputError) as raised:
        run_folder_import(path=job, suite_name="verified-mini", model_name="cc (Harbor)")
    message = str(raised.value)
    assert "django__django-14155__AbC1234/agent/trajectory.json" in message
    assert "not a valid ATIF trajectory" in message and "toolu_nope" in message
    assert not Attempt.objects.filter(model_config__name="cc (Harbor)").exists()


def test_ab_import_run_reads_a_harbor_job_with_one_command(tmp_path):
    job = harbor_job(tmp_path, TASKS)
    var = tmp_path / "var"
    done = ab(
        "import-run", str(job), "--suite", "verified-mini", "--model", "cc (Harbor)", var_dir=var
    )
    assert done.returncode == 0, done.stderr
    assert "ATIF trajectory: 3 file(s)" in done.stdout and "1/20 resolved" in done.stdout


@pytest.mark.django_db
def test_the_api_upload_of_a_harbor_job_imports_it_the_same_way(client, alice, tmp_path, settings):
    """POST /api/imports/run (and the admin's upload) share ab import-run's code."""
    from tests.runs.imports.test_api_imports import upload
    from tests.tasks_app.swebench.test_swebench_admin import zip_of

    settings.API_UPLOADS_ROOT = tmp_path / "uploads"
    settings.ARTIFACTS_ROOT = tmp_path / "artifacts"
    settings.STORAGES = settings.STORAGES | {
        "artifacts": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path / "artifacts")},
        }
    }
    _, token = api_token_create(user=alice, name="importer")
    job = harbor_job(tmp_path, TASKS)
    form = {
        "suite": "verified-mini",
        "model": "cc (Harbor)",
        "file": upload("job.zip", zip_of(job)),
    }
    response = client.post("/api/imports/run", form, HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["resolved"], body["suite_size"]) == (1, 20)
    assert any("ATIF trajectory: 3 file(s)" in line for line in body["plan"])
