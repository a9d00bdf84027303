"""The model gateway (runs/gateway/) between the real ``openai`` and ``anthropic`` clients and a
scripted provider speaking each wire API (tests/support/fake_provider.py): forwarding byte for
byte, streaming as it arrives, the record, tokens and cost, budgets, errors, the token."""

from __future__ import annotations

import http.client
import json
import socket
import stat
import threading
import time
from pathlib import Path

import anthropic
import openai
import pytest

from runs.failfast import classify_error_text, normalize_fingerprint
from runs.gateway import GatewayBudgets, open_gateway
from runs.gateway.server import KeyScrubber
from sandbox.base import AGENT_UID
from tests.support import fake_provider as fake
from tests.support.fake_provider import FakeProvider
from tests.support.gateway_fixtures import REAL_KEY, config, raw_post, records

MESSAGES = [{"role": "user", "content": "fix the bug"}]


def openai_client(gw, **kwargs) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.host_base_url, api_key=gw.token, max_retries=0, **kwargs)


def anthropic_client(gw) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=gw.host_base_url, api_key=gw.token, max_retries=0)


# -- forwarding -----------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_it_forwards_chat_completions_byte_for_byte(tmp_path: Path, stream: bool) -> None:
    reply = fake.chat("the fix is in calc.py", usage=(1200, 80), stream=stream)
    with FakeProvider([reply]) as upstream, open_gateway(config(upstream, tmp_path)) as gw:
        client = openai_client(gw)
        if stream:
            with client.chat.completions.with_streaming_response.create(
                model="gpt-4o", messages=MESSAGES, stream=True
            ) as response:
                received = b"".join(response.iter_bytes())
            text = "".join(
                json.loads(line[6:])["choices"][0]["delta"].get("content") or ""
                for line in received.decode().splitlines()
                if line.startswith("data: {") and json.loads(line[6:])["choices"]
            )
        else:
            raw = client.chat.completions.with_raw_response.create(
                model="gpt-4o", messages=MESSAGES
            )
            received = raw.http_response.content
            text = raw.parse().choices[0].message.content
    assert text == "the fix is in calc.py"
    assert received == upstream.sent[0]
    sent = upstream.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {REAL_KEY}"
    assert gw.token not in json.dumps(sent.headers)
    assert sent.headers["accept-encoding"] == "identity"
    (record,) = records(tmp_path / "model_calls.jsonl")
    assert record["api"] == "openai-chat" and record["stream"] is stream
    assert record["outcome"] == "ok" and record["status"] == 200
    assert record["response"]["body"].encode() == received
    assert record["response"]["body_bytes"] == len(received)
    # gpt-4o at the built-in price: $2.5 in and $10 out per million tokens.
    assert record["usage"]["input_tokens"] == 1200 and record["usage"]["output_tokens"] == 80
    assert record["cost_usd"] == pytest.approx((1200 * 2.5 + 80 * 10) / 1e6)
    summary = gw.summary
    assert (summary.calls, summary.input_tokens, summary.output_tokens) == (1, 1200, 80)
    assert summary.cost_usd == pytest.approx(record["cost_usd"])


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_it_forwards_openai_responses_byte_for_byte(tmp_path: Path, stream: bool) -> None:
    reply = fake.responses("patched mean()", usage=(900, 45), stream=stream)
    with FakeProvider([reply]) as upstream, open_gateway(config(upstream, tmp_path)) as gw:
        client = openai_client(gw)
        if stream:
            with client.responses.with_streaming_response.create(
                model="gpt-4o", input="fix it", stream=True
            ) as response:
                received = b"".join(response.iter_bytes())
            assert b"event: response.completed" in received
        else:
            raw = client.responses.with_raw_response.create(model="gpt-4o", input="fix it")
            received = raw.http_response.content
            assert raw.parse().output_text == "patched mean()"
    assert received == upstream.sent[0]
    assert upstream.requests[0].path == "/v1/responses"
    (record,) = records(tmp_path / "model_calls.jsonl")
    assert record["api"] == "openai-responses"
    assert record["response"]["body"].encode() == received
    # A stream's usage is in its last event, response.completed.
    assert (record["usage"]["input_tokens"], record["usage"]["output_tokens"]) == (900, 45)
    assert gw.summary.tokens == 945


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_it_forwards_anthropic_messages_byte_for_byte(tmp_path: Path, stream: bool) -> None:
    reply = fake.messages(
        "Reading calc.py",
        usage=(3000, 120),
        stream=stream,
        tool_use=("read_file", {"path": "calc.py"}),
        cache_read=500,
    )
    cfg = config(upstream := FakeProvider([reply]), tmp_path, anthropic=True)
    with upstream, open_gateway(cfg) as gw:
        client = anthropic_client(gw)
        if stream:
            with client.messages.with_streaming_response.create(
                model="claude-sonnet-4", max_tokens=1024, messages=MESSAGES, stream=True
            ) as response:
                received = b"".join(response.iter_bytes())
            assert b"event: message_stop" in received
        else:
            raw = client.messages.with_raw_response.create(
                model="claude-sonnet-4", max_tokens=1024, messages=MESSAGES
            )
            received = raw.http_response.content
            message = raw.parse()
            assert message.content[1].input == {"path": "calc.py"}
    assert received == upstream.sent[0]
    sent = upstream.requests[0]
    assert sent.path == "/v1/messages"
    assert sent.headers["anthropic-version"]  # the client's, passed on
    (record,) = records(tmp_path / "model_calls.jsonl")
    assert record["api"] == "anthropic-messages"
    assert record["response"]["body"].encode() == received
    # Input counts Anthropic's cached input too; a stream's output total is in message_delta.
    assert (record["usage"]["input_tokens"], record["usage"]["output_tokens"]) == (3500, 120)
    # claude-sonnet-4: $3 in, $0.30 a cached read and $15 out per million tokens (the 500
    # cached tokens are billed as reads, not as fresh input).
    assert record["cost_usd"] == pytest.approx((3000 * 3 + 500 * 0.3 + 120 * 15) / 1e6)


