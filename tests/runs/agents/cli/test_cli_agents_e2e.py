"""The real agent CLIs (Claude Code, Codex CLI, mini-swe-agent, Qwen Code, Gemini CLI,
OpenCode), installed from the registries at their pinned versions into the install cache, fix a
task in our sandbox on both backends, their model calls going through the gateway to the tests'
fake provider replaying a plan (tests/support/fake_provider_plans.py): read the file, run the
tests, apply the fix, finish.

The sandbox has no network: the gateway is the one address the CLI reaches. The first run on a
machine builds the installs (about a minute for the two npm packages, a few for the venv).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from runs.agents.cli.definition import load_definitions
from runs.agents.cli.install import ensure_install
from runs.models import AttemptStatus
from runs.pipeline.adhoc import attempt_create_adhoc
from runs.pipeline.execute import attempt_execute
from tests.support.fake_provider import FakeProvider
from tests.support.fake_provider_plans import (
    REAL_KEY,
    UPSTREAM_KEY_ENV,
    WIRE_PATH,
    cli_model_config,
    fix_plan,
    keys_seen,
    plan_provider,
    scrubbed_recording,
)
from tests.support.pipeline_fixtures import attempt_folder, get_task, import_tasks, run_json

pytestmark = [pytest.mark.django_db, pytest.mark.docker, pytest.mark.bwrap, pytest.mark.slow]

CLIS = [
    "claude-code",
    "codex",
    "mini-swe-agent",
    "qwen-code",
    "gemini-cli",
    "opencode",
    "aider",
]
TOY_OLD = "    return total(values) // len(values)"
TOY_NEW = "    return total(values) / len(values)"


@pytest.fixture(scope="session")
def cli_installs() -> dict:
    """Every shipped CLI's install (and its runtime), from the cache (built on first use)."""
    installs = {}
    for name, definition in load_definitions().items():
        installs[name] = ensure_install(definition).path
        runtime = definition.runtime_part()
        if runtime is not None:
            ensure_install(runtime)
    return installs


# The plan's four steps are four calls; aider has no tools: its edit is in its first answer.
MIN_CALLS = {
    "aider": 1,
}


def assert_ran_through_the_gateway(attempt, upstream: FakeProvider, cli: str) -> list[dict]:
    """The CLI's calls reached the upstream with the real key (the CLI had only the token),
    every one recorded in model_calls.jsonl with its tokens."""
    calls = upstream.requests_to(WIRE_PATH[cli])
    assert len(calls) >= MIN_CALLS.get(cli, 4), [r.path for r in upstream.requests]
    assert keys_seen(upstream) == {REAL_KEY}
    records = [
        json.loads(line)
        for line in (attempt_folder(attempt) / "model_calls.jsonl").read_text().splitlines()
    ]
    model_calls = [r for r in records if r.get("model_call")]
    assert len(model_calls) == len(calls)
    assert REAL_KEY not in (attempt_folder(attempt) / "model_calls.jsonl").read_text()
    assert attempt.steps == len(calls)
    assert attempt.tokens_in == sum(r["usage"]["input_tokens"] for r in model_calls) > 0
    # The attempt's cost is its calls' as the gateway priced them, by class (docs/cost.md).
    costs = [r["cost_usd"] for r in model_calls]
    if None in costs:
        assert (attempt.cost_basis, attempt.cost_usd) == ("unknown", None)
    else:
        assert attempt.cost_basis == "priced"
        assert float(attempt.cost_usd) == pytest.approx(sum(costs), abs=2e-6)
    reads = sum(r["usage"]["classes"]["cache_read"] for r in model_calls)
    assert attempt.tokens_cache_read == reads
    return model_calls


TOOL_NAMES = {
    "claude-code": ["Read", "Bash", "Edit"],
    "codex": ["exec_command"] * 3,
    # Its actions are bash blocks in its text, read as "bash" calls; the last one submits.
    "mini-swe-agent": ["bash"] * 4,
    "qwen-code": ["read_file", "run_shell_command", "edit"],
    "gemini-cli": ["read_file", "run_shell_command", "replace"],
    "opencode": ["read", "bash", "edit"],
    # No tools: it edits with SEARCH/REPLACE blocks in its answer's text.
    "aider": [],
}


def assert_the_page_shows_the_cli_run(client, reader, attempt, cli: str) -> None:
    """The attempt page and the transcript API show the CLI's model calls and tool calls,
    read from what the gateway recorded."""
    from django.urls import reverse

    client.force_login(reader)
    page = client.get(reverse("attempt-detail", args=[attempt.public_id])).content.decode()
    assert "model calls (recorded by the gateway)" in page
    assert 'id="cli-exit"' in page
    api = client.get(f"/api/attempts/{attempt.public_id}/transcript").json()
    assert api["source"] == "model-calls" and api["api_calls"] == attempt.steps
    calls = [c for t in api["turns"] for c in t.get("tool_calls") or []]
    assert [c["name"] for c in calls] == TOOL_NAMES[cli], calls
    # Each with its result as the CLI sent it back (mini-swe-agent's submit gets none).
    answered = calls[:-1] if cli == "mini-swe-agent" else calls
    assert all(c["result"]["text"] for c in answered)
    for name in TOOL_NAMES[cli]:
        assert name in page
    # The attempt's own count is the transcript's (a CLI in the sandbox runs its tools itself,
    # so only the recorded model calls know them), on the page header and in the API alike.
    assert attempt.tool_calls == len(calls)
    detail = client.get(f"/api/attempts/{attempt.public_id}").json()
    assert detail["tool_calls"] == len(calls)


