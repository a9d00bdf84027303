"""The reference's three CLI failure modes (fail-fast-and-error-classification.md), each with a
real CLI: a bad key (the upstream answers 401), a flag the CLI does not know, and a CLI that
cannot start. Each fails every attempt the same way, so the run aborts after the fail-fast
threshold (3) with one fingerprint, its remaining attempts skipped, and, the error being
permanent, the configuration's other runs too.

Attempts run as a worker runs them (claim, the pipeline, the run's bookkeeping), one after the
other in this process, on Docker.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
import yaml

from runs.agents.cli import definition as definitions
from runs.lifecycle import attempt_claim
from runs.models import Attempt, AttemptStatus, Run, RunStatus
from runs.pipeline.execute import attempt_execute
from runs.services import run_launch
from runs.workers.bookkeeping import run_attempt_done
from tests.support.fake_provider_plans import (
    REAL_KEY,
    UPSTREAM_KEY_ENV,
    Step,
    cli_model_config,
    plan_provider,
)
from tests.support.pipeline_fixtures import attempt_folder, get_task, import_tasks

pytestmark = [pytest.mark.django_db, pytest.mark.docker, pytest.mark.slow]

SAMPLES = 4  # three failures reach the threshold; the fourth is skipped


def run_inline(run: Run) -> Run:
    """What the workers do, one attempt at a time: claim, execute, bookkeeping (fail-fast)."""
    for attempt_id in run.attempts.order_by("sample_index").values_list("id", flat=True):
        if not attempt_claim(attempt_id=attempt_id, worker="test@inline"):
            continue  # skipped by fail-fast meanwhile
        attempt = Attempt.objects.select_related("run", "task", "model_config", "suite").get(
            id=attempt_id
        )
        attempt = attempt_execute(attempt, backend="docker")
        run_attempt_done(attempt=attempt)
    run.refresh_from_db()
    return run


def launch(config) -> Run:
    import_tasks()
    task = get_task("toy_fail_pytest")
    return run_launch(
        suite=task.suite, model_config=config, samples=SAMPLES, task_ids=["toy_fail_pytest"]
    )


def assert_aborted_with_one_fingerprint(run: Run, tag: str) -> list[Attempt]:
    finished = list(run.attempts.filter(status=AttemptStatus.FINISHED).order_by("sample_index"))
    assert len(finished) == 3, [(a.status, a.error_text) for a in run.attempts.all()]
    assert len({a.error_fingerprint for a in finished}) == 1, [a.error_text for a in finished]
    for attempt in finished:
        assert attempt.failure_reason_id == "LLM_ERROR", attempt.error_text
        assert tag in attempt.error_text, attempt.error_text
        assert attempt.error_kind == "permanent"
        assert attempt.is_infra
    assert run.status == RunStatus.ABORTED
    assert run.fail_fast_code == "LLM_ERROR" and run.fail_fast_permanent
    skipped = run.attempts.filter(status=AttemptStatus.SKIPPED)
    assert skipped.count() == SAMPLES - 3
    assert all(a.error_text.startswith("[fail-fast]") for a in skipped)
    return finished


def definitions_with(tmp_path: Path, monkeypatch, name: str, base: str, **changes) -> str:
    """A copy of a shipped definition under another name with some fields changed, in a
    definitions folder of the test's own (same install section: the cached install serves)."""
    raw = yaml.safe_load((definitions.DEFINITIONS_DIR / f"{base}.yaml").read_text())
    raw |= {"name": name} | changes
    folder = tmp_path / "definitions"
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.yaml").write_text(yaml.safe_dump(raw))
    monkeypatch.setattr(definitions, "DEFINITIONS_DIR", folder)
    return name


def test_a_bad_key_is_a_permanent_llm_error_that_aborts_the_run(artifacts_root, monkeypatch):
    monkeypatch.setenv(UPSTREAM_KEY_ENV, "sk-revoked")
    with plan_provider([Step.finish()], fail_status=401) as upstream:
        run = run_inline(launch(cli_model_config("claude-code", upstream, name="claude bad key")))
        assert upstream.requests  # Claude Code did call, and got the 401
    finished = assert_aborted_with_one_fingerprint(run, "[llm-permanent]")
    assert "401" in finished[0].error_text
    assert not finished[0].is_empty_run  # it made its call: the key is what failed


def test_a_flag_the_cli_does_not_know_is_a_permanent_empty_run(
    artifacts_root, monkeypatch, tmp_path
):
    monkeypatch.setenv(UPSTREAM_KEY_ENV, REAL_KEY)
    codex = yaml.safe_load((definitions.DEFINITIONS_DIR / "codex.yaml").read_text())
    command = [*codex["command"][:-1], "--max-tokens=4000", codex["command"][-1]]
    name = definitions_with(tmp_path, monkeypatch, "codex-bad-flag", "codex", command=command)
    with plan_provider([Step.finish()]) as upstream:
        run = run_inline(launch(cli_model_config("codex", upstream, name=name, cli_agent=name)))
        assert upstream.requests == []  # it never got as far as a model call
    finished = assert_aborted_with_one_fingerprint(run, "[cli-usage]")
    attempt = finished[0]
    assert attempt.is_empty_run and "[empty-run]" in attempt.error_text
    assert attempt.agent_exit_code == 2
    assert "--max-tokens" in attempt.stderr_tail  # the CLI's own words, shown on the page


