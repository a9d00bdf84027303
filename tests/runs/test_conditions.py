"""Conditions: the files a model configuration adds to the workspace before its agent starts.

Checked when stored (API, admin form, model), written into a real sandbox on both backends
through its link-safe file methods, read by real CLIs (Claude Code's CLAUDE.md, Codex's
AGENTS.md reach the model), kept out of the final patch, and shown: the
configuration's page and API, the leaderboard's row, and compare's pair of two conditions of
one agent with its paired test.
"""

from __future__ import annotations

import json
import os

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from runs import conditions
from runs.models import AgentVariant, ModelConfig
from runs.pipeline.adhoc import attempt_create_adhoc, model_config_for_variant
from runs.pipeline.execute import attempt_execute
from tests.support.pipeline_fixtures import (
    attempt_folder,
    get_task,
    git_repo,
    import_tasks,
    write_task,
)

AGENTS_MD = "# Notes for agents\nRun the tests with pytest before you stop.\n"
SKILL = "---\nname: fix-division\n---\nUse / for a mean.\n"
FILES = {"AGENTS.md": AGENTS_MD, ".claude/skills/fix-division/SKILL.md": SKILL}


# --- checking --------------------------------------------------------------------------------


def test_paths_must_stay_in_the_repository_and_out_of_git():
    bad = {
        "/etc/passwd": "x",
        "../up.md": "x",
        "a/./b.md": "x",
        ".git/hooks/pre-commit": "x",
        "sub/.GIT/config": "x",
        "a\\b.md": "x",
        "": "x",
        "notes.md": 3,
        "dir": "x",
        "dir/inner.md": "x",
    }
    with pytest.raises(conditions.ConditionError) as raised:
        conditions.clean_files(bad)
    problems = "\n".join(raised.value.problems)
    for path in (
        "/etc/passwd",
        "../up.md",
        "a/./b.md",
        ".git/hooks/pre-commit",
        "sub/.GIT/config",
        "a\\\\b.md",
        "notes.md",
        "dir",
    ):
        assert path in problems, path
    assert "nothing inside .git" in problems and "must be relative" in problems
    assert conditions.clean_files(FILES) == dict(sorted(FILES.items()))


def test_sizes_and_counts_are_capped():
    with pytest.raises(conditions.ConditionError, match=r"AGENTS\.md: 11 bytes, over the 10-byte"):
        conditions.clean_files({"AGENTS.md": "x" * 11}, max_file_bytes=10)
    with pytest.raises(conditions.ConditionError, match="3 files, over the limit of 2"):
        conditions.clean_files({"a": "", "b": "", "c": ""}, max_files=2)
    with pytest.raises(conditions.ConditionError, match="12 bytes in all, over the 10-byte"):
        conditions.clean_files({"a": "x" * 6, "b": "y" * 6}, max_total_bytes=10)


@pytest.mark.django_db
def test_the_model_names_the_field_and_labels_the_condition():
    config = ModelConfig(
        name="with notes",
        slug="with-notes",
        agent_variant="scripted",
        workspace_files={"../x": "y"},
    )
    with pytest.raises(ValidationError) as raised:
        config.full_clean()
    assert "workspace_files" in raised.value.message_dict
    config.workspace_files = FILES
    config.full_clean()
    config.save()
    assert config.condition.startswith(".claude/skills/fix-division/SKILL.md, AGENTS.md · ")
    plain = ModelConfig.objects.create(name="plain", agent_variant="scripted")
    assert plain.condition == "" and plain.agent_key() == config.agent_key()
    other = ModelConfig.objects.create(name="other", agent_variant="scripted", max_steps=5)
    assert other.agent_key() != plain.agent_key()


@pytest.mark.django_db
def test_the_api_stores_checks_and_shows_the_files(client, alice):
    client.force_login(alice)
    payload = {"name": "scripted + notes", "agent_variant": "scripted", "workspace_files": FILES}
    created = client.post("/api/model-configs", payload, content_type="application/json")
    assert created.status_code in (200, 201), created.content
    shown = client.get(f"/api/model-configs/{created.json()['slug']}").json()
    assert shown["workspace_files"] == FILES and shown["condition"]
    bad = dict(payload, name="bad", workspace_files={".git/config": "x"})
    refused = client.post("/api/model-configs", bad, content_type="application/json")
    assert refused.status_code in (400, 422)
    assert (
        "workspace_files" in refused.content.decode() and ".git/config" in refused.content.decode()
    )
    assert not ModelConfig.objects.filter(name="bad").exists()


@pytest.mark.django_db
def test_the_configuration_page_shows_its_files_escaped(client):
    script = "<script>window.__xss=1</script>"
    config = ModelConfig.objects.create(
        name="notes", agent_variant="scripted", workspace_files={"AGENTS.md": script}
    )
    ModelConfig.objects.create(name="bare", agent_variant="scripted")
    body = client.get(reverse("model-config-detail", args=[config.slug])).content.decode()
    assert "AGENTS.md" in body and script not in body and "&lt;script&gt;" in body
    assert 'id="other-conditions"' in body and ">bare</a>" in body


