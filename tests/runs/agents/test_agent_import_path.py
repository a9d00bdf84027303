"""Agents named by import path (variant "import", issue 33): validation naming the field, the
allow-list, who may set the path, and attempts of the example agent on a real sandbox."""

from __future__ import annotations

import json
import sys
import uuid

import pytest
from django.core.exceptions import ValidationError

from benchsite.accounts.models import AuditEvent
from runs.agents.imported import ImportPathError, resolve
from runs.models import AgentVariant, AttemptStatus, ModelConfig
from runs.pipeline.adhoc import attempt_create_adhoc, model_config_for_variant
from runs.pipeline.execute import attempt_execute
from tests.conftest import TASKS_DIR
from tests.support.ab_cli import ab_main
from tests.support.pipeline_fixtures import attempt_folder, get_task, import_tasks

pytestmark = pytest.mark.django_db

EXAMPLE = "examples.agents.division_fixer:DivisionFixer"
TOY_TASK = TASKS_DIR / "custom-dev/toy_fail_pytest/task.yaml"


@pytest.fixture
def listed(settings):
    settings.AGENT_IMPORT_PATHS = ["examples.agents", "runs.agents.simple"]


def config(path: str, name: str = "imported") -> ModelConfig:
    return ModelConfig(
        name=name, slug=name, agent_variant=AgentVariant.IMPORT, agent_import_path=path
    )


def clean_error(path: str) -> str:
    with pytest.raises(ValidationError) as caught:
        config(path).full_clean()
    problems = caught.value.message_dict
    assert list(problems) == ["agent_import_path"], problems
    return problems["agent_import_path"][0]


@pytest.mark.usefixtures("listed")
@pytest.mark.parametrize(
    "path, expected",
    [
        ("examples.agents.division_fixer.DivisionFixer", "is not 'package.module:ClassName'"),
        ("examples.agents.division_fixer:", "is not 'package.module:ClassName'"),
        ("examples/agents:X", "is not 'package.module:ClassName'"),
        (
            "examples.agents.no_such_module:Agent",
            "cannot import 'examples.agents.no_such_module:Agent': ModuleNotFoundError",
        ),
        ("examples.agents.division_fixer:Nope", "'examples.agents.division_fixer' has no Nope"),
        ("examples.agents.division_fixer:difflib", "is not a class (module)"),
        ("examples.agents.division_fixer:AgentOutcome", "is not an agent: it needs a run(ctx)"),
        ("os.path:join", "module 'os.path' is not under AGENT_IMPORT_PATHS"),
        ("examples.agentsx:Agent", "module 'examples.agentsx' is not under AGENT_IMPORT_PATHS"),
    ],
)
def test_a_bad_import_path_is_refused_naming_the_field(path, expected):
    assert expected in clean_error(path)


def test_the_default_allow_list_is_empty_and_an_unlisted_module_is_never_imported(settings):
    assert settings.AGENT_IMPORT_PATHS == []  # the shipped default: no import path at all
    canary = "tests.agent_import_canary_never_imported"
    assert "none: the setting is empty" in clean_error(f"{canary}:Agent")
    assert canary not in sys.modules
    with pytest.raises(ValidationError) as caught:  # a plain save (the CLIs') checks it too
        config(EXAMPLE).save()
    assert "agent_import_path" in caught.value.message_dict
    assert not ModelConfig.objects.exists()


@pytest.mark.usefixtures("listed")
def test_both_forms_are_accepted_and_the_path_belongs_to_the_import_variant():
    assert resolve(EXAMPLE, ["examples.agents"]).form == "agent"
    assert resolve("runs.agents.simple:NopPolicy", ["runs.agents.simple"]).form == "policy"
    config(EXAMPLE).full_clean()
    with pytest.raises(ValidationError) as caught:
        scripted = ModelConfig(name="x", slug="x", agent_variant="scripted")
        scripted.agent_import_path = EXAMPLE
        scripted.full_clean()
    assert caught.value.message_dict == {"agent_import_path": ["only for the variant 'import'"]}
    assert "name the agent" in clean_error("")
    with pytest.raises(ImportPathError, match="not under AGENT_IMPORT_PATHS"):
        resolve(EXAMPLE, [])


