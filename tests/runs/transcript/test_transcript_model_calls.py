"""A CLI agent's transcript rebuilt from the gateway's ``model_calls.jsonl``: the three wire
APIs, streamed and not, each turn shown once, tool results as the CLI sent them, tokens and
cost per call, side calls folded, errors as errors, and cut or broken lines named."""

from __future__ import annotations

import base64
import json

import pytest
from django.urls import reverse

from runs import transcript
from runs.transcript import model_calls
from tasks_app.models import Task
from tests.conftest import REPO_ROOT
from tests.support.model_calls_fixtures import (
    CONVERSATIONS,
    COSTS,
    DONE,
    EDIT_ARGS,
    EDIT_OUTPUT,
    READ_ARGS,
    READ_OUTPUT,
    SYSTEM,
    TASK,
    THOUGHT,
    USAGE,
    anthropic_conversation,
    anthropic_json,
    chat_json,
    jsonl,
    record,
    sse,
    with_response,
)
from tests.support.pages_fixtures import (
    make_attempt,
    make_model,
    make_run,
    make_suite,
    write_artifact,
)

SCRIPT = "<script>window.__xss=1</script>"


def read(records: list[dict], events: list[dict] | None = None) -> transcript.Transcript:
    files = {"model_calls.jsonl": jsonl(records)}
    if events is not None:
        files["events.jsonl"] = jsonl(events)
    result = transcript.load(files.get)
    assert result is not None
    return result


def shape(t: transcript.Transcript) -> list[tuple]:
    """What a person reads: roles, texts, reasoning, calls with arguments and results."""
    return [
        (
            turn.role,
            turn.text.text,
            turn.reasoning.text if turn.reasoning else "",
            [
                (c.name, c.arguments.text, c.result.text if c.result else None)
                for c in turn.tool_calls
            ],
        )
        for turn in t.turns
    ]


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("api", ["anthropic", "responses", "chat"])
def test_each_api_reads_as_the_conversation_with_every_turn_once(api, stream):
    t = read(CONVERSATIONS[api](stream))
    assert t.source == "model-calls" and t.error == "" and t.notes == []
    roles = [turn.role for turn in t.turns]
    assert roles == ["system", "user", "assistant", "assistant", "assistant"]
    system, user, first, second, last = t.turns
    assert (system.text.text, user.text.text) == (SYSTEM, TASK)
    # The first reply: its reasoning (folded on the page), its text, its call and the
    # result the CLI sent back in the next request.
    assert first.text.text == "Reading the file." and first.reasoning.text == THOUGHT
    (read_call,) = first.tool_calls
    assert read_call.input == READ_ARGS and "src/toy/calc.py" in read_call.arguments.text
    assert read_call.result.text == READ_OUTPUT and read_call.call_id
    (edit_call,) = second.tool_calls
    assert edit_call.input == EDIT_ARGS and edit_call.result.text == EDIT_OUTPUT
    assert last.text.text == DONE and last.tool_calls == []
    # Tokens and cost per call, on the reply it produced; totals over the calls.
    assert [(x.tokens_in, x.tokens_out) for x in (first, second, last)] == USAGE
    assert [x.cost_usd for x in (first, second, last)] == COSTS
    assert (t.tokens_in, t.tokens_out) == (sum(u[0] for u in USAGE), sum(u[1] for u in USAGE))
    assert t.cost_usd == pytest.approx(sum(COSTS)) and t.api_calls == 3
    assert t.model and t.tool_call_count == 2


@pytest.mark.parametrize("api", ["anthropic", "responses", "chat"])
def test_a_stream_and_a_whole_response_read_the_same(api):
    assert shape(read(CONVERSATIONS[api](True))) == shape(read(CONVERSATIONS[api](False)))


def test_a_side_call_of_another_conversation_is_one_folded_turn():
    records = anthropic_conversation(True)
    side = {
        "model": "claude-haiku-4-5",
        "max_tokens": 50,
        "system": "Write a 3-word title.",
        "messages": [{"role": "user", "content": TASK}],
    }
    body = anthropic_json([{"type": "text", "text": "Fix mean division"}], (30, 4), "haiku")
    records.insert(
        0, record(0, "anthropic", side, body, usage={"input_tokens": 30, "output_tokens": 4})
    )
    t = read(records)
    assert [x.role for x in t.turns] == ["event", "system", "user", *["assistant"] * 3]
    folded = t.turns[0]
    assert folded.title.startswith("side call") and "Fix mean division" in folded.text.text
    assert folded.tokens_in == 30 and t.tokens_in == 30 + sum(u[0] for u in USAGE)
    assert t.api_calls == 4