# --- in a real sandbox -----------------------------------------------------------------------


def _config(name: str, files: dict, variant: str = AgentVariant.SCRIPTED) -> ModelConfig:
    config = model_config_for_variant(variant, name=name)
    config.workspace_files = files
    config.full_clean()
    config.save()
    return config


def _run(task, config, backend):
    return attempt_execute(attempt_create_adhoc(task=task, model_config=config), backend=backend)


@pytest.mark.django_db
def test_the_scripted_agent_sees_the_files_and_the_patch_leaves_them_out(backend, artifacts_root):
    import_tasks()
    attempt = _run(get_task("toy_fail_pytest"), _config("scripted + notes", FILES), backend)

    assert attempt.failure_reason_id is None, attempt.error_text
    stages = list(attempt.stages.order_by("order").values_list("name", flat=True))
    assert (
        stages.index("baseline_run") < stages.index("condition_files") < stages.index("agent_run")
    )
    # The agent found them: its first tool call lists the repository.
    events = [
        json.loads(line)
        for line in (attempt_folder(attempt) / "events.jsonl").read_text().splitlines()
    ]
    listing = next(e for e in events if e.get("event") == "tool_finish")
    assert "AGENTS.md" in listing["output"]
    # Its own change is the patch; the condition's files are not.
    assert attempt.files_touched == ["src/toy/calc.py"]
    assert "AGENTS.md" not in attempt.final_patch and "SKILL.md" not in attempt.final_patch
    log = (attempt_folder(attempt) / "logs" / "condition_files.txt").read_text()
    assert "AGENTS.md: " in log and ".claude/skills/fix-division/SKILL.md: " in log


# Each CLI reads its own instructions file from the repository it works in and sends it to
# the model: what the scripted provider receives shows the condition reached the model.
CLI_CONDITIONS = [
    pytest.param("claude-code", "CLAUDE.md", "bwrap", marks=pytest.mark.bwrap, id="claude-code"),
    pytest.param("codex", "AGENTS.md", "docker", marks=pytest.mark.docker, id="codex"),
    pytest.param("qwen-code", "QWEN.md", "bwrap", marks=pytest.mark.bwrap, id="qwen-code"),
    pytest.param("gemini-cli", "GEMINI.md", "docker", marks=pytest.mark.docker, id="gemini-cli"),
    pytest.param("opencode", "AGENTS.md", "bwrap", marks=pytest.mark.bwrap, id="opencode"),
]
# A tool only its working loop offers (not its side requests: a title, a memory extractor).
LOOP_TOOL = {
    "claude-code": '"name": "Read"',
    "codex": '"name": "exec_command"',
    "qwen-code": '"name": "skill"',
    "gemini-cli": '"name": "replace"',
    "opencode": '"name": "bash"',
}


@pytest.mark.django_db
@pytest.mark.slow
@pytest.mark.parametrize(("cli", "path", "backend_name"), CLI_CONDITIONS)
def test_a_real_cli_sends_the_conditions_instructions_to_the_model(
    cli, path, backend_name, artifacts_root, monkeypatch
):
    from tests.support.fake_provider_plans import (
        REAL_KEY,
        UPSTREAM_KEY_ENV,
        WIRE_PATH,
        cli_model_config,
        fix_plan,
        plan_provider,
    )

    marker = "agentbench-condition-7f3a: prefer true division in calc.py"
    monkeypatch.setenv(UPSTREAM_KEY_ENV, REAL_KEY)
    import_tasks()
    plan = fix_plan(
        workdir="/workspace/repo",
        path="src/toy/calc.py",
        old="    return total(values) // len(values)",
        new="    return total(values) / len(values)",
        test_command="PYTHONPATH=src python -m pytest -q tests/test_calc.py",
    )
    with plan_provider(plan) as upstream:
        config = cli_model_config(cli, upstream, name=f"{cli} + {path}")
        config.workspace_files = {path: f"# Notes for this repository\n\n{marker}\n"}
        config.full_clean()
        config.save()
        attempt = _run(get_task("toy_fail_pytest"), config, backend_name)
        bodies = [json.dumps(r.json) for r in upstream.requests_to(WIRE_PATH[cli])]

    assert attempt.failure_reason_id is None, attempt.error_text
    # Every call of its working loop (those offering its tools; not side requests such as a
    # title) carries the file's text: the CLI put it in the conversation it sends.
    assert conditions.CONTEXT_FILES[cli] == path
    loop = [b for b in bodies if LOOP_TOOL[cli] in b]
    assert len(loop) >= 4, [b[:300] for b in bodies]  # the plan: read, test, fix, finish
    assert all(marker in b for b in loop)
    assert attempt.files_touched == ["src/toy/calc.py"] and path not in attempt.final_patch