def test_the_real_anthropic_stream_helper_works_through_it(tmp_path: Path) -> None:
    reply = fake.messages("All tests pass now.", stream=True)
    cfg = config(upstream := FakeProvider([reply]), tmp_path, anthropic=True)
    with (
        upstream,
        open_gateway(cfg) as gw,
        anthropic_client(gw).messages.stream(
            model="claude-sonnet-4", max_tokens=100, messages=MESSAGES
        ) as stream,
    ):
        final = stream.get_final_message()
    assert final.content[0].text == "All tests pass now."
    assert final.usage.output_tokens == 20


def test_a_stream_reaches_the_client_while_the_upstream_is_still_sending(tmp_path: Path) -> None:
    """The upstream sends two events and then waits; the client must already have them (a
    gateway that buffered the stream would hand over nothing before the end)."""
    reply = fake.messages("one two three four", stream=True)
    reply.hold_after = 2
    cfg = config(upstream := FakeProvider([reply]), tmp_path, anthropic=True)
    with upstream, open_gateway(cfg) as gw:
        url = gw.host_base_url.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(url[0], int(url[1]), timeout=20)
        body = json.dumps(
            {"model": "claude-sonnet-4", "max_tokens": 10, "stream": True, "messages": MESSAGES}
        )
        conn.request(
            "POST",
            "/v1/messages",
            body=body,
            headers={"x-api-key": gw.token, "content-type": "application/json"},
        )
        response = conn.getresponse()
        early = b""
        while early.count(b"\n\n") < 2:  # times out (fails) if nothing comes before the end
            early += response.read1(65536)
        assert not reply.release.is_set()
        assert early.startswith(b"event: message_start")
        reply.release.set()
        rest = response.read()
        conn.close()
    assert early + rest == upstream.sent[0]