def test_a_cli_that_cannot_start_is_a_permanent_empty_run(artifacts_root, monkeypatch, tmp_path):
    monkeypatch.setenv(UPSTREAM_KEY_ENV, REAL_KEY)
    claude = yaml.safe_load((definitions.DEFINITIONS_DIR / "claude-code.yaml").read_text())
    command = ["{install}/package/claude-missing", *claude["command"][1:]]
    name = definitions_with(tmp_path, monkeypatch, "claude-missing", "claude-code", command=command)
    with plan_provider([Step.finish()]) as upstream:
        run = run_inline(
            launch(cli_model_config("claude-code", upstream, name=name, cli_agent=name))
        )
        assert upstream.requests == []
    finished = assert_aborted_with_one_fingerprint(run, "[cli-start]")
    assert finished[0].agent_exit_code == 127
    assert finished[0].is_empty_run


# --- the CLIs shipped since, each through the same three failure modes ----------------------

MORE_CLIS = [
    "qwen-code",
    "gemini-cli",
    "opencode",
]
# CLIs that name no flag on an unknown one but print their usage alone (yargs in OpenCode).
USAGE_ALONE = {
    "opencode",
}


def with_unknown_flag(command: list[str]) -> list[str]:
    """The command with a flag no CLI knows, before a trailing ``-`` (stdin) if it has one."""
    flag = "--agentbench-no-such-flag=1"
    return [*command[:-1], flag, "-"] if command[-1] == "-" else [*command, flag]


def with_missing_entry(command: list[str]) -> list[str]:
    """The command with its install's program (the binary, or the script Node runs) missing."""
    return [
        re.sub(r"\{install\}/\S+", "{install}/package/agentbench-missing", t, count=1)
        for t in command
    ]


@pytest.mark.parametrize("cli", MORE_CLIS)
def test_each_cli_with_a_bad_key_aborts_its_run(cli, artifacts_root, monkeypatch):
    monkeypatch.setenv(UPSTREAM_KEY_ENV, "sk-revoked")
    with plan_provider([Step.finish()], fail_status=401) as upstream:
        run = run_inline(launch(cli_model_config(cli, upstream, name=f"{cli} bad key")))
        assert upstream.requests  # it did call, and got the 401
    finished = assert_aborted_with_one_fingerprint(run, "[llm-permanent]")
    assert "401" in finished[0].error_text and not finished[0].is_empty_run


@pytest.mark.parametrize("cli", MORE_CLIS)
def test_each_cli_with_an_unknown_flag_aborts_its_run(cli, artifacts_root, monkeypatch, tmp_path):
    monkeypatch.setenv(UPSTREAM_KEY_ENV, REAL_KEY)
    shipped = yaml.safe_load((definitions.DEFINITIONS_DIR / f"{cli}.yaml").read_text())
    command = with_unknown_flag(shipped["command"])
    name = definitions_with(tmp_path, monkeypatch, f"{cli}-bad-flag", cli, command=command)
    with plan_provider([Step.finish()]) as upstream:
        run = run_inline(launch(cli_model_config(cli, upstream, name=name, cli_agent=name)))
        assert upstream.requests == []
    finished = assert_aborted_with_one_fingerprint(run, "[cli-usage]")
    assert finished[0].is_empty_run and finished[0].agent_exit_code != 0
    if cli in USAGE_ALONE:  # its usage listing, shown on the page, is all it said
        assert "printing its usage and nothing else" in finished[0].error_text
        assert "--help" in finished[0].stderr_tail
        return
    # The CLI's line that says why is in the error text, wherever it is in its output.
    assert "agentbench-no-such-flag" in finished[0].error_text


@pytest.mark.parametrize("cli", MORE_CLIS)
def test_each_cli_that_cannot_start_aborts_its_run(cli, artifacts_root, monkeypatch, tmp_path):
    monkeypatch.setenv(UPSTREAM_KEY_ENV, REAL_KEY)
    shipped = yaml.safe_load((definitions.DEFINITIONS_DIR / f"{cli}.yaml").read_text())
    command = with_missing_entry(shipped["command"])
    assert command != shipped["command"]
    name = definitions_with(tmp_path, monkeypatch, f"{cli}-missing", cli, command=command)
    with plan_provider([Step.finish()]) as upstream:
        run = run_inline(launch(cli_model_config(cli, upstream, name=name, cli_agent=name)))
        assert upstream.requests == []
    finished = assert_aborted_with_one_fingerprint(run, "[cli-start]")
    assert finished[0].is_empty_run and "agentbench-missing" in finished[0].stderr_tail


# --- limits: the gateway's budgets and the harness's clock, with a real CLI ---------------


def run_one(config):
    from runs.pipeline.adhoc import attempt_create_adhoc

    import_tasks()
    attempt = attempt_create_adhoc(task=get_task("toy_fail_pytest"), model_config=config)
    return attempt_execute(attempt, backend="docker")


