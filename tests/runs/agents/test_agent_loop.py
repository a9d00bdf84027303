"""The agent loop and the model-free agents (scripted, oracle, nop, external) in a real sandbox."""

from __future__ import annotations

import dataclasses
import json

import pytest

from runs.agents.contract import Budgets, ModelSettings
from runs.agents.registry import build_agent
from runs.taxonomy import Reason
from tests.support.agent_fixtures import TOY_SOLUTION, agent_context

pytestmark = pytest.mark.slow


def events(artifacts) -> list[dict]:
    return [json.loads(line) for line in (artifacts / "events.jsonl").read_text().splitlines()]


def run_variant(sandbox, artifacts, variant, **kwargs):
    agent = build_agent(ModelSettings(variant), prediction_patch=kwargs.pop("prediction", None))
    return agent.run(agent_context(sandbox, artifacts, variant=variant, **kwargs))


def test_the_scripted_agent_solves_the_toy_task_and_logs_every_step(toy_sandbox, tmp_path):
    outcome = run_variant(toy_sandbox, tmp_path, "scripted")
    assert outcome.reason is None
    assert outcome.stop == "tests_passed"
    # Four tool calls; no model asked (the scripted policy): no figure of model calls.
    assert outcome.tool_calls == 4 and outcome.steps is None
    assert outcome.tokens_in == outcome.tokens_out == 0
    log = events(tmp_path)
    names = [e["event"] for e in log]
    assert names[0] == "agent_start" and names[-1] == "agent_finish"
    tools = [e["tool"] for e in log if e["event"] == "tool_finish"]
    assert tools == ["list_files", "read_file", "search", "apply_patch"]
    tests = [e for e in log if e["event"] == "tests_finish"]
    assert [t["exit_code"] for t in tests] == [1, 0]  # initial run, then after the patch
    assert (tmp_path / "diffs/step_0004.patch").read_text().startswith("--- a/src/toy/calc.py")
    assert "1 failed" in (tmp_path / "logs/tests_initial.txt").read_text()
    assert "4 passed" in (tmp_path / "logs/tests_0002.txt").read_text()


def test_the_oracle_applies_the_gold_patch(toy_sandbox, tmp_path):
    outcome = run_variant(toy_sandbox, tmp_path, "oracle", gold_patch=TOY_SOLUTION)
    assert outcome.reason is None
    assert outcome.tool_calls == 1 and outcome.steps is None


def test_the_oracle_gives_up_without_a_gold_patch(toy_sandbox, tmp_path):
    outcome = run_variant(toy_sandbox, tmp_path, "oracle")
    assert outcome.reason is Reason.AGENT_GAVE_UP
    assert "[no-gold-patch]" in outcome.error_text
    assert outcome.tool_calls == 0 and outcome.steps is None


def test_the_oracle_reports_a_gold_patch_that_does_not_apply_as_a_tool_error(
    toy_sandbox,
    tmp_path,
):
    stale = TOY_SOLUTION.replace("// len(values)", "// len(vals)")
    outcome = run_variant(toy_sandbox, tmp_path, "oracle", gold_patch=stale)
    assert outcome.reason is Reason.TOOL_ERROR
    assert "[patch-apply-failed]" in outcome.error_text


def test_the_nop_agent_leaves_the_tests_failing(toy_sandbox, tmp_path):
    outcome = run_variant(toy_sandbox, tmp_path, "nop")
    assert outcome.reason is Reason.TESTS_FAILED
    assert outcome.stop == "done"
    assert "test_mean_of_odd_total" in outcome.error_text
    assert [e["event"] for e in events(tmp_path)].count("tests_finish") == 1


def test_the_external_agent_applies_a_prediction_or_says_why_not(toy_sandbox, tmp_path):
    empty = run_variant(toy_sandbox, tmp_path / "a", "external", prediction="")
    assert empty.reason is Reason.TESTS_FAILED
    assert empty.error_text.startswith("[empty-patch]")
    broken = TOY_SOLUTION.replace("// len(values)", "// len(vals)")
    bad = run_variant(toy_sandbox, tmp_path / "b", "external", prediction=broken)
    assert bad.reason is Reason.TOOL_ERROR
    assert bad.error_text.startswith("[patch-apply-failed]")
    good = run_variant(toy_sandbox, tmp_path / "c", "external", prediction=TOY_SOLUTION)
    assert good.reason is None
    assert (
        "total(values) / len(values)"
        in toy_sandbox.read_file("/workspace/repo/src/toy/calc.py").decode()
    )


def test_the_step_budget_ends_the_attempt_as_gave_up(toy_sandbox, tmp_path):
    outcome = run_variant(
        toy_sandbox, tmp_path, "scripted", budgets=Budgets(max_steps=2, max_time_sec=300)
    )
    assert outcome.reason is Reason.AGENT_GAVE_UP
    assert outcome.stop == "step_budget"
    assert outcome.tool_calls == 2 and outcome.steps is None


def test_the_time_budget_ends_the_attempt_as_a_timeout(toy_sandbox, tmp_path):
    outcome = run_variant(
        toy_sandbox, tmp_path, "scripted", budgets=Budgets(max_steps=20, max_time_sec=0.01)
    )
    assert outcome.reason is Reason.TIMEOUT
    assert outcome.is_timeout
    assert outcome.error_text.startswith("[timeout]")
    assert outcome.stop == "time_budget"


def test_tests_that_already_pass_end_the_loop_at_once(toy_sandbox, tmp_path):
    toy_sandbox.exec(f"git apply - <<'EOF'\n{TOY_SOLUTION}EOF", timeout=30, cwd="/workspace/repo")
    outcome = run_variant(toy_sandbox, tmp_path, "scripted")
    assert outcome.reason is None
    assert outcome.tool_calls == 0 and outcome.steps is None


def test_on_hidden_tests_the_oracle_only_applies_its_patch(toy_sandbox, tmp_path):
    # SWE-bench: the graded tests go in after the agent; visible tests passing or not say
    # nothing, so a policy that reads no test output runs none.
    ctx = agent_context(toy_sandbox, tmp_path, variant="oracle", gold_patch=TOY_SOLUTION)
    ctx = dataclasses.replace(ctx, task=dataclasses.replace(ctx.task, hidden_tests=True))

    outcome = build_agent(ModelSettings("oracle")).run(ctx)

    assert (outcome.reason, outcome.stop, outcome.tool_calls) == (None, "done", 1)
    names = [e["event"] for e in events(tmp_path)]
    assert "tests_start" not in names and names.count("tool_finish") == 1
    diff = toy_sandbox.exec("git diff --stat", timeout=30, cwd="/workspace/repo")
    assert "src/toy/calc.py" in diff.stdout


def test_an_unknown_variant_is_refused_and_baseline_has_no_agent():
    assert build_agent(ModelSettings("baseline")) is None
    with pytest.raises(ValueError, match="unknown agent variant 'gpt'"):
        build_agent(ModelSettings("gpt"))