def test_it_passes_end_to_end_headers_and_drops_hop_by_hop_ones(tmp_path: Path) -> None:
    reply = fake.messages("ok")
    reply.headers.update(
        {
            "request-id": "req_42",
            "keep-alive": "timeout=5",
            "anthropic-ratelimit-requests-remaining": "99",
        }
    )
    cfg = config(upstream := FakeProvider([reply]), tmp_path, anthropic=True)
    with upstream, open_gateway(cfg) as gw:
        status, headers, _ = raw_post(
            gw.host_base_url,
            "/v1/messages",
            {"model": "claude-sonnet-4", "max_tokens": 5, "messages": MESSAGES},
            {
                "x-api-key": gw.token,
                "anthropic-version": "2023-06-01",
                "anthropic-beta": "tools-2024-05-16",
                "connection": "x-private, keep-alive",
                "x-private": "hop",
                "te": "trailers",
                "keep-alive": "timeout=9",
            },
        )
    assert status == 200
    sent = upstream.requests[0].headers
    assert sent["anthropic-version"] == "2023-06-01"
    assert sent["anthropic-beta"] == "tools-2024-05-16"
    assert sent["x-api-key"] == REAL_KEY and "authorization" not in sent
    assert "x-private" not in sent and "te" not in sent and "keep-alive" not in sent
    assert headers["request-id"] == "req_42"
    assert headers["anthropic-ratelimit-requests-remaining"] == "99"
    assert "keep-alive" not in headers


def test_it_asks_a_chat_stream_for_its_usage(tmp_path: Path) -> None:
    """A chat-completions stream reports tokens only when asked (stream_options): the
    gateway asks, and says so in the record."""
    with (
        FakeProvider([fake.chat("done", usage=(50, 7), stream=True)]) as upstream,
        open_gateway(config(upstream, tmp_path)) as gw,
    ):
        status, _, received = raw_post(
            gw.host_base_url,
            "/chat/completions",
            {"model": "gpt-4o", "stream": True, "messages": MESSAGES},
            {"authorization": f"Bearer {gw.token}"},
        )
    assert status == 200 and received == upstream.sent[0]
    assert upstream.requests[0].json["stream_options"] == {"include_usage": True}
    (record,) = records(tmp_path / "model_calls.jsonl")
    assert record["request"]["rewritten"] == "stream_options.include_usage=true"
    assert json.loads(record["request"]["body"]).get("stream_options") is None  # as sent
    assert record["usage"]["input_tokens"] == 50 and gw.summary.output_tokens == 7


# -- the record -----------------------------------------------------------------------------


def test_it_records_bodies_up_to_the_cap_with_their_full_size(tmp_path: Path) -> None:
    reply = fake.chat("x" * 5000, stream=True)
    with (
        FakeProvider([reply]) as upstream,
        open_gateway(config(upstream, tmp_path, body_cap_bytes=300)) as gw,
    ):
        openai_client(gw).chat.completions.create(model="gpt-4o", messages=MESSAGES)
    (record,) = records(tmp_path / "model_calls.jsonl")
    response = record["response"]
    assert record["body_cap_bytes"] == 300
    assert response["body_truncated"] and response["body_kept_bytes"] == 300
    assert response["body_bytes"] == len(upstream.sent[0]) > 5000
    assert response["body"].encode() == upstream.sent[0][:300]
    assert response["body_encoding"] == "utf-8"
    assert not record["request"]["body_truncated"]
    assert json.loads(record["request"]["body"])["messages"] == MESSAGES
    assert record["request"]["headers"]["authorization"] == "[redacted]"
    assert record["request"]["auth"] == "attempt-token"
    assert record["via"] == "host" and record["model"] == "gpt-4o"
    assert record["format"] == "agentbench.model_call.v1"


def test_a_body_that_is_not_utf8_is_kept_as_base64(tmp_path: Path) -> None:
    import base64

    reply = fake.Reply(
        body=b"\xff\xfe binary \x00", headers={"content-type": "text/plain"}, api="chat"
    )
    with FakeProvider([reply]) as upstream, open_gateway(config(upstream, tmp_path)) as gw:
        status, _, received = raw_post(
            gw.host_base_url,
            "/chat/completions",
            {"model": "gpt-4o", "messages": MESSAGES},
            {"authorization": f"Bearer {gw.token}"},
        )
    assert status == 200 and received == b"\xff\xfe binary \x00"
    (record,) = records(tmp_path / "model_calls.jsonl")
    assert record["response"]["body_encoding"] == "base64"
    assert base64.b64decode(record["response"]["body"]) == received
    assert record["usage"] is None and gw.summary.calls == 1 and gw.summary.tokens == 0