@pytest.mark.parametrize("cli", CLIS)
def test_each_cli_fixes_the_toy_task_through_the_gateway(
    cli, backend, artifacts_root, monkeypatch, cli_installs, client, bob
):
    monkeypatch.setenv(UPSTREAM_KEY_ENV, REAL_KEY)
    import_tasks()
    task = get_task("toy_fail_pytest")
    plan = fix_plan(
        workdir="/workspace/repo",
        path="src/toy/calc.py",
        old=TOY_OLD,
        new=TOY_NEW,
        test_command="PYTHONPATH=src python -m pytest -q tests/test_calc.py",
    )
    # A condition writes the CLI's own context file: its text reaches the model.
    context_file = load_definitions()[cli].spec.context_file
    note = f"Project note for {cli}: the averages are true divisions."
    files = {context_file: note + "\n"} if context_file else {}
    with plan_provider(plan) as upstream:
        config = cli_model_config(cli, upstream, workspace_files=files)
        attempt = attempt_execute(
            attempt_create_adhoc(task=task, model_config=config), backend=backend
        )

    assert attempt.status == AttemptStatus.FINISHED
    if context_file:
        assert attempt.failure_reason_id is None, attempt.error_text
        # (in the first call of its loop: OpenCode's first call names the session)
        sent = [r.body.decode() for r in upstream.requests_to(WIRE_PATH[cli])]
        assert any(note in body for body in sent[:2]), (context_file, sent[0][:3000])
    assert attempt.failure_reason_id is None, attempt.error_text
    assert attempt.agent_exit_code == 0 and attempt.agent_signal is None
    # The final patch is the workspace's diff: the fix, and nothing the CLI wrote in its HOME.
    assert attempt.files_touched == ["src/toy/calc.py"], attempt.final_patch
    assert f"+{TOY_NEW}" in attempt.final_patch
    assert_ran_through_the_gateway(attempt, upstream, cli)
    record = run_json(attempt)
    assert record["outcome"]["agent_exit_code"] == 0
    assert record["model"]["cli_agent"] == cli
    log = (attempt_folder(attempt) / "logs" / "agent.txt").read_text()
    assert log.startswith("# stage agent_run") and "exit 0" in log
    for stored in (log, json.dumps(record), attempt.error_text + attempt.stderr_tail):
        assert REAL_KEY not in stored
    assert_the_page_shows_the_cli_run(client, bob, attempt, cli)
    # AB_RECORD_MODEL_CALLS=tests/data/model_calls refreshes the committed recordings.
    record_to = os.environ.get("AB_RECORD_MODEL_CALLS")
    if record_to and backend == "docker":
        text = (attempt_folder(attempt) / "model_calls.jsonl").read_text()
        (Path(record_to) / f"{cli}.jsonl").write_text(scrubbed_recording(text))


SWEBENCH_INSTANCE = "marshmallow-code__marshmallow-1359"
MARSHMALLOW_OLD = "            or getattr(schema.opts, self.SCHEMA_OPTS_VAR_NAME)"
MARSHMALLOW_NEW = "            or getattr(self.root.opts, self.SCHEMA_OPTS_VAR_NAME)"


@pytest.fixture
def marshmallow(tmp_path, settings):
    """The SWE-bench instance, imported and built offline (cached after the first build)."""
    from benchsite.cli.main import main
    from tasks_app.models import Task
    from tests.support.swebench_fixtures import EXAMPLES, LITE_DEV, rows, write_jsonl

    row = next(r for r in rows(LITE_DEV) if r["instance_id"] == SWEBENCH_INSTANCE)
    path = write_jsonl(tmp_path / "lite.jsonl", [row])
    assert main(["import-swebench", str(path), "--suite", "lite-cli"]) == 0
    # Built with Docker: the trees (bubblewrap) and the images (Docker) both.
    build = ["swebench", "build", "lite-cli", "--repos", str(EXAMPLES / "repos")]
    assert main([*build, "--backend", "docker"]) == 0
    return Task.objects.get(suite__name="lite-cli", task_id=SWEBENCH_INSTANCE)


@pytest.mark.parametrize("cli", CLIS)
def test_each_cli_resolves_the_swebench_instance_through_the_gateway(
    cli, backend, artifacts_root, monkeypatch, cli_installs, marshmallow
):
    from runs.pipeline.plan import plan_for_task

    monkeypatch.setenv(UPSTREAM_KEY_ENV, REAL_KEY)
    workdir = plan_for_task(marshmallow, default_image="").workdir
    plan = fix_plan(
        workdir=workdir,
        path="src/marshmallow/fields.py",
        old=MARSHMALLOW_OLD,
        new=MARSHMALLOW_NEW,
        test_command="python -m pytest -q -x tests/test_fields.py -k TestParentAndName",
    )
    with plan_provider(plan) as upstream:
        config = cli_model_config(cli, upstream)
        attempt = attempt_execute(
            attempt_create_adhoc(task=marshmallow, model_config=config), backend=backend
        )

    # On a failure, the end of the CLI's last request too: what its tools answered it.
    last = upstream.requests_to(WIRE_PATH[cli])[-1:]
    said = last[0].body.decode(errors="replace")[-3000:] if last else ""
    assert (attempt.grade, attempt.failure_reason_id) == ("FULL", None), (
        f"{attempt.error_text}\n--- the CLI's last request ends:\n{said}"
    )
    assert attempt.files_touched == ["src/marshmallow/fields.py"], attempt.final_patch
    assert attempt.agent_exit_code == 0
    assert_ran_through_the_gateway(attempt, upstream, cli)