class Raising:
    name = "raising"

    def run(self, ctx):
        raise RuntimeError("boom")


class SaysYes:
    def run(self, ctx):
        return "yes"


@pytest.mark.parametrize(
    "cls, expected",
    [
        ("Raising", f"[agent-crashed] {__name__}:Raising raised RuntimeError: boom"),
        ("SaysYes", f"[agent-crashed] {__name__}:SaysYes.run returned str, not AgentOutcome"),
    ],
)
def test_an_agent_that_raises_or_answers_nonsense_ends_with_a_named_reason(
    settings, tmp_path, cls, expected
):
    from runs.agents.contract import AgentContext, Budgets, ModelSettings, TaskView
    from runs.agents.registry import build_agent
    from runs.taxonomy import Reason

    settings.AGENT_IMPORT_PATHS = ["tests.runs.agents.test_agent_import_path"]
    model = ModelSettings(
        variant="import", agent_import_path=f"tests.runs.agents.test_agent_import_path:{cls}"
    )
    agent = build_agent(model)
    task = TaskView(task_id="t", workdir="/workspace/repo", test_command="true", timeout_sec=5)
    ctx = AgentContext(  # no sandbox: neither agent gets as far as using one
        sandbox=None,  # type: ignore[arg-type]
        task=task,
        budgets=Budgets(),
        model=model,
        artifacts_dir=tmp_path,
    )
    outcome = agent.run(ctx)
    assert outcome.reason is Reason.LLM_ERROR and outcome.llm_error_kind == "permanent"
    assert outcome.error_text.startswith(expected), outcome.error_text
    if cls == "Raising":  # the traceback goes to the events, never into the error text
        assert "Traceback" in (tmp_path / "events.jsonl").read_text()


def api_post(client, user, body: dict):
    from benchsite.accounts.services import api_token_create

    _, raw = api_token_create(user=user, name=f"{user.username}-t")
    return client.post(
        "/api/model-configs",
        json.dumps(body),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {raw}",
    )


@pytest.mark.usefixtures("listed")
def test_only_a_superuser_sets_an_import_path_and_it_is_audited(client, alice, django_user_model):
    from django.contrib.auth.models import Permission

    erin = django_user_model.objects.create_user("erin", password="x", is_staff=True)
    erin.user_permissions.add(Permission.objects.get(codename="add_modelconfig"))
    erin = django_user_model.objects.get(pk=erin.pk)
    body = {"name": "by-path", "agent_variant": "import", "agent_import_path": EXAMPLE}

    refused = api_post(client, erin, body)
    assert refused.status_code == 403, refused.content
    assert not ModelConfig.objects.exists()

    bad = api_post(client, alice, body | {"agent_import_path": "examples.agents.gone:X"})
    assert bad.status_code == 400, bad.content
    assert bad.json()["detail"].startswith("agent_import_path: cannot import")

    created = api_post(client, alice, body)
    assert created.status_code == 201, created.content
    assert created.json()["agent_import_path"] == EXAMPLE
    event = AuditEvent.objects.get(action="model_config.upstream")
    assert event.details["agent_import_path"] == ["", EXAMPLE]


def test_the_command_line_refuses_a_bad_path_naming_the_option(listed):
    for path, expected in [
        ("", "--agent-import-path MODULE:CLASS is required"),
        ("examples.agents.gone:X", "--agent-import-path: cannot import"),
    ]:
        refused = ab_main(
            "run-agent", "--task", str(TOY_TASK), "--variant", "import", "--agent-import-path", path
        )
        assert refused.returncode == 1 and expected in refused.stderr, refused.stderr
    assert not ModelConfig.objects.filter(agent_variant="import").exists()


# --- Attempts on a real sandbox (bubblewrap: no image to start) ------------------------------


def run_import_attempt(path: str):
    import_tasks()
    model = model_config_for_variant("import", name=f"import:{path}", agent_import_path=path)
    attempt = attempt_create_adhoc(task=get_task("toy_fail_pytest"), model_config=model)
    return attempt_execute(attempt, backend="bwrap")