# -- budgets --------------------------------------------------------------------------------


def _exhaust(gw, client_kind: str, calls: int) -> Exception:
    """Make model calls until one is refused; return the client's error."""
    for _ in range(calls):
        try:
            if client_kind == "anthropic":
                anthropic_client(gw).messages.create(
                    model="claude-sonnet-4", max_tokens=10, messages=MESSAGES
                )
            else:
                openai_client(gw).chat.completions.create(model="gpt-4o", messages=MESSAGES)
        except (openai.APIStatusError, anthropic.APIStatusError) as exc:
            return exc
    raise AssertionError("no call was refused")


@pytest.mark.parametrize(
    ("budget", "budgets", "calls_made"),
    [
        ("calls", GatewayBudgets(max_calls=2), 2),
        ("tokens", GatewayBudgets(max_tokens=200), 2),  # 120 a call: refused at 240
        ("cost", GatewayBudgets(max_cost_usd=0.0007), 2),  # $0.00045 or $0.0006 a call
        ("time", GatewayBudgets(max_wall_sec=0.0), 0),
    ],
)
@pytest.mark.parametrize("client_kind", ["openai", "anthropic"])
def test_a_used_up_budget_refuses_the_call_in_the_apis_error_shape(
    tmp_path: Path, budget: str, budgets: GatewayBudgets, calls_made: int, client_kind: str
) -> None:
    replies = [
        fake.messages("ok", usage=(100, 20)) if client_kind == "anthropic" else fake.chat("ok")
        for _ in range(3)
    ]
    anthropic_shape = client_kind == "anthropic"
    cfg = config(
        upstream := FakeProvider(replies),
        tmp_path,
        anthropic=anthropic_shape,
        budgets=budgets,
        # The model each client asks for: another is refused (not_allowed).
        model_name="claude-sonnet-4" if anthropic_shape else "gpt-4o",
    )
    with upstream, open_gateway(cfg) as gw:
        error = _exhaust(gw, client_kind, 3)
    assert isinstance(error, openai.BadRequestError | anthropic.BadRequestError)
    assert error.status_code == 400
    body = error.body if anthropic_shape else {"error": error.body}
    detail = body["error"]
    assert detail["type"] == "invalid_request_error"
    assert f"{budget} budget is used up" in detail["message"]
    assert len(upstream.requests) == calls_made
    summary = gw.summary
    assert summary.budget_exceeded == budget
    assert summary.calls == calls_made
    assert f"{budget} budget" in summary.budget_message
    refused = records(tmp_path / "model_calls.jsonl")[-1]
    assert refused["outcome"] == "budget" and refused["error"]["budget"] == budget


def test_the_wall_time_budget_counts_from_the_agents_start(tmp_path: Path) -> None:
    """The gateway opens before the sandbox; the agent stage starts its clock. Time before
    that (the sandbox's start, setup, the baseline) is not the agent's."""
    budget = 5.0
    cfg = config(
        upstream := FakeProvider([fake.chat("ok") for _ in range(2)]),
        tmp_path,
        budgets=GatewayBudgets(max_wall_sec=budget),
    )
    with upstream, open_gateway(cfg) as gw:
        time.sleep(budget + 1)  # setup and the baseline, say
        gw.start_clock()  # the agent starts
        openai_client(gw).chat.completions.create(model="gpt-4o", messages=MESSAGES)
        assert gw.summary.budget_exceeded is None
        time.sleep(budget + 0.5)
        with pytest.raises(openai.BadRequestError, match="time budget is used up"):
            openai_client(gw).chat.completions.create(model="gpt-4o", messages=MESSAGES)
    assert gw.summary.budget_exceeded == "time"
    assert (gw.summary.calls, len(upstream.requests)) == (1, 1)