def test_errors_show_as_error_turns_refused_budget_and_upstream():
    records = anthropic_conversation(True)[:2]
    call = records[1] | {"usage": None, "cost_usd": None}
    # The upstream refused the key (permanent, not retried); the gateway kept its error body.
    upstream_401 = {
        "type": "error",
        "error": {"type": "authentication_error", "message": "invalid x-api-key"},
    }
    unauthorized = with_response(
        call,
        json.dumps(upstream_401),
        status=401,
        seq=3,
        outcome="permanent_error",
        error={"kind": "permanent", "message": "HTTP 401"},
    )
    # The gateway stopped the CLI at its call budget, without calling upstream.
    budget = with_response(
        call,
        json.dumps({"error": {"type": "budget_exceeded", "message": "max_calls=3 reached"}}),
        status=429,
        seq=4,
        outcome="budget",
        error={"kind": "budget", "message": "calls budget (3) used up", "budget": "calls"},
    )
    # A stream that ends in an error event (overloaded mid-stream).
    overloaded = with_response(
        call,
        sse(
            [
                (
                    "message_start",
                    {"type": "message_start", "message": {"model": "m", "usage": {}}},
                ),
                (
                    "error",
                    {
                        "type": "error",
                        "error": {"type": "overloaded_error", "message": "Overloaded"},
                    },
                ),
            ]
        ),
        seq=5,
        outcome="stream_error",
    )
    # 529s retried until the gateway gave up.
    exhausted = with_response(
        call,
        json.dumps(
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
        ),
        status=529,
        seq=6,
        outcome="transient_exhausted",
        retries=4,
    )
    refused = with_response(
        call,
        "forbidden",
        status=401,
        seq=7,
        outcome="refused",
        error={"kind": "refused", "message": "token expired"},
    )
    # Not a model call: Claude Code counting tokens; not a turn.
    count = record(8, "anthropic", {"model": "m", "messages": []}, '{"input_tokens": 12}')
    count |= {
        "api": "anthropic-count-tokens",
        "model_call": False,
        "path": "/v1/messages/count_tokens",
    }
    t = read([*records, unauthorized, budget, overloaded, exhausted, refused, count])
    errors = [x for x in t.turns if x.is_error]
    assert [x.title for x in errors] == [
        "upstream error 401 (permanent)",
        "budget exceeded",
        "upstream error in the stream",
        "upstream error 529 (after 4 retries)",
        "refused by the gateway",
    ]
    assert "authentication_error: invalid x-api-key" in errors[0].text.text
    assert "calls budget (3) used up" in errors[1].text.text
    assert "overloaded_error: Overloaded" in errors[2].text.text
    assert "token expired" in errors[4].text.text
    # The conversation itself is shown once, whatever the retries re-sent.
    assert [x.role for x in t.turns if not x.is_error] == [
        "system",
        "user",
        "assistant",
        "assistant",
    ]
    assert t.api_calls == 7 and any("1 request(s) that were no model call" in n for n in t.notes)


def test_a_cut_body_or_a_broken_line_is_named_and_the_rest_still_reads():
    records = anthropic_conversation(True)
    request = records[1]["request"]
    cut_request = records[1] | {
        "request": request | {"body": request["body"][:200], "body_truncated": True}
    }
    full = records[2]["response"]["body"]
    cut_stream = with_response(records[2], full[: full.index("Done") + 60], truncated=True)
    data = jsonl([records[0], cut_request]) + b"{ not json\n" + jsonl([cut_stream])
    t = transcript.load({"model_calls.jsonl": data}.get)
    assert t is not None and t.error == ""
    assert any("line 2 (call 2): the request body was cut" in n for n in t.notes)
    assert any("line 3: not valid JSON" in n for n in t.notes)
    assert any("line 4 (call 3): the response stream was cut" in n for n in t.notes)
    # What the cut stream held is shown; the call whose request was cut still shows its reply.
    texts = [x.text.text for x in t.turns if x.role == "assistant"]
    assert texts[-1].startswith("Done") and len(texts) == 3