def test_a_cli_past_its_calls_budget_gave_up_naming_the_budget(artifacts_root, monkeypatch):
    monkeypatch.setenv(UPSTREAM_KEY_ENV, REAL_KEY)
    plan = [Step.read("/workspace/repo/src/toy/calc.py")] * 10  # never finishes by itself
    with plan_provider(plan) as upstream:
        config = cli_model_config("claude-code", upstream, name="claude 2 calls", max_model_calls=2)
        attempt = run_one(config)
        upstream_calls = len(upstream.requests_to("/messages"))
    assert attempt.failure_reason_id == "AGENT_GAVE_UP", attempt.error_text
    assert "[budget:calls]" in attempt.error_text
    assert not attempt.is_infra  # the agent's result: it counts
    assert upstream_calls == attempt.steps == 2  # the third call never left the gateway


def test_opencode_refused_a_call_for_its_budget_stops_by_itself(artifacts_root, monkeypatch):
    """OpenCode retries some errors itself (429, 5xx: five times, a minute in all); the
    gateway's budget refusal (HTTP 400) is not one of them: it stops at the first, by itself.
    Its session title is a call too, counted against the budget like any."""
    monkeypatch.setenv(UPSTREAM_KEY_ENV, REAL_KEY)
    plan = [Step.read("/workspace/repo/src/toy/calc.py")] * 10  # never finishes by itself
    with plan_provider(plan) as upstream:
        config = cli_model_config("opencode", upstream, name="opencode 3", max_model_calls=3)
        attempt = run_one(config)
        upstream_calls = len(upstream.requests_to("/chat/completions"))
    assert attempt.failure_reason_id == "AGENT_GAVE_UP", attempt.error_text
    assert "[budget:calls]" in attempt.error_text and not attempt.is_infra
    assert attempt.agent_exit_code == 1  # its own exit, not the harness's kill
    assert upstream_calls == attempt.steps == 3  # the refused call never left the gateway
    records = [
        json.loads(line)
        for line in (attempt_folder(attempt) / "model_calls.jsonl").read_text().splitlines()
    ]
    assert [r["outcome"] for r in records].count("budget") == 1  # not retried


def test_a_cli_killed_at_its_time_limit_is_a_timeout_of_ours(artifacts_root, monkeypatch):
    monkeypatch.setenv(UPSTREAM_KEY_ENV, REAL_KEY)
    # The provider takes a minute to answer; the CLI may run 8 seconds.
    with plan_provider([Step.finish()], delay_sec=60) as upstream:
        config = cli_model_config("codex", upstream, name="codex 8s", max_time_sec=8)
        attempt = run_one(config)
    assert attempt.failure_reason_id == "TIMEOUT", attempt.error_text
    assert attempt.is_timeout and attempt.is_infra
    assert attempt.error_text.startswith("[timeout] TIMEOUT in agent_run: Codex CLI killed by")
    assert "by the harness at its time limit (8s and 15s of grace)" in attempt.error_text
    # Its one call was still in flight at 8 s: the gateway never had to refuse one.
    assert "the gateway had refused" not in attempt.error_text
    assert attempt.agent_exit_code == 124


def test_a_cli_past_its_time_budget_gave_up_naming_it_and_setup_did_not_count(
    artifacts_root, monkeypatch
):
    """The gateway opens before the sandbox; its wall-time clock starts with the agent. Here
    the stages before the agent take longer than the whole budget (a sleep in front of the
    agent stage): the CLI's first calls still go through, and once the budget has passed the
    gateway refuses the next one; Claude Code stops at that, well before the harness's kill."""
    import runs.pipeline.execute as execute

    budget = 10
    real_stage = execute.run_agent_stage

    def slow_setup_then_agent(**kwargs):
        time.sleep(budget + 1)
        return real_stage(**kwargs)

    monkeypatch.setattr(execute, "run_agent_stage", slow_setup_then_agent)
    monkeypatch.setenv(UPSTREAM_KEY_ENV, REAL_KEY)
    plan = [Step.read("/workspace/repo/src/toy/calc.py")] * 20  # never finishes by itself
    with plan_provider(plan, delay_sec=4) as upstream:
        config = cli_model_config("claude-code", upstream, name="claude 10s", max_time_sec=budget)
        attempt = run_one(config)
        answered = len(upstream.requests_to("/messages"))
    assert attempt.failure_reason_id == "AGENT_GAVE_UP", attempt.error_text
    assert "[budget:time]" in attempt.error_text and not attempt.is_timeout
    assert attempt.agent_exit_code not in (124, 137)  # it stopped by itself
    assert answered >= 1  # counted from the gateway's opening, the first call was refused
    records = [
        json.loads(line)
        for line in (attempt_folder(attempt) / "model_calls.jsonl").read_text().splitlines()
    ]
    calls = [r for r in records if r["model_call"]]
    assert calls[0]["outcome"] == "ok"
    assert calls[-1]["outcome"] == "budget" and calls[-1]["error"]["budget"] == "time"