def test_calls_that_are_not_model_calls_use_no_budget(tmp_path: Path) -> None:
    models = fake.Reply(
        body=b'{"object": "list", "data": []}', headers={"content-type": "application/json"}
    )
    with FakeProvider([models, fake.chat("ok")]) as upstream:
        cfg = config(upstream, tmp_path, budgets=GatewayBudgets(max_calls=1))
        with open_gateway(cfg) as gw:
            assert list(openai_client(gw).models.list()) == []
            openai_client(gw).chat.completions.create(model="gpt-4o", messages=MESSAGES)
    assert gw.summary.calls == 1 and gw.summary.budget_exceeded is None
    assert [r["api"] for r in records(tmp_path / "model_calls.jsonl")] == ["models", "openai-chat"]


# -- upstream errors ------------------------------------------------------------------------


def test_a_permanent_401_is_not_retried_and_is_fingerprintable(tmp_path: Path) -> None:
    messages = []
    for attempt in range(2):
        bad_key = fake.error(401, "authentication_error", "invalid x-api-key", anthropic=True)
        folder = tmp_path / f"a{attempt}"
        cfg = config(upstream := FakeProvider([bad_key]), folder, anthropic=True)
        with (
            upstream,
            open_gateway(cfg) as gw,
            pytest.raises(anthropic.AuthenticationError) as caught,
        ):
            anthropic_client(gw).messages.create(
                model="claude-sonnet-4", max_tokens=10, messages=MESSAGES
            )
        assert len(upstream.requests) == 1  # not retried
        assert caught.value.body["error"]["message"] == "invalid x-api-key"  # the upstream's
        summary = gw.summary
        assert summary.permanent_error is not None and summary.permanent_error.status == 401
        assert summary.retries == 0 and summary.transient_failures == 0
        (record,) = records(folder / "model_calls.jsonl")
        assert record["outcome"] == "permanent_error" and record["error"]["kind"] == "permanent"
        messages.append(summary.permanent_error.message)
    assert "authentication_error: invalid x-api-key" in messages[0]
    assert classify_error_text(messages[0]) == "permanent"
    assert normalize_fingerprint(messages[0]) == normalize_fingerprint(messages[1])


def test_an_unknown_model_is_permanent(tmp_path: Path) -> None:
    unknown = fake.error(404, "model_not_found", "The model `gpt-9` does not exist")
    with (
        FakeProvider([unknown]) as upstream,
        # A configuration naming a model its upstream does not have.
        open_gateway(config(upstream, tmp_path, model_name="gpt-9")) as gw,
        pytest.raises(openai.NotFoundError),
    ):
        openai_client(gw).chat.completions.create(model="gpt-9", messages=MESSAGES)
    assert len(upstream.requests) == 1
    assert gw.summary.permanent_error.status == 404


def test_a_failing_look_up_that_is_no_model_call_is_no_attempt_error(tmp_path: Path) -> None:
    """A 404 for the model list says nothing of the model calls; a 401 says the key is bad."""
    missing = fake.error(404, "not_found_error", "no such route")
    refused = fake.error(401, "authentication_error", "invalid key")
    with (
        FakeProvider([missing, refused]) as upstream,
        open_gateway(config(upstream, tmp_path)) as gw,
    ):
        with pytest.raises(openai.NotFoundError):
            openai_client(gw).models.list()
        assert gw.summary.permanent_error is None
        with pytest.raises(openai.AuthenticationError):
            openai_client(gw).models.list()
    assert gw.summary.permanent_error.status == 401 and gw.summary.calls == 0


def test_a_429_is_retried_after_the_time_retry_after_asks(tmp_path: Path) -> None:
    limited = fake.error(429, "rate_limit_error", "slow down", headers={"retry-after": "1"})
    with (
        FakeProvider([limited, fake.chat("finally")]) as upstream,
        open_gateway(config(upstream, tmp_path)) as gw,
    ):
        reply = openai_client(gw).chat.completions.create(model="gpt-4o", messages=MESSAGES)
    assert reply.choices[0].message.content == "finally"  # the CLI never saw the 429
    assert len(upstream.requests) == 2
    (record,) = records(tmp_path / "model_calls.jsonl")
    assert record["outcome"] == "ok" and record["retries"] == 1
    (tried,) = record["attempts"]
    assert tried["status"] == 429 and tried["retry_after_sec"] == 1.0
    assert tried["waited_sec"] == 1.0  # the policy's own delay is 0.01 s
    summary = gw.summary
    assert (summary.retries, summary.transient_failures, summary.transient_exhausted) == (1, 1, 0)