def test_lines_come_in_the_order_requests_arrived_and_base64_bodies_read():
    """The gateway writes a line when its request ends, and keeps bytes that are not UTF-8 as
    base64."""
    records = anthropic_conversation(False)
    encoded = base64.b64encode(records[2]["response"]["body"].encode()).decode()
    records[2]["response"] |= {"body": encoded, "body_encoding": "base64"}
    t = read([records[1], records[2], records[0]])
    assert shape(t) == shape(read(anthropic_conversation(False)))


def test_a_text_agent_over_chat_gets_its_bash_block_as_a_call_with_the_next_output():
    """mini-swe-agent asks for one bash block an answer; its output is the next user message."""
    thought = "THOUGHT: look at the file.\n\n```bash\ncat src/toy/calc.py\n```"
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}]
    first = {"model": "m", "messages": messages}
    reply = {"role": "assistant", "content": thought}
    second = {
        "model": "m",
        "messages": [*messages, reply, {"role": "user", "content": READ_OUTPUT}],
    }
    t = read(
        [
            record(1, "chat", first, chat_json(reply, (10, 5), "m")),
            record(
                2, "chat", second, chat_json({"role": "assistant", "content": DONE}, (20, 2), "m")
            ),
        ]
    )
    assert [x.role for x in t.turns] == ["system", "user", "assistant", "assistant"]
    (call,) = t.turns[2].tool_calls
    assert (call.name, call.arguments.text, call.result.text) == (
        "bash",
        "cat src/toy/calc.py",
        READ_OUTPUT,
    )
    assert t.turns[2].text.text == "THOUGHT: look at the file."


def test_responses_freeform_tools_and_encrypted_reasoning_read():
    """Codex's apply_patch is a custom (freeform) tool; reasoning may be encrypted only."""
    patch = "*** Begin Patch\n*** Update File: a.py\n-x\n+y\n*** End Patch"
    items = [
        {"type": "reasoning", "id": "rs", "summary": [], "encrypted_content": "gAAA"},
        {
            "type": "custom_tool_call",
            "id": "ct",
            "call_id": "call_p",
            "name": "apply_patch",
            "input": patch,
        },
    ]
    first = {"model": "m", "input": [{"role": "user", "content": TASK}], "stream": True}
    second = {
        "model": "m",
        "input": [
            {"role": "user", "content": TASK},
            *items,
            {"type": "custom_tool_call_output", "call_id": "call_p", "output": "Done!"},
        ],
    }
    body = sse(
        [
            (
                "response.completed",
                {
                    "type": "response.completed",
                    "response": {
                        "model": "m",
                        "status": "completed",
                        "output": items,
                        "usage": {"input_tokens": 5, "output_tokens": 6},
                    },
                },
            )
        ]
    )
    final = json.dumps(
        {
            "model": "m",
            "status": "completed",
            "output": [
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": DONE}],
                }
            ],
        }
    )
    t = read([record(1, "responses", first, body), record(2, "responses", second, final)])
    assert [x.role for x in t.turns] == ["user", "assistant", "assistant"]
    turn = t.turns[1]
    assert turn.reasoning.text == "[encrypted reasoning]"
    (call,) = turn.tool_calls
    assert (call.name, call.arguments.text, call.result.text) == ("apply_patch", patch, "Done!")
    assert (turn.tokens_in, turn.tokens_out) == (5, 6)


def test_the_agents_ending_events_follow_the_calls():
    events = [
        {"event": "tests_finish", "exit_code": 0},
        {"event": "agent_finish", "stop": "exited 0"},
    ]
    t = read(CONVERSATIONS["chat"](True), events)
    assert [x.title for x in t.turns[-2:]] == ["tests_finish", "agent_finish"]
    assert t.exit_status == "exited 0"


def test_the_api_is_named_by_the_record_or_else_by_the_body():
    assert model_calls.api_of({"path": "/v1/messages"}) == model_calls.ANTHROPIC
    assert model_calls.api_of({"api": "openai-responses"}) == model_calls.RESPONSES
    assert model_calls.api_of({}, {"input": "hi"}) == model_calls.RESPONSES
    assert model_calls.api_of({}, {"messages": []}) == model_calls.CHAT


# --- real recordings ------------------------------------------------------------------------