@pytest.mark.django_db
def test_links_the_repository_planted_are_never_followed(backend, artifacts_root, tmp_path):
    """A folder link is refused (the attempt ends before the agent, as infrastructure); a
    link at the file itself is replaced by the file, its target untouched."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "target.md").write_text("keep me")
    repo = tmp_path / "repo"
    commit = git_repo(
        repo,
        {
            "calc.py": "def mean(v):\n    return sum(v) // len(v)\n",
            "test_calc.py": "from calc import mean\n\n"
            "def test_mean():\n    assert mean([1, 2]) == 1.5\n",
        },
    )
    os.symlink(str(outside), repo / "docs")
    os.symlink(str(outside / "target.md"), repo / "NOTES.md")
    import subprocess

    env = os.environ | {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@x.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@x.invalid",
    }
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True, env=env)
    subprocess.run(["git", "-C", str(repo), "commit", "-qm", "links"], check=True, env=env)
    commit = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    write_task(
        tmp_path / "tasks",
        "links",
        f"""
        repo: {{url: {repo}, commit: {commit}}}
        environment:
          {{docker_image: agentbench/py-runner:0.1.0, workdir: /workspace/repo, timeout_sec: 60}}
        run: {{command: python -m pytest -q test_calc.py}}
        validation: {{expected_exit_codes: [1]}}
    """,
    )
    import_tasks(tmp_path / "tasks", also=[tmp_path])
    task = get_task("links", suite="pipeline-test")

    through_folder = _run(task, _config("nop + docs", {"docs/evil.md": "x"}, "nop"), backend)
    assert through_folder.failure_reason_id == "SETUP_FAILED" and through_folder.is_infra
    assert "[condition-files] docs/evil.md" in through_folder.error_text
    assert not (outside / "evil.md").exists()
    assert "agent_run" not in set(through_folder.stages.values_list("name", flat=True))

    over_link = _run(task, _config("nop + notes", {"NOTES.md": "new notes"}, "nop"), backend)
    assert over_link.failure_stage != "condition_files", over_link.error_text
    assert (outside / "target.md").read_text() == "keep me"
    assert "NOTES.md" not in over_link.final_patch


# --- shown as conditions ---------------------------------------------------------------------


@pytest.mark.django_db
def test_compare_and_the_leaderboard_show_two_conditions_of_one_agent(client):
    from tasks_app.models import Task
    from tests.support.pages_fixtures import make_attempt, make_run, make_suite

    suite = make_suite("cond", tasks=4)
    bare = ModelConfig.objects.create(name="agent", agent_variant="llm", model_name="m")
    notes = ModelConfig.objects.create(
        name="agent + AGENTS.md",
        agent_variant="llm",
        model_name="m",
        workspace_files={"AGENTS.md": "hi"},
    )
    tasks = list(Task.objects.filter(suite=suite).order_by("task_id"))
    for i, task in enumerate(tasks):
        make_attempt(make_run(suite, bare), task, None if i == 0 else "TESTS_FAILED")
        make_attempt(make_run(suite, notes), task, None if i < 3 else "TESTS_FAILED")

    data = client.get(f"/api/compare?suite=cond&models={bare.slug},{notes.slug}").json()
    (pair,) = data["pairs"]
    assert pair["same_agent"] is True and pair["delta"] == pytest.approx(0.5)
    assert pair["b"]["condition"] == notes.condition and pair["a"]["condition"] == ""
    assert pair["fixed_by_b"] == ["task-001", "task-002"] and 0 < pair["p_value"] <= 1
    page = client.get(
        reverse("suite-compare", args=["cond"]), {"models": f"{bare.slug},{notes.slug}"}
    ).content.decode()
    assert "Two conditions of one agent" in page and notes.condition in page

    rows = client.get("/api/leaderboard?suite=cond").json()["rows"]
    assert {r["model"]["slug"]: r["condition"] for r in rows} == {
        bare.slug: "",
        notes.slug: notes.condition,
    }
    board = client.get(reverse("suite-leaderboard", args=["cond"])).content.decode()
    assert f"condition {notes.condition}" in board

    other = ModelConfig.objects.create(name="other agent", agent_variant="llm", model_name="m2")
    for task in tasks:
        make_attempt(make_run(suite, other), task, "TESTS_FAILED")
    data = client.get(f"/api/compare?suite=cond&models={bare.slug},{other.slug}").json()
    assert data["pairs"][0]["same_agent"] is False


@pytest.mark.django_db
def test_the_admin_edits_the_files_as_json_and_shows_the_condition(client, alice):
    config = ModelConfig.objects.create(
        name="notes", agent_variant="scripted", workspace_files=FILES
    )
    client.force_login(alice)
    page = client.get(reverse("admin:runs_modelconfig_change", args=[config.pk])).content.decode()
    assert 'name="workspace_files"' in page and "fix-division" in page
    assert config.condition in page
    listing = client.get(reverse("admin:runs_modelconfig_changelist")).content.decode()
    assert config.condition in listing
