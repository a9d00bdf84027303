"""``ab run-agent`` end to end: task import, pipeline, agent, final tests, the Attempt row and
its artifact folder (real sandbox; the LLM variant against a local chat-completions server)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runs.models import Attempt
from runs.pipeline import artifacts
from tasks_app.spec import load_task_file
from tests.conftest import TASKS_DIR
from tests.support.ab_cli import Finished, ab_main
from tests.support.agent_fixtures import TOY_SOLUTION
from tests.support.fake_provider import FakeProvider, tool_call

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

TOY_TASK = TASKS_DIR / "custom-dev/toy_fail_pytest/task.yaml"


@pytest.fixture(autouse=True)
def _artifacts_and_quick_retries(settings, tmp_path):
    settings.ARTIFACTS_ROOT = tmp_path / "artifacts"
    settings.LLM_RETRY_BASE_DELAY_SEC = 0.01
    return settings.ARTIFACTS_ROOT


def run_agent(*args: str) -> tuple[Finished, Attempt | None]:
    done = ab_main("run-agent", *args)
    return done, Attempt.objects.order_by("-id").first()


def folder(attempt: Attempt) -> Path:
    return artifacts.folder_of(attempt.artifacts_dir)


def test_the_scripted_agent_solves_the_toy_task_and_leaves_its_records(tmp_path):
    out = tmp_path / "out"
    done, attempt = run_agent("--task", str(TOY_TASK), "--variant", "scripted", "--out", str(out))
    printed = done.stdout
    assert done.returncode == 0, printed
    assert "result: RESOLVED" in printed
    assert attempt.resolved
    assert attempt.model_config.agent_variant == "scripted"
    assert attempt.tool_calls == 4 and attempt.steps is None  # no model call
    path = folder(attempt)
    assert path.is_relative_to(out)
    assert (path / "events.jsonl").exists()
    assert (path / "diffs/step_0004.patch").exists()
    for log in ("setup", "baseline", "agent", "final_test"):
        assert (path / f"logs/{log}.txt").exists(), log
    stages = list(attempt.stages.values_list("name", flat=True))
    assert stages[-2:] == ["agent_run", "final_test"]
    assert attempt.run.status == "finished"


def test_the_nop_agent_fails_with_tests_failed():
    done, attempt = run_agent("--task", str(TOY_TASK), "--variant", "nop")
    assert done.returncode == 1
    assert attempt.failure_reason_id == "TESTS_FAILED"
    assert not attempt.is_infra
    assert "result: TESTS_FAILED" in done.stdout


def valid_example_tasks() -> list[Path]:
    """Example tasks with a reference solution whose baseline is meant to be valid (the
    failure-path examples are broken on purpose)."""
    found = []
    for path in sorted(TASKS_DIR.rglob("task.yaml")):
        spec = load_task_file(path).spec
        if spec.reference_solution and "failure-path" not in spec.labels:
            found.append(path)
    return found


@pytest.mark.parametrize("task_file", valid_example_tasks(), ids=lambda p: p.parent.name)
def test_the_oracle_solves_every_valid_example_task(task_file):
    done, attempt = run_agent("--task", str(task_file), "--variant", "oracle")
    assert done.returncode == 0, attempt.error_text
    assert attempt.resolved
    stages = list(attempt.stages.values_list("name", flat=True))
    assert "baseline_run" in stages


def test_skip_baseline_goes_straight_from_setup_to_the_agent():
    done, attempt = run_agent(
        "--task", str(TOY_TASK), "--variant", "scripted", "--skip-baseline", "--strict-patch"
    )
    assert done.returncode == 0
    stages = list(attempt.stages.order_by("order").values_list("name", flat=True))
    assert "baseline_run" not in stages
    assert stages[-3:] == ["setup", "agent_run", "final_test"]
    assert attempt.model_config.strict_patch
    assert attempt.model_config.name == "scripted (strict patch)"


def test_the_llm_variant_runs_against_an_openai_compatible_server(monkeypatch):
    monkeypatch.setenv("H3_FAKE_KEY", "sk-from-env")
    replies = [
        tool_call("search", {"query": "def mean"}, usage=(500, 40)),
        tool_call("apply_patch", {"unified_diff": TOY_SOLUTION}, usage=(800, 90)),
    ]
    with FakeProvider(replies) as server:
        done, attempt = run_agent(
            "--task",
            str(TOY_TASK),
            "--variant",
            "llm",
            "--model",
            "gpt-4o-mini",
            "--base-url",
            server.url("/v1"),
            "--api-key-env",
            "H3_FAKE_KEY",
            "--no-log-llm-messages",
        )
    assert done.returncode == 0, attempt.error_text
    assert server.requests[0].headers["authorization"] == "Bearer sk-from-env"
    assert (attempt.tokens_in, attempt.tokens_out) == (1300, 130)
    assert float(attempt.cost_usd) == pytest.approx((1300 * 0.15 + 130 * 0.6) / 1e6)
    assert attempt.model_config.api_key_env == "H3_FAKE_KEY"
    assert not (folder(attempt) / "llm_messages.jsonl").exists()
    requests = [
        json.loads(line)
        for line in (folder(attempt) / "events.jsonl").read_text().splitlines()
        if '"llm_request"' in line
    ]
    assert len(requests) == 2


def test_it_refuses_bad_options_with_a_clear_message(tmp_path):
    missing = ab_main("run-agent", "--task", str(tmp_path / "missing.yaml"))
    assert missing.returncode == 1
    assert "--task: no such task file" in missing.stderr
    no_model = ab_main("run-agent", "--task", str(TOY_TASK), "--variant", "llm")
    assert no_model.returncode == 1
    assert "--model is required" in no_model.stderr
    assert Attempt.objects.count() == 0