# What each real CLI sent through the gateway on the toy task (recorded by the CLI agents' end
# to end test against the scripted upstream, scrubbed of ports, paths and times).
REAL = REPO_ROOT / "tests" / "data" / "model_calls"
REAL_CALLS = {
    "claude-code": ["Read", "Bash", "Edit"],
    "codex": ["exec_command", "exec_command", "exec_command"],
    "mini-swe-agent": ["bash", "bash", "bash", "bash"],
    "qwen-code": ["read_file", "run_shell_command", "edit"],
    "gemini-cli": ["read_file", "run_shell_command", "replace"],
    "opencode": ["read", "bash", "edit"],
}
# Side calls of another conversation, each folded into one event: OpenCode's session title
# (the one call offering no tools).
SIDE_CALLS = {
    "opencode": 1,
}


@pytest.mark.parametrize("cli", list(REAL_CALLS))
def test_a_real_clis_recording_reads_as_its_conversation(cli):
    data = (REAL / f"{cli}.jsonl").read_bytes()
    records = [json.loads(line) for line in data.splitlines() if line.strip()]
    model_calls = [r for r in records if r.get("model_call")]
    t = transcript.load({"model_calls.jsonl": data}.get)
    assert t is not None and t.error == "" and t.notes == []
    assistants = [x for x in t.turns if x.role == "assistant"]
    side = [x for x in t.turns if x.role == "event" and x.title.startswith("side call")]
    assert len(side) == SIDE_CALLS.get(cli, 0) and len(model_calls) == t.api_calls
    if side:
        model_calls = [r for r in model_calls if '"tools"' in r["request"]["body"]]
    # One reply per call, each once, with that call's tokens as the gateway counted them.
    assert len(assistants) == len(model_calls)
    assert [(x.tokens_in, x.tokens_out) for x in assistants] == [
        (r["usage"]["input_tokens"], r["usage"]["output_tokens"]) for r in model_calls
    ]
    assert [c.name for x in assistants for c in x.tool_calls] == REAL_CALLS[cli]
    calls = [c for x in assistants for c in x.tool_calls]
    # Each result is what the CLI sent back in its next request, the last bash (the
    # agent's "submit") excepted: nothing came after it.
    answered = calls[:-1] if cli == "mini-swe-agent" else calls
    assert all(c.result is not None and c.result.text for c in answered)
    for call, later in zip(answered, model_calls[1:], strict=False):
        assert json.dumps(call.result.text)[1:40] in later["request"]["body"]
    assert "/ len(values)" in "".join(c.arguments.text for c in calls)
    first = next(x for x in t.turns if x not in side)  # a side call may come first
    assert first.role == "system" and "toy.calc.mean()" in "".join(
        x.text.text for x in t.turns if x.role == "user"
    )
    # The run exports as ATIF and reads back the same.
    document = transcript.to_atif(t, agent_name=cli, agent_version="test")
    assert transcript.atif.validate(document) == []
    assert shape(transcript.parse_atif(document)) == shape(t)


# --- the attempt page and the API ------------------------------------------------------------


@pytest.fixture
def attempt(artifacts_root):
    suite = make_suite("calls", tasks=1)
    task = Task.objects.get(suite=suite)
    return make_attempt(make_run(suite, make_model("claude-code")), task, "TESTS_FAILED")


@pytest.mark.django_db
def test_the_attempt_page_shows_a_cli_run_escaped_with_its_problems(client, bob, attempt):
    records = anthropic_conversation(True)
    for r in records:  # every request sends the same first message
        body = json.loads(r["request"]["body"])
        body["messages"][0]["content"][0]["text"] = SCRIPT
        r["request"]["body"] = json.dumps(body)
    write_artifact(attempt, "model_calls.jsonl", jsonl(records) + b"{ broken\n")
    client.force_login(bob)
    body = client.get(reverse("attempt-detail", args=[attempt.public_id])).content.decode()
    assert "model calls (recorded by the gateway)" in body
    assert SCRIPT not in body and "&lt;script&gt;window.__xss=1&lt;/script&gt;" in body
    assert "model_calls.jsonl line 4: not valid JSON" in body
    assert "Reading the file." in body and "Read" in body
    assert body.count(DONE) == 1

    api = client.get(f"/api/attempts/{attempt.public_id}/transcript").json()
    assert api["source"] == "model-calls" and api["api_calls"] == 3
    assert [t["role"] for t in api["turns"]].count("assistant") == 3
    assert api["turns"][2]["tool_calls"][0]["result"]["text"] == READ_OUTPUT
