"""Cost as the provider bills it: the gateway splits each call's usage into input, cache write,
cache read and output (runs.pricing.TokenClasses) for the three wire APIs, streamed and not,
prices each class by the price in effect on the call's day, and says "no price for <model>"
(cost None) rather than $0. The recorded streams below are the shapes the providers send
(abridged to the events that carry usage and a little text)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

import tests.support.fake_provider as fake
from runs.gateway import GatewayBudgets, open_gateway
from runs.gateway.wire import SSEScanner, Usage
from runs.pricing import LIST_PRICES, Price, PriceRow, TokenClasses, lookup, table_on
from tests.support.fake_provider import FakeProvider
from tests.support.gateway_fixtures import config, raw_post, records

# An Anthropic Messages stream with a 5-minute and a 1-hour cache write and a cache read.
ANTHROPIC_STREAM = (
    "event: message_start\n"
    'data: {"type":"message_start","message":{"id":"msg_01","type":"message","role":'
    '"assistant","model":"claude-sonnet-4-5-20250929","content":[],"stop_reason":null,'
    '"usage":{"input_tokens":12,"cache_creation_input_tokens":2048,'
    '"cache_read_input_tokens":30000,"cache_creation":{"ephemeral_5m_input_tokens":1024,'
    '"ephemeral_1h_input_tokens":1024},"output_tokens":1,"service_tier":"standard"}}}\n\n'
    "event: content_block_start\n"
    'data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n'
    "event: content_block_delta\n"
    'data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"ok"}}\n\n'
    "event: message_delta\n"
    'data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},'
    '"usage":{"output_tokens":250}}\n\n'
    "event: message_stop\n"
    'data: {"type":"message_stop"}\n\n'
)
# An OpenAI chat-completions stream with stream_options.include_usage: the usage chunk last.
CHAT_STREAM = (
    'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1",'
    '"choices":[{"index":0,"delta":{"role":"assistant","content":"ok"},"finish_reason":null}],'
    '"usage":null}\n\n'
    'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1",'
    '"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}\n\n'
    'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1",'
    '"choices":[],"usage":{"prompt_tokens":5000,"completion_tokens":300,"total_tokens":5300,'
    '"prompt_tokens_details":{"cached_tokens":4096,"audio_tokens":0},'
    '"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0}}}\n\n'
    "data: [DONE]\n\n"
)
# An OpenAI Responses stream: the usage is in response.completed.
RESPONSES_STREAM = (
    "event: response.created\n"
    'data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1",'
    '"object":"response","status":"in_progress","model":"gpt-5","output":[],"usage":null}}\n\n'
    "event: response.output_text.delta\n"
    'data: {"type":"response.output_text.delta","sequence_number":1,"item_id":"msg_1",'
    '"output_index":0,"content_index":0,"delta":"ok"}\n\n'
    "event: response.completed\n"
    'data: {"type":"response.completed","sequence_number":2,"response":{"id":"resp_1",'
    '"object":"response","status":"completed","model":"gpt-5","output":[],"usage":'
    '{"input_tokens":8000,"input_tokens_details":{"cached_tokens":6144},"output_tokens":900,'
    '"output_tokens_details":{"reasoning_tokens":640},"total_tokens":8900}}}\n\n'
)


def scanned(stream: str) -> TokenClasses:
    scanner = SSEScanner()
    data = stream.encode()
    for at in range(0, len(data), 37):  # in pieces, as a stream arrives
        scanner.feed(data[at : at + 37])
    scanner.close()
    return scanner.usage.classes()


def list_price(model: str) -> Price:
    price = lookup(model, table_on(LIST_PRICES, dt.date.today()))
    assert price is not None
    return price


def test_it_reads_the_four_classes_from_each_recorded_stream() -> None:
    assert scanned(ANTHROPIC_STREAM) == TokenClasses(
        input=12, cache_write=2048, cache_read=30000, output=250, cache_write_1h=1024
    )
    # OpenAI counts cached tokens within the prompt: they are taken out of fresh input.
    assert scanned(CHAT_STREAM) == TokenClasses(input=904, cache_read=4096, output=300)
    assert scanned(RESPONSES_STREAM) == TokenClasses(input=1856, cache_read=6144, output=900)


def test_it_prices_each_class_at_its_own_list_price() -> None:
    sonnet = list_price("claude-sonnet-4-5-20250929").breakdown(
        scanned(ANTHROPIC_STREAM), "claude-sonnet-4-5"
    )
    # $3 in, $3.75 a 5-minute write, $6 a 1-hour write, $0.30 a read, $15 out per Mtok.
    assert sonnet.input == pytest.approx(12 * 3 / 1e6)
    assert sonnet.cache_write == pytest.approx((1024 * 3.75 + 1024 * 6) / 1e6)
    assert sonnet.cache_read == pytest.approx(30000 * 0.3 / 1e6)
    assert sonnet.output == pytest.approx(250 * 15 / 1e6)
    assert sonnet.total == pytest.approx(
        sonnet.input + sonnet.cache_write + sonnet.cache_read + sonnet.output
    )
    gpt41 = list_price("gpt-4.1").breakdown(scanned(CHAT_STREAM), "gpt-4.1")
    assert (gpt41.input, gpt41.cache_read, gpt41.output) == pytest.approx(
        (904 * 2 / 1e6, 4096 * 0.5 / 1e6, 300 * 8 / 1e6)
    )
    gpt5 = list_price("gpt-5").breakdown(scanned(RESPONSES_STREAM), "gpt-5")
    assert gpt5.total == pytest.approx((1856 * 1.25 + 6144 * 0.125 + 900 * 10) / 1e6)


def test_a_class_without_its_price_makes_the_cost_unknown_not_zero() -> None:
    own = Price(3.0, 15.0)  # a configuration's own prices name input and output only
    cost = own.breakdown(scanned(ANTHROPIC_STREAM), "my-sonnet")
    assert cost.total is None
    assert cost.reason == "no cache write or 1-hour cache write or cache read price for my-sonnet"
    # The budget counts the unpriced classes at twice the input price (never undercounted).
    tokens = scanned(ANTHROPIC_STREAM)
    assert own.budget_cost(tokens) == pytest.approx((12 * 3 + (2048 + 30000) * 6 + 250 * 15) / 1e6)


def test_a_whole_answer_carries_the_same_classes_as_its_stream() -> None:
    usage = Usage()
    usage.read(
        {
            "usage": {
                "prompt_tokens": 5000,
                "completion_tokens": 300,
                "prompt_tokens_details": {"cached_tokens": 4096},
            }
        }
    )
    assert usage.classes() == scanned(CHAT_STREAM)
    assert usage.input_tokens == 5000  # tokens_in still counts every input token


def test_the_price_in_effect_on_the_calls_day_applies() -> None:
    old = PriceRow("gpt-x", Price(1.0, 2.0), dt.date(2025, 1, 1), dt.date(2025, 6, 1))
    new = PriceRow("gpt-x", Price(0.5, 1.0), dt.date(2025, 6, 1))
    rows = (old, new)
    assert lookup("gpt-x-2025", table_on(rows, dt.date(2024, 12, 31))) is None
    assert lookup("gpt-x-2025", table_on(rows, dt.date(2025, 5, 31))) == old.price
    assert lookup("gpt-x-2025", table_on(rows, dt.date(2025, 6, 1))) == new.price


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_the_gateway_records_each_apis_cache_classes_and_their_cost(
    tmp_path: Path, stream: bool
) -> None:
    """One gateway, one call of each wire API carrying cache usage (the fake provider's
    answers): each record's classes and cost, and the summary's breakdown."""
    replies = [
        fake.messages(
            "ok",
            usage=(12, 250),
            cache_write=2048,
            cache_write_1h=1024,
            cache_read=30000,
            stream=stream,
        ),
        fake.chat("ok", usage=(5000, 300), cached=4096, stream=stream),
        fake.responses("ok", usage=(8000, 900), cached=6144, stream=stream),
    ]
    today = dt.datetime.now(dt.UTC).date()
    rows = (
        # A price that ended yesterday must not be the one applied.
        PriceRow("gpt-4.1", Price(99.0, 99.0, 99.0, 99.0), dt.date(2020, 1, 1), today),
        PriceRow("gpt-4.1", Price(2.0, 8.0, 2.0, 0.5), today),
        *(row for row in LIST_PRICES if row.pattern != "gpt-4.1"),
    )
    with FakeProvider(replies) as upstream:
        cfg = config(
            upstream,
            tmp_path,
            model_name="claude-sonnet-4-5",
            allowed_models=("gpt-4.1", "gpt-5"),
            price_rows=rows,
            budgets=GatewayBudgets(max_cost_usd=5.0),
        )
        with open_gateway(cfg) as gw:
            auth = {"authorization": f"Bearer {gw.token}"}
            for path, body in (
                ("/v1/messages", {"model": "claude-sonnet-4-5", "max_tokens": 300}),
                ("/v1/chat/completions", {"model": "gpt-4.1", "max_tokens": 300}),
                ("/v1/responses", {"model": "gpt-5", "max_output_tokens": 1000}),
            ):
                status, _, _ = raw_post(
                    gw.host_base_url, path, {**body, "messages": [], "stream": stream}, auth
                )
                assert status == 200
        summary = gw.summary  # once closed: every call settled (a stream's after its end)
    by_model = {r["model"]: r for r in records(tmp_path / "model_calls.jsonl")}
    want = {
        "claude-sonnet-4-5": (
            {"input": 12, "cache_write": 2048, "cache_write_1h": 1024, "cache_read": 30000},
            (12 * 3, 1024 * 3.75 + 1024 * 6, 30000 * 0.3, 250 * 15),
        ),
        "gpt-4.1": (
            {"input": 904, "cache_write": 0, "cache_write_1h": 0, "cache_read": 4096},
            (904 * 2, 0, 4096 * 0.5, 300 * 8),
        ),
        "gpt-5": (
            {"input": 1856, "cache_write": 0, "cache_write_1h": 0, "cache_read": 6144},
            (1856 * 1.25, 0, 6144 * 0.125, 900 * 10),
        ),
    }
    total = [0.0] * 4
    for model, (classes, micro) in want.items():
        record = by_model[model]
        got = record["usage"]["classes"]
        assert {k: got[k] for k in classes} == classes, model
        cost = record["cost"]
        parts = [cost[k] for k in ("input", "cache_write", "cache_read", "output")]
        assert parts == pytest.approx([m / 1e6 for m in micro]), model
        assert record["cost_usd"] == pytest.approx(sum(micro) / 1e6)
        assert cost["reason"] is None
        total = [t + m / 1e6 for t, m in zip(total, micro, strict=True)]
    assert summary.cache_write_tokens == 2048
    assert summary.cache_read_tokens == 30000 + 4096 + 6144
    assert summary.input_tokens == 12 + 2048 + 30000 + 5000 + 8000
    assert [
        summary.cost_input_usd,
        summary.cost_cache_write_usd,
        summary.cost_cache_read_usd,
        summary.cost_output_usd,
    ] == pytest.approx(total)
    assert summary.known_cost_usd == pytest.approx(sum(total))
    assert summary.budget_cost_usd == pytest.approx(sum(total))


def test_a_model_without_a_price_has_an_unknown_cost_not_zero(tmp_path: Path) -> None:
    with FakeProvider([fake.chat("ok", usage=(100, 20), cached=50)]) as upstream:
        cfg = config(upstream, tmp_path, model_name="my-local-model")
        with open_gateway(cfg) as gw:
            status, _, _ = raw_post(
                gw.host_base_url,
                "/v1/chat/completions",
                {"model": "my-local-model", "messages": []},
                {"authorization": f"Bearer {gw.token}"},
            )
        summary = gw.summary
    assert status == 200
    (record,) = records(tmp_path / "model_calls.jsonl")
    assert record["cost_usd"] is None
    assert record["cost"]["reason"] == "no price for my-local-model"
    assert record["usage"]["classes"]["cache_read"] == 50
    assert (summary.unpriced_calls, summary.unpriced_reason) == (1, "no price for my-local-model")
    assert summary.known_cost_usd is None
    assert json.dumps(summary.as_dict())  # the summary stays JSON (the attempt keeps it)
