"""The gateway's budgets under attack from its own CLI: parallel calls racing the token and cost
budgets, a stream that never ends, a request naming a dearer model, a model with no price.
The real ``openai`` and ``anthropic`` clients against a scripted provider on loopback
(tests/support/fake_provider.py); the race from inside real sandboxes is in
tests/runs/gateway/test_gateway_sandbox_budgets.py."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import anthropic
import openai
import pytest

from runs.gateway import GatewayBudgets, GatewayConfigError, open_gateway
from runs.gateway.ledger import INPUT_TOKENS_OVERHEAD
from tests.support import fake_provider as fake
from tests.support.fake_provider import FakeProvider, Request
from tests.support.gateway_fixtures import config, raw_post, records

MESSAGES = [{"role": "user", "content": "fix the bug"}]
# gpt-4o's list price: 120 tokens (100 in, 20 out) cost $0.00045.
CALL_TOKENS, CALL_COST = 120, (100 * 2.5 + 20 * 10) / 1e6


def parallel_calls(gw, n: int, body: dict, path: str = "/chat/completions") -> list[tuple]:
    """``n`` requests at once, each on its own connection: (status, headers, body) each."""
    results: list[tuple] = []
    lock = threading.Lock()
    start = threading.Barrier(n)

    def call() -> None:
        start.wait()
        answer = raw_post(gw.host_base_url, path, body, {"authorization": f"Bearer {gw.token}"})
        with lock:
            results.append(answer)

    threads = [threading.Thread(target=call) for _ in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def slow_chat(request: Request) -> fake.Reply:
    """Every call answered after a while, so that the parallel ones overlap."""
    reply = fake.chat("ok", usage=(100, 20))
    reply.delay_sec = 0.2
    return reply


# -- parallel calls ---------------------------------------------------------------------------


def test_parallel_calls_cannot_race_past_the_token_and_cost_budgets(tmp_path: Path) -> None:
    """30 calls at once against 300 tokens and $0.001 (before: all 30 answered, 3,600 tokens
    and $0.0135). A call waits for the calls in flight; only the last one admitted, whose
    answer was larger than what was left, crosses a limit, by that one answer."""
    budgets = GatewayBudgets(max_tokens=300, max_cost_usd=0.001)
    with (
        FakeProvider(respond=slow_chat) as upstream,
        open_gateway(config(upstream, tmp_path, budgets=budgets)) as gw,
    ):
        results = parallel_calls(gw, 30, {"model": "gpt-4o", "messages": MESSAGES})
    answered = [r for r in results if r[0] == 200]
    refused = [r for r in results if r[0] != 200]
    assert len(answered) == len(upstream.requests) <= 3
    assert {r[0] for r in refused} == {400} and len(refused) >= 27
    assert all(json.loads(r[2])["error"]["code"] == "budget_exceeded" for r in refused)
    summary = gw.summary
    assert summary.tokens == CALL_TOKENS * len(answered) <= 300 + CALL_TOKENS
    assert summary.cost_usd <= 0.001 + CALL_COST
    assert summary.budget_exceeded in ("tokens", "cost")
    found = records(tmp_path / "model_calls.jsonl")
    assert sorted(r["outcome"] for r in found) == ["budget"] * len(refused) + ["ok"] * len(answered)


def dense_chat(request: Request) -> fake.Reply:
    """The most input a real provider can count for a request: one token per byte of it (a
    byte-level BPE token covers at least one byte) plus its own prompt around the tools."""
    reply = fake.chat("ok", usage=(len(request.body) + INPUT_TOKENS_OVERHEAD, 20))
    reply.delay_sec = 0.2
    return reply


def test_text_dense_in_tokens_cannot_race_past_the_token_budget(tmp_path: Path) -> None:
    """A sandbox can write text that counts a token for every one or two bytes (digits,
    punctuation, rare scripts). Reserved at 3 bytes a token, 20 such calls at once went
    through a 3,000-token budget (the gateway's own estimate was a third of their input);
    reserved at the most a provider can count, only the last one admitted crosses it."""
    digits = "".join(str(n % 97) for n in range(300))  # 500-odd bytes, dense in tokens
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": digits}], "max_tokens": 20}
    with (
        FakeProvider(respond=dense_chat) as upstream,
        open_gateway(config(upstream, tmp_path, budgets=GatewayBudgets(max_tokens=3000))) as gw,
    ):
        results = parallel_calls(gw, 20, body)
    answered = [r for r in results if r[0] == 200]
    assert len(answered) == len(upstream.requests) >= 1
    call_tokens = max(len(r.body) for r in upstream.requests) + INPUT_TOKENS_OVERHEAD + 20
    assert gw.summary.tokens <= 3000 + call_tokens, (gw.summary.tokens, len(answered))
    assert gw.summary.budget_exceeded == "tokens"


def test_a_call_waits_for_the_calls_in_flight_rather_than_being_refused(tmp_path: Path) -> None:
    """Calls that fit one after another all get through (none refused for what another call
    merely held): 4 calls of 120 tokens, each asking for at most 50 output tokens, under 600."""
    with (
        FakeProvider(respond=slow_chat) as upstream,
        open_gateway(config(upstream, tmp_path, budgets=GatewayBudgets(max_tokens=600))) as gw,
    ):
        body = {"model": "gpt-4o", "messages": MESSAGES, "max_tokens": 50}
        results = parallel_calls(gw, 4, body)
    assert [r[0] for r in results] == [200] * 4
    assert gw.summary.tokens == 480 and gw.summary.budget_exceeded is None


# -- streams ----------------------------------------------------------------------------------

# A stream of about 6 MB (some 6,000 tokens by its bytes) against a budget of 1,000 tokens.
FILLER = "x" * 1000
CHUNKS = 6000


def endless_stream(api: str) -> fake.Reply:
    if api == "messages":
        start = {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 100, "output_tokens": 1},
            },
        }
        block = {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "text", "text": ""},
        }
        delta = {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": FILLER},
        }
        events = [
            fake.sse(start, "message_start"),
            fake.sse(block, "content_block_start"),
            *[fake.sse(delta, "content_block_delta")] * CHUNKS,
        ]
    elif api == "responses":
        delta = {
            "type": "response.output_text.delta",
            "item_id": "msg_1",
            "output_index": 0,
            "content_index": 0,
            "delta": FILLER,
            "sequence_number": 1,
        }
        events = [fake.sse(delta, "response.output_text.delta")] * CHUNKS
    else:
        choice = {"index": 0, "delta": {"content": FILLER}, "finish_reason": None}
        chunk = {
            "id": "c1",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "gpt-4o",
            "choices": [choice],
        }
        events = [fake.sse(chunk)] * CHUNKS
    return fake.Reply(events=events, api=api, headers={"content-type": "text/event-stream"})


def read_stream(gw, api: str) -> tuple[str, int]:
    """Stream through the real client of the API: (what it raised, the text bytes it got)."""
    got = 0
    try:
        if api == "messages":
            client = anthropic.Anthropic(base_url=gw.host_base_url, api_key=gw.token, max_retries=0)
            stream = client.messages.create(
                model="claude-sonnet-4", max_tokens=64000, messages=MESSAGES, stream=True
            )
            for event in stream:
                if event.type == "content_block_delta":
                    got += len(event.delta.text)
        else:
            client = openai.OpenAI(base_url=gw.host_base_url, api_key=gw.token, max_retries=0)
            if api == "responses":
                for event in client.responses.create(model="gpt-4o", input="go", stream=True):
                    got += len(getattr(event, "delta", "") or "")
            else:
                for chunk in client.chat.completions.create(
                    model="gpt-4o", messages=MESSAGES, stream=True
                ):
                    got += len(chunk.choices[0].delta.content or "") if chunk.choices else 0
    except (openai.APIError, anthropic.APIError) as exc:
        return str(exc), got
    return "", got


@pytest.mark.parametrize("api", ["messages", "chat", "responses"])
def test_a_stream_is_cut_with_an_error_event_when_it_passes_the_budget(
    tmp_path: Path, api: str
) -> None:
    """Before: the whole stream went through whatever the budget (312 MB / 75 M tokens went
    through a 1,000-token budget)."""
    cfg = config(
        upstream := FakeProvider([endless_stream(api)]),
        tmp_path,
        anthropic=api == "messages",
        budgets=GatewayBudgets(max_tokens=1000),
        body_cap_bytes=4_000_000,  # the whole stream in the record
    )
    with upstream, open_gateway(cfg) as gw:
        raised, got = read_stream(gw, api)
    assert "tokens budget is used up" in raised
    assert 0 < got < 1000 * 1024  # what was let through: under 1,000 tokens by its bytes
    (record,) = records(tmp_path / "model_calls.jsonl")
    assert record["outcome"] == "budget" and record["error"]["budget"] == "tokens"
    body = record["response"]["body"]
    # The stream ends with a whole error event (the events before it whole too).
    last = body.rstrip("\n").split("\n\n")[-1]
    data = json.loads(last.split("data: ", 1)[1])
    assert "tokens budget is used up" in json.dumps(data)
    assert len(body.encode()) < 1000 * 1024 + 2000
    summary = gw.summary
    assert summary.budget_exceeded == "tokens" and summary.tokens <= 1000


def test_a_stream_past_the_response_byte_limit_is_cut(tmp_path: Path) -> None:
    """max_response_bytes holds for streams too, budgets or not."""
    cfg = config(
        upstream := FakeProvider([endless_stream("chat")]),
        tmp_path,
        max_response_bytes=200_000,
    )
    with upstream, open_gateway(cfg) as gw:
        raised, got = read_stream(gw, "chat")
    assert "over 200000 bytes" in raised
    assert 0 < got < 200_000
    (record,) = records(tmp_path / "model_calls.jsonl")
    assert record["outcome"] == "stream_error"
    assert record["response"]["body_bytes"] < 200_000 + 1000
    assert gw.summary.transient_exhausted == 1


# -- the model --------------------------------------------------------------------------------


def test_a_request_for_another_model_is_refused_and_recorded(tmp_path: Path) -> None:
    """A claude-sonnet-4-5 configuration forwarded claude-opus-4-1 and priced it as sonnet."""
    cfg = config(
        upstream := FakeProvider([fake.messages("ok")]),
        tmp_path,
        anthropic=True,
        model_name="claude-sonnet-4-5",
    )
    client = None
    with upstream, open_gateway(cfg) as gw:
        client = anthropic.Anthropic(base_url=gw.host_base_url, api_key=gw.token, max_retries=0)
        with pytest.raises(anthropic.BadRequestError, match="claude-opus-4-1") as caught:
            client.messages.create(model="claude-opus-4-1", max_tokens=10, messages=MESSAGES)
        counted, _, _ = raw_post(
            gw.host_base_url,
            "/v1/messages/count_tokens",
            {"model": "claude-opus-4-1", "messages": MESSAGES},
            {"x-api-key": gw.token, "anthropic-version": "2023-06-01"},
        )
        client.messages.create(model="claude-sonnet-4-5", max_tokens=10, messages=MESSAGES)
    assert caught.value.body["error"]["type"] == "invalid_request_error"
    assert counted == 400
    assert [r.json["model"] for r in upstream.requests] == ["claude-sonnet-4-5"]
    refused, counted_record, ok = records(tmp_path / "model_calls.jsonl")
    assert (refused["outcome"], counted_record["outcome"], ok["outcome"]) == (
        "not_allowed",
        "not_allowed",
        "ok",
    )
    assert refused["model"] == "claude-opus-4-1" and refused["request"]["body"] is None
    assert gw.summary.calls == 1


def test_a_model_the_configuration_allows_is_priced_as_itself(tmp_path: Path) -> None:
    cfg = config(
        upstream := FakeProvider([fake.messages("ok", usage=(1000, 100))]),
        tmp_path,
        anthropic=True,
        model_name="claude-sonnet-4-5",
        allowed_models=("claude-opus-4-1",),
        budgets=GatewayBudgets(max_cost_usd=1.0),
    )
    with upstream, open_gateway(cfg) as gw:
        anthropic.Anthropic(
            base_url=gw.host_base_url, api_key=gw.token, max_retries=0
        ).messages.create(model="claude-opus-4-1", max_tokens=10, messages=MESSAGES)
    (record,) = records(tmp_path / "model_calls.jsonl")
    price = record["price"]
    assert (price["input_per_mtok"], price["output_per_mtok"]) == (15.0, 75.0)
    assert record["cost_usd"] == pytest.approx((1000 * 15 + 100 * 75) / 1e6)


def test_a_cost_budget_for_a_model_without_a_price_is_refused_at_the_start(
    tmp_path: Path,
) -> None:
    """Before: an unpriced model cost $0, and max_cost_usd never ran out."""
    with FakeProvider() as upstream:
        budgets = GatewayBudgets(max_cost_usd=0.5)
        with pytest.raises(GatewayConfigError, match=r"max_cost_usd.*'my-local-model'"):
            open_gateway(config(upstream, tmp_path, model_name="my-local-model", budgets=budgets))
        with pytest.raises(GatewayConfigError, match="'mystery'"):
            open_gateway(config(upstream, tmp_path, allowed_models=("mystery",), budgets=budgets))
        priced = config(
            upstream,
            tmp_path,
            model_name="my-local-model",
            budgets=budgets,
            price_input_per_mtok=0.1,
            price_output_per_mtok=0.2,
        )
        with open_gateway(priced) as gw:
            assert gw.price("my-local-model") is not None
        # Without a cost budget an unpriced model is served (it costs nothing).
        with open_gateway(config(upstream, tmp_path, model_name="my-local-model")) as gw:
            assert gw.price("my-local-model") is None
