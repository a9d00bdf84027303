"""The LLM agent: the real ``openai`` client against a local server speaking the chat-completions
protocol with scripted replies, and the real tools in a real sandbox."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from runs.agents.contract import Budgets
from runs.agents.registry import build_agent
from runs.taxonomy import Reason
from sandbox import open_sandbox
from sandbox.base import SandboxConfig
from tests.support.agent_fixtures import LABELS, TOY_SOLUTION, agent_context, toy_workspace
from tests.support.fake_provider import (
    FakeProvider,
    Reply,
    empty,
    error,
    text,
    tool_call,
)

pytestmark = pytest.mark.slow


@pytest.fixture
def sandbox(tmp_path):
    config = SandboxConfig(
        name=f"ab-llm-{uuid.uuid4().hex[:12]}", workspace=toy_workspace(tmp_path), labels=LABELS
    )
    with open_sandbox(config, "auto") as sb:
        yield sb


@pytest.fixture(autouse=True)
def fast_retries(settings):
    settings.LLM_RETRY_MAX_ATTEMPTS = 3
    settings.LLM_RETRY_BASE_DELAY_SEC = 0.01
    settings.LLM_RETRY_MAX_DELAY_SEC = 0.05
    settings.LLM_PRICE_TABLE = ""


def run_llm(sandbox, artifacts: Path, replies: list[Reply], *, budgets=None, **model):
    model.setdefault("model_name", "fake-model")
    model.setdefault("api_key", "sk-test")
    with FakeProvider(replies) as server:
        ctx = agent_context(
            sandbox, artifacts, variant="llm", base_url=server.url("/v1"), budgets=budgets, **model
        )
        agent = build_agent(ctx.model)
        outcome = agent.run(ctx)
    return outcome, server


def events(artifacts: Path, name: str) -> list[dict]:
    lines = (artifacts / "events.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == name]


def test_it_solves_the_toy_task_from_scripted_model_replies(sandbox, tmp_path):
    outcome, server = run_llm(
        sandbox,
        tmp_path,
        [
            tool_call("read_file", {"path": "src/toy/calc.py"}, usage=(120, 15)),
            tool_call("apply_patch", {"unified_diff": TOY_SOLUTION}, usage=(300, 60)),
        ],
        sampling={"temperature": 0, "top_k": 5},
        price_input_per_mtok=1.0,
        price_output_per_mtok=2.0,
    )
    assert outcome.reason is None
    assert outcome.stop == "tests_passed"
    assert (outcome.tokens_in, outcome.tokens_out) == (420, 75)
    assert outcome.cost_usd == pytest.approx((420 * 1.0 + 75 * 2.0) / 1e6)
    assert outcome.steps == 2
    assert not outcome.is_empty_run
    first, second = (r.json for r in server.requests)
    assert first["model"] == "fake-model"
    assert first["temperature"] == 0 and first["top_k"] == 5
    assert [t["function"]["name"] for t in first["tools"]] == [
        "list_files",
        "read_file",
        "search",
        "apply_patch",
        "run",
    ]
    assert first["messages"][0]["role"] == "system"
    assert "1 failed" in first["messages"][1]["content"]
    tool_message = second["messages"][-1]
    assert tool_message["role"] == "tool"
    assert "return total(values) // len(values)" in tool_message["content"]
    assert server.requests[0].headers["authorization"] == "Bearer sk-test"
    responses = events(tmp_path, "llm_response")
    assert [(e["tokens_in"], e["tokens_out"]) for e in responses] == [(120, 15), (300, 60)]
    logged = (tmp_path / "llm_messages.jsonl").read_text().splitlines()
    assert [json.loads(line)["kind"] for line in logged] == [
        "request",
        "response",
        "request",
        "response",
    ]


def test_an_auth_error_ends_the_attempt_at_once_as_a_permanent_llm_error(sandbox, tmp_path):
    outcome, server = run_llm(
        sandbox, tmp_path, [error(401, "invalid_request_error", "Incorrect API key provided")]
    )
    assert len(server.requests) == 1
    assert outcome.reason is Reason.LLM_ERROR
    assert outcome.llm_error_kind == "permanent"
    # Over a second without a token it is also tagged an empty run: either way the same text.
    assert "[llm-permanent] AuthenticationError (HTTP 401)" in outcome.error_text
    assert events(tmp_path, "llm_retry") == []


def test_a_rate_limit_is_retried_and_the_attempt_succeeds(sandbox, tmp_path):
    outcome, server = run_llm(
        sandbox,
        tmp_path,
        [
            error(429, "rate_limit_error", "Rate limit reached"),
            tool_call("apply_patch", {"unified_diff": TOY_SOLUTION}),
        ],
    )
    assert outcome.reason is None
    assert len(server.requests) == 2
    assert server.requests[0].json["messages"] == server.requests[1].json["messages"]
    assert len(events(tmp_path, "llm_retry")) == 1


def test_server_errors_are_retried_then_reported_as_a_transient_llm_error(sandbox, tmp_path):
    outcome, server = run_llm(sandbox, tmp_path, [error(500, "api_error", "internal error")] * 3)
    assert len(server.requests) == 3
    assert outcome.reason is Reason.LLM_ERROR
    assert outcome.llm_error_kind == "transient"
    assert "gave up after 3 attempt(s)" in outcome.error_text


def test_malformed_tool_arguments_are_retried_once(sandbox, tmp_path):
    outcome, server = run_llm(
        sandbox,
        tmp_path,
        [
            tool_call("apply_patch", '{"unified_diff": "--- a/src'),
            tool_call("apply_patch", {"unified_diff": TOY_SOLUTION}),
        ],
    )
    assert outcome.reason is None
    assert len(server.requests) == 2
    hint = server.requests[1].json["messages"][-1]
    assert hint["role"] == "user"
    assert "not valid JSON" in hint["content"]
    assert outcome.steps == 1  # the malformed call was dropped, not executed


def test_a_diff_in_a_plain_text_answer_is_extracted_and_applied(sandbox, tmp_path):
    answer = f"The division is wrong. Apply this:\n```diff\n{TOY_SOLUTION}```\n"
    outcome, _ = run_llm(sandbox, tmp_path, [text(answer)])
    assert outcome.reason is None
    assert (tmp_path / "diffs/step_0001.patch").exists()


def test_a_model_that_never_answers_is_an_empty_run(sandbox, tmp_path):
    replies = [replace(empty(), delay_sec=0.4) for _ in range(3)]
    outcome, server = run_llm(sandbox, tmp_path, replies)
    assert len(server.requests) == 3
    assert outcome.reason is Reason.LLM_ERROR
    assert outcome.is_empty_run
    assert outcome.error_text.startswith("[empty-run]")
    assert outcome.tokens_in == outcome.tokens_out == 0


def test_the_same_failing_call_repeated_ends_as_a_tool_error(sandbox, tmp_path):
    missing = tool_call("read_file", {"path": "src/toy/nope.py"})
    outcome, server = run_llm(sandbox, tmp_path, [missing, missing, missing])
    assert outcome.reason is Reason.TOOL_ERROR
    assert outcome.stop == "repeated_failures"
    assert "no such file" in outcome.error_text
    assert len(server.requests) == 3


def test_giving_up_in_words_is_agent_gave_up_and_finishing_early_is_tests_failed(sandbox, tmp_path):
    gave_up, _ = run_llm(sandbox, tmp_path / "a", [text("I GIVE UP: cannot find the bug.")])
    assert gave_up.reason is Reason.AGENT_GAVE_UP
    assert gave_up.stop == "gave_up"
    done, server = run_llm(sandbox, tmp_path / "b", [text("Looks fine to me."), text("DONE")])
    assert done.reason is Reason.TESTS_FAILED
    hint = server.requests[1].json["messages"][-1]["content"]
    assert "Continue by calling one of the tools" in hint


def test_the_token_budget_stops_the_agent(sandbox, tmp_path):
    outcome, server = run_llm(
        sandbox,
        tmp_path,
        [tool_call("list_files", {}, usage=(900, 200)), tool_call("list_files", {})],
        budgets=Budgets(max_tokens=1000),
    )
    assert outcome.reason is Reason.AGENT_GAVE_UP
    assert outcome.stop == "token_budget"
    assert len(server.requests) == 1


def test_the_message_log_is_capped_or_off(sandbox, tmp_path):
    replies = [
        tool_call("list_files", {}),
        tool_call("apply_patch", {"unified_diff": TOY_SOLUTION}),
    ]
    run_llm(sandbox, tmp_path / "capped", list(replies), llm_log_max_chars=3000)
    lines = (tmp_path / "capped/llm_messages.jsonl").read_text().splitlines()
    assert json.loads(lines[-1]) == {"ts": json.loads(lines[-1])["ts"], "truncated": True}
    assert sum(len(line) + 1 for line in lines[:-1]) <= 3000
    run_llm(sandbox, tmp_path / "off", list(replies), log_llm_messages=False)
    assert not (tmp_path / "off/llm_messages.jsonl").exists()
    assert (tmp_path / "off/events.jsonl").exists()


def test_prices_come_from_the_price_table_file(sandbox, tmp_path, settings):
    table = tmp_path / "prices.json"
    table.write_text(json.dumps({"fake-model": {"input_per_mtok": 10, "output_per_mtok": 20}}))
    settings.LLM_PRICE_TABLE = str(table)
    outcome, _ = run_llm(
        sandbox,
        tmp_path / "run",
        [tool_call("apply_patch", {"unified_diff": TOY_SOLUTION}, usage=(1000, 500))],
    )
    assert outcome.cost_usd == pytest.approx((1000 * 10 + 500 * 20) / 1e6)


def test_a_missing_model_name_is_a_permanent_llm_error(sandbox, tmp_path):
    agent = build_agent(agent_context(sandbox, tmp_path, variant="llm").model)
    outcome = agent.run(agent_context(sandbox, tmp_path, variant="llm"))
    assert outcome.reason is Reason.LLM_ERROR
    assert outcome.llm_error_kind == "permanent"
    assert "no model name" in outcome.error_text


def test_a_model_slower_than_the_time_budget_is_a_timeout(sandbox, tmp_path):
    slow = replace(text("DONE"), delay_sec=30.0)
    outcome, server = run_llm(sandbox, tmp_path, [slow], budgets=Budgets(max_time_sec=5))
    assert outcome.reason is Reason.TIMEOUT
    assert outcome.is_timeout
    assert outcome.error_text.startswith("[timeout]")
    assert len(server.requests) <= 1  # none when the first test run alone used the budget
    assert outcome.duration_sec < 20  # the request was cut at the budget, not waited out


def test_tokens_of_requests_before_an_llm_error_still_count(sandbox, tmp_path):
    outcome, server = run_llm(sandbox, tmp_path, [empty(usage=(50, 0))] * 3)
    assert len(server.requests) == 3
    assert outcome.reason is Reason.LLM_ERROR
    assert "3 empty replies" in outcome.error_text
    assert outcome.tokens_in == 150
    assert not outcome.is_empty_run