@pytest.mark.bwrap
@pytest.mark.usefixtures("listed", "artifacts_root")
def test_the_example_agent_solves_the_toy_task_on_a_real_sandbox():
    attempt = run_import_attempt(EXAMPLE)

    assert attempt.status == AttemptStatus.FINISHED
    assert attempt.failure_reason_id is None, attempt.error_text
    assert "+    return total(values) / len(values)" in attempt.final_patch
    # run tests, search, read, apply the patch, run tests: counted as the loop's tool calls.
    assert attempt.tool_calls == 5 and attempt.steps is None
    folder = attempt_folder(attempt)
    events = [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]
    tools = [e["tool"] for e in events if e["event"] == "tool_finish"]
    assert tools == ["run", "search", "read_file", "apply_patch", "run"]
    assert '"agent": "division-fixer"' in (folder / "logs/agent.txt").read_text()


@pytest.mark.bwrap
@pytest.mark.usefixtures("artifacts_root")
def test_an_import_that_fails_at_attempt_time_ends_with_a_named_reason(
    settings, tmp_path, monkeypatch
):
    """The module imported when the configuration was saved, and was gone by the attempt."""
    import importlib

    package = f"agent_import_gone_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{package}.py").write_text(
        "from examples.agents.division_fixer import DivisionFixer as Agent\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    settings.AGENT_IMPORT_PATHS = [package]
    path = f"{package}:Agent"
    model = model_config_for_variant("import", name=path, agent_import_path=path)
    model.full_clean()  # imports it: a good path when saved
    (tmp_path / f"{package}.py").unlink()
    monkeypatch.delitem(sys.modules, package)
    importlib.invalidate_caches()

    import_tasks()
    attempt = attempt_create_adhoc(task=get_task("toy_fail_pytest"), model_config=model)
    attempt = attempt_execute(attempt, backend="bwrap")

    assert attempt.status == AttemptStatus.FINISHED
    assert attempt.failure_reason_id == "LLM_ERROR"  # as for any agent that cannot be built
    assert attempt.is_infra
    assert attempt.error_text.startswith(
        f"LLM_ERROR in agent_run: [agent-import] cannot import '{path}': "
        f"ModuleNotFoundError: No module named '{package}'"
    ), attempt.error_text
    assert "Traceback" not in attempt.error_text
    assert attempt.final_patch == ""


@pytest.mark.bwrap
@pytest.mark.usefixtures("listed", "artifacts_root")
def test_a_policy_named_by_path_runs_in_the_built_in_loop():
    attempt = run_import_attempt("runs.agents.simple:ScriptedPolicy")

    assert attempt.failure_reason_id is None, attempt.error_text
    assert attempt.tool_calls >= 4 and attempt.steps is None  # the loop's own accounting
    events = (attempt_folder(attempt) / "events.jsonl").read_text()
    assert '"event": "tests_finish"' in events  # the loop ran the tests after the patch


def test_ab_run_suite_launches_an_import_configuration(tmp_path):
    """The real console script, in a process of its own with the allow-list set."""
    import sqlite3

    from tests.support.ab_cli import ab

    var = tmp_path / "var"
    args = ("run-suite", "custom-dev", "--variant", "import", "--task", "toy_fail_pytest")
    out = ab(*args, "--agent-import-path", EXAMPLE, var_dir=var)
    assert out.returncode == 1 and "is not under AGENT_IMPORT_PATHS" in out.stderr, out.stderr
    env = {"AGENTBENCH_AGENT_IMPORT_PATHS": "examples.agents"}
    out = ab(*args, "--agent-import-path", EXAMPLE, var_dir=var, env=env)
    assert out.returncode == 0 and "1 attempt(s) queued" in out.stdout, out.stderr
    with sqlite3.connect(var / "db.sqlite3") as db:
        rows = db.execute("select name, agent_variant, agent_import_path from runs_modelconfig")
        assert rows.fetchall() == [(f"import:{EXAMPLE}", "import", EXAMPLE)]