@pytest.mark.parametrize("status", [503, 529])
def test_a_5xx_or_overloaded_answer_is_retried(tmp_path: Path, status: int) -> None:
    kind = "overloaded_error" if status == 529 else "api_error"
    failing = fake.error(status, kind, "try again", anthropic=True)
    cfg = config(
        upstream := FakeProvider([failing, failing, fake.messages("ok")]), tmp_path, anthropic=True
    )
    with upstream, open_gateway(cfg) as gw:
        message = anthropic_client(gw).messages.create(
            model="claude-sonnet-4", max_tokens=10, messages=MESSAGES
        )
    assert message.content[0].text == "ok"
    assert len(upstream.requests) == 3
    assert gw.summary.retries == 2 and gw.summary.transient_exhausted == 0


def test_when_retries_run_out_the_cli_gets_the_last_answer(tmp_path: Path) -> None:
    failing = [fake.error(503, "api_error", f"down {n}") for n in range(3)]
    with (
        FakeProvider(failing) as upstream,
        open_gateway(config(upstream, tmp_path)) as gw,
        pytest.raises(openai.InternalServerError) as caught,
    ):
        openai_client(gw).chat.completions.create(model="gpt-4o", messages=MESSAGES)
    assert caught.value.status_code == 503 and "down 2" in str(caught.value)
    assert len(upstream.requests) == 3  # FAST_RETRY: 3 attempts
    summary = gw.summary
    assert (summary.transient_failures, summary.transient_exhausted) == (3, 1)
    assert summary.permanent_error is None
    # The last failure's words and status, for the attempt's error text.
    assert summary.transient_error == (
        "the upstream answered HTTP 503 to POST /chat/completions: api_error: down 2",
        503,
    )
    assert summary.as_dict()["transient_error"]["status"] == 503
    (record,) = records(tmp_path / "model_calls.jsonl")
    assert record["outcome"] == "transient_exhausted" and len(record["attempts"]) == 3


def test_an_upstream_that_does_not_answer_is_a_transient_502(tmp_path: Path) -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{unused.getsockname()[1]}/v1"
    with FakeProvider() as upstream:
        cfg = config(upstream, tmp_path, upstream_base_url=dead)
        with open_gateway(cfg) as gw, pytest.raises(openai.APIStatusError) as caught:
            openai_client(gw).chat.completions.create(model="gpt-4o", messages=MESSAGES)
    assert caught.value.status_code == 502
    assert "the upstream did not answer" in caught.value.body["message"]
    assert gw.summary.transient_exhausted == 1 and gw.summary.transient_failures == 3
    error = gw.summary.transient_error
    assert error.status is None  # no answer: the 502 is the gateway's own
    assert error.message.startswith("POST /chat/completions: the upstream did not answer: ")


