"""LLM error classification, retries and the price table (pure: the real openai exception types,
no network)."""

from __future__ import annotations

import socket

import openai
import pytest

from runs.agents.contract import ModelSettings
from runs.llm_errors import (
    LLMPermanentError,
    LLMTransientError,
    RetryPolicy,
    call_with_retries,
    is_permanent,
)
from runs.pricing import DEFAULT_PRICES, PriceTableError, load_price_table, price_for
from tests.support.fake_provider import FakeProvider, Reply, error, text


def raised(reply: Reply, *, timeout: float = 10.0, base_url: str | None = None) -> Exception:
    """The exception the real openai client raises for ``reply`` (or an unreachable server)."""
    with FakeProvider([reply]) as server:
        client = openai.OpenAI(
            base_url=base_url or server.url("/v1"), api_key="k", max_retries=0, timeout=timeout
        )
        try:
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        except openai.OpenAIError as exc:
            return exc
    raise AssertionError("the call did not fail")


def api_error(status: int, message: str = "boom", headers: dict | None = None) -> Exception:
    return raised(error(status, "api_error", message, headers=headers))


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 422])
def test_it_classifies_client_errors_as_permanent(status):
    assert is_permanent(api_error(status))


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 529])
def test_it_classifies_rate_limits_and_server_errors_as_transient(status):
    assert not is_permanent(api_error(status))


def test_it_classifies_connection_problems_and_unknown_errors_as_transient():
    refused = raised(text("unused"), base_url=f"http://127.0.0.1:{closed_port()}/v1")
    assert isinstance(refused, openai.APIConnectionError)
    assert not is_permanent(refused)
    slow = raised(Reply(body=b"{}", delay_sec=2.0), timeout=0.3)
    assert isinstance(slow, openai.APITimeoutError)
    assert not is_permanent(slow)
    assert not is_permanent(openai.OpenAIError("something odd happened"))
    assert is_permanent(openai.OpenAIError("Unsupported parameter: 'max_tokens'"))
    assert not is_permanent(openai.OpenAIError("Overloaded, unsupported parameter maybe"))


def test_it_raises_permanent_errors_at_once():
    calls = []

    def call():
        calls.append(1)
        raise api_error(401, "invalid api key")

    with pytest.raises(LLMPermanentError) as info:
        call_with_retries(call, policy=RetryPolicy(), sleep=lambda s: None)
    assert len(calls) == 1
    assert info.value.kind == "permanent"
    assert info.value.status == 401
    assert "HTTP 401" in str(info.value)


def test_it_retries_transient_errors_with_growing_delays_then_gives_up():
    waits: list[float] = []
    calls = []

    def call():
        calls.append(1)
        raise api_error(503, "overloaded")

    policy = RetryPolicy(max_attempts=4, base_delay_sec=1.0, max_delay_sec=30.0, jitter=0.0)
    with pytest.raises(LLMTransientError, match="after 4 attempt"):
        call_with_retries(call, policy=policy, sleep=waits.append)
    assert len(calls) == 4
    assert waits == [1.0, 2.0, 4.0]


def test_it_returns_the_first_success_after_retries_and_honours_retry_after():
    waits: list[float] = []
    answers = iter([api_error(429, "rate limit", {"retry-after": "3"}), "ok"])

    def call():
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    policy = RetryPolicy(base_delay_sec=0.5, jitter=0.0)
    assert call_with_retries(call, policy=policy, sleep=waits.append) == "ok"
    assert waits == [3.0]


def test_jitter_stays_within_its_fraction():
    policy = RetryPolicy(base_delay_sec=2.0, jitter=0.25)
    delays = {policy.delay(2) for _ in range(50)}
    assert all(3.0 <= d <= 5.0 for d in delays)
    assert len(delays) > 1


def test_the_price_table_file_overrides_and_extends_the_built_in_prices(tmp_path):
    path = tmp_path / "prices.json"
    path.write_text(
        '{"gpt-4o": {"input_per_mtok": 1, "output_per_mtok": 2},'
        ' "local-llama": {"input_per_mtok": 0, "output_per_mtok": 0.5}}'
    )
    table = load_price_table(path)
    assert table["gpt-4o"].cost(1_000_000, 500_000) == pytest.approx(2.0)
    assert table["local-llama"].output_per_mtok == 0.5
    assert table["gpt-4o-mini"] == DEFAULT_PRICES["gpt-4o-mini"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{nope", "invalid JSON"),
        ("[]", "expected an object"),
        ('{"m": 3}', "m: expected an object"),
        ('{"m": {"input_per_mtok": -1, "output_per_mtok": 1}}', "m.input_per_mtok"),
        ('{"m": {"input_per_mtok": 1}}', "m.output_per_mtok"),
    ],
)
def test_a_bad_price_table_names_the_entry(tmp_path, content, message):
    path = tmp_path / "prices.json"
    path.write_text(content)
    with pytest.raises(PriceTableError, match=message):
        load_price_table(path)


def test_model_prices_win_and_names_match_without_provider_or_date_suffix():
    table = load_price_table(None)
    own = ModelSettings("llm", model_name="gpt-4o", price_input_per_mtok=9.0)
    assert price_for(own, table).input_per_mtok == 9.0
    routed = ModelSettings("llm", model_name="openai/gpt-4o-mini")
    assert price_for(routed, table) == DEFAULT_PRICES["gpt-4o-mini"]
    dated = ModelSettings("llm", model_name="gpt-4o-2024-08-06")
    assert price_for(dated, table) == DEFAULT_PRICES["gpt-4o"]
    assert price_for(ModelSettings("llm", model_name="qwen2.5-coder:7b"), table) is None