def test_a_stream_cut_midway_or_reporting_an_error_is_recorded(tmp_path: Path) -> None:
    cut = fake.messages("a b c d e f", stream=True)
    cut.drop_after = 3
    overloaded = fake.Reply(
        events=[
            fake.sse(
                {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
                "error",
            )
        ],
        api="messages",
        headers={"content-type": "text/event-stream"},
    )
    cfg = config(upstream := FakeProvider([cut, overloaded]), tmp_path, anthropic=True)
    with upstream, open_gateway(cfg) as gw:
        client = anthropic_client(gw)
        # The client's HTTP library reports the cut as it is (no final chunk).
        with (
            pytest.raises(Exception, match="incomplete chunked read"),
            client.messages.stream(
                model="claude-sonnet-4", max_tokens=10, messages=MESSAGES
            ) as stream,
        ):
            stream.get_final_message()
        with (
            pytest.raises(anthropic.APIStatusError, match="Overloaded"),
            client.messages.stream(
                model="claude-sonnet-4", max_tokens=10, messages=MESSAGES
            ) as stream,
        ):
            stream.get_final_message()
    first, second = records(tmp_path / "model_calls.jsonl")
    assert first["outcome"] == "stream_error" and "mid-answer" in first["error"]["message"]
    assert first["response"]["body"].encode() == upstream.sent[0]  # what came, kept
    assert first["usage"]["input_tokens"] == 100  # from message_start, before the cut
    assert second["error"] == {"kind": "transient", "message": "overloaded_error: Overloaded"}
    assert gw.summary.transient_exhausted == 2
    assert gw.summary.transient_error == (
        "the upstream's answer to POST /v1/messages reported: overloaded_error: Overloaded",
        200,
    )


# -- the token ------------------------------------------------------------------------------


def test_a_request_without_the_attempts_token_is_refused_and_recorded(tmp_path: Path) -> None:
    with (
        FakeProvider([fake.chat("never")]) as upstream,
        open_gateway(config(upstream, tmp_path)) as gw,
    ):
        other = openai.OpenAI(base_url=gw.host_base_url, api_key="abgw-guessed", max_retries=0)
        with pytest.raises(openai.AuthenticationError) as caught:
            other.chat.completions.create(model="gpt-4o", messages=MESSAGES)
        status, _, body = raw_post(
            gw.host_base_url,
            "/v1/messages",
            {"model": "m", "messages": []},
            {"anthropic-version": "2023-06-01"},
        )
        # The key itself, presented by a sandbox that somehow had it: refused too.
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(
                base_url=gw.host_base_url, api_key=REAL_KEY, max_retries=0
            ).chat.completions.create(model="gpt-4o", messages=MESSAGES)
    assert caught.value.body["code"] == "invalid_api_key"
    assert status == 401 and json.loads(body)["error"]["type"] == "authentication_error"
    assert upstream.requests == []
    assert gw.summary.refused == 3 and gw.summary.calls == 0
    found = records(tmp_path / "model_calls.jsonl")
    assert [r["outcome"] for r in found] == ["refused"] * 3
    assert [r["request"]["auth"] for r in found] == ["other", "none", "other"]
    assert REAL_KEY not in (tmp_path / "model_calls.jsonl").read_text()


def test_the_token_dies_with_the_gateway(tmp_path: Path) -> None:
    with FakeProvider([fake.chat("one"), fake.chat("two")]) as upstream:
        gw = open_gateway(config(upstream, tmp_path))
        host, port = gw.host_base_url.removeprefix("http://").split(":")
        kept = http.client.HTTPConnection(host, int(port), timeout=10)  # a kept-alive connection
        body = json.dumps({"model": "gpt-4o", "messages": MESSAGES})
        headers = {"authorization": f"Bearer {gw.token}", "content-type": "application/json"}
        kept.request("POST", "/chat/completions", body=body, headers=headers)
        assert kept.getresponse().read() and gw.socket_path.exists()
        gw.close()
        kept.request("POST", "/chat/completions", body=body, headers=headers)
        after = kept.getresponse()
        assert after.status == 401 and b"no longer valid" in after.read()
        kept.close()
        assert not gw.socket_path.exists()
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((host, int(port)), timeout=5)
        # The next attempt's gateway does not take the old token.
        with open_gateway(config(upstream, tmp_path / "next")) as second:
            status, _, _ = raw_post(
                second.host_base_url,
                "/chat/completions",
                {"model": "gpt-4o", "messages": MESSAGES},
                {"authorization": f"Bearer {gw.token}"},
            )
        assert status == 401
    assert len(upstream.requests) == 1


def test_a_request_body_over_the_limit_is_refused_unread(tmp_path: Path) -> None:
    with (
        FakeProvider() as upstream,
        open_gateway(config(upstream, tmp_path, max_request_bytes=1000)) as gw,
    ):
        status, headers, body = raw_post(
            gw.host_base_url,
            "/chat/completions",
            {"model": "gpt-4o", "messages": [{"role": "user", "content": "x" * 2000}]},
            {"authorization": f"Bearer {gw.token}"},
        )
        bad, _, _ = raw_post(
            gw.host_base_url,
            "/chat/completions",
            b"{}",
            {"authorization": f"Bearer {gw.token}", "content-length": "nope"},
        )
    assert status == 413 and headers["connection"] == "close"
    assert "over 1000 bytes" in json.loads(body)["error"]["message"]
    assert bad == 400
    assert upstream.requests == []
    found = records(tmp_path / "model_calls.jsonl")
    assert [r["outcome"] for r in found] == ["bad_request"] * 2
    assert found[0]["request"]["body_bytes"] == 0 and found[0]["request"]["auth"] == "attempt-token"


def test_only_the_sandbox_user_and_root_can_reach_the_socket(tmp_path: Path) -> None:
    with FakeProvider() as upstream, open_gateway(config(upstream, tmp_path)) as gw:
        folder, sock = gw.socket_path.parent.stat(), gw.socket_path.stat()
    assert (folder.st_uid, folder.st_gid, stat.S_IMODE(folder.st_mode)) == (0, AGENT_UID, 0o750)
    assert (sock.st_uid, sock.st_gid, stat.S_IMODE(sock.st_mode)) == (0, AGENT_UID, 0o660)
    assert stat.S_ISSOCK(sock.st_mode)


def test_it_forwards_only_the_model_apis(tmp_path: Path) -> None:
    with FakeProvider() as upstream, open_gateway(config(upstream, tmp_path)) as gw:
        for method, path in [
            ("POST", "/files"),
            ("POST", "/fine_tuning/jobs"),
            ("GET", "/responses/resp_1"),
            ("POST", "/messages/batches"),
        ]:
            status, _, body = raw_post(
                gw.host_base_url, path, {}, {"authorization": f"Bearer {gw.token}"}, method=method
            )
            assert status == 404, path
            assert "not a model API" in json.loads(body)["error"]["message"]
    assert upstream.requests == []


def test_a_key_the_upstream_echoes_never_reaches_the_client(tmp_path: Path) -> None:
    echo = fake.error(401, "invalid_api_key", f"Incorrect API key provided: {REAL_KEY}.")
    split = REAL_KEY[:9]
    streamed = fake.Reply(
        events=[
            fake.sse({"choices": [], "note": "x"}),
            f'data: {{"choices": [], "key": "{split}'.encode(),
            f'{REAL_KEY[9:]}"}}\n\n'.encode(),
        ],
        api="chat",
        headers={"content-type": "text/event-stream"},
    )
    with FakeProvider([echo, streamed]) as upstream, open_gateway(config(upstream, tmp_path)) as gw:
        status, _, first = raw_post(
            gw.host_base_url,
            "/chat/completions",
            {"model": "gpt-4o", "messages": MESSAGES},
            {"authorization": f"Bearer {gw.token}"},
        )
        _, _, second = raw_post(
            gw.host_base_url,
            "/chat/completions",
            {"model": "gpt-4o", "messages": MESSAGES, "stream": True},
            {"authorization": f"Bearer {gw.token}"},
        )
    assert status == 401 and b"Incorrect API key provided: [redacted]." in first
    assert REAL_KEY.encode() not in second and b'"key": "[redacted]"' in second
    stored = (tmp_path / "model_calls.jsonl").read_text()
    assert REAL_KEY not in stored and REAL_KEY not in gw.summary.permanent_error.message


def test_the_key_scrubber_finds_the_key_across_pieces() -> None:
    scrubber = KeyScrubber(b"sk-secret")
    pieces = [b"data: sk-se", b"cret and sk", b"-", b"secret!", b" sk-s"]
    out = b"".join(scrubber.feed(p) for p in pieces) + scrubber.flush()
    assert out == b"data: [redacted] and [redacted]! sk-s"
    assert KeyScrubber(b"sk-secret").feed(b"event: x\n\n") == b"event: x\n\n"  # nothing held


def test_concurrent_calls_are_each_recorded_and_counted(tmp_path: Path) -> None:
    replies = [fake.chat(f"answer {n}", usage=(10, 1)) for n in range(8)]
    with FakeProvider(replies) as upstream, open_gateway(config(upstream, tmp_path)) as gw:
        client = openai_client(gw)
        errors: list[BaseException] = []

        def call() -> None:
            try:
                client.chat.completions.create(model="gpt-4o", messages=MESSAGES)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=call) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert errors == []
    found = records(tmp_path / "model_calls.jsonl")
    assert sorted(r["seq"] for r in found) == list(range(1, 9))
    assert gw.summary.calls == 8 and gw.summary.tokens == 88
