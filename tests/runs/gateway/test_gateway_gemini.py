"""Google's Gemini API through the model gateway (runs/gateway/gemini.py, routes.py): the model in
the path pinned, the key swapped whether it comes in ``x-goog-api-key`` or ``?key=`` (and never
put in the upstream's URL, a record or an answer), streams passed on as they arrive (SSE with
``alt=sse``, or Google's JSON array), ``usageMetadata`` read into the billed classes, budgets,
and Google's error statuses classified. Real gateway, real HTTP, the tests' fake provider
speaking Gemini (tests/support/fake_provider_gemini.py) on loopback."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from runs.gateway import GatewayBudgets, open_gateway
from tests.support.fake_provider import FakeProvider
from tests.support.fake_provider_gemini import (
    count_tokens,
    gemini,
    gemini_error,
    stream_error,
)
from tests.support.fake_provider_plans import GEMINI_TOOLS, fix_plan, keys_seen, plan_provider
from tests.support.gateway_fixtures import REAL_KEY, config, raw_post, records

MODEL = "gemini-2.5-pro"
GENERATE = f"/v1beta/models/{MODEL}:generateContent"
STREAM = f"/v1beta/models/{MODEL}:streamGenerateContent?alt=sse"
BODY = {
    "contents": [{"role": "user", "parts": [{"text": "fix the bug in calc.py"}]}],
    "generationConfig": {"maxOutputTokens": 1000},
}


def gemini_config(upstream: FakeProvider, tmp_path: Path, **overrides):
    """A gateway over ``upstream`` as a Gemini configuration names it: the host as the base URL
    (the client adds ``/v1beta``), the model pinned."""
    return config(
        upstream, tmp_path, upstream_base_url=upstream.url(""), model_name=MODEL, **overrides
    )


def post(gw, path: str, body: dict | bytes = BODY, *, key_in: str = "header", **headers: str):
    """A request as Gemini CLI's client sends it: the token in ``x-goog-api-key`` or ``?key=``."""
    if key_in == "header":
        headers = {"x-goog-api-key": gw.token, **headers}
    elif key_in == "query":
        path += ("&" if "?" in path else "?") + f"key={gw.token}"
    return raw_post(gw.host_base_url, path, body, headers)


# -- forwarding -------------------------------------------------------------------------------


@pytest.mark.parametrize("key_in", ["header", "query"])
def test_it_forwards_generate_content_with_the_real_key_in_googles_header(
    tmp_path: Path, key_in: str
) -> None:
    reply = gemini("the fix is in calc.py", usage=(1200, 80), thoughts=30)
    with FakeProvider([reply]) as upstream, open_gateway(gemini_config(upstream, tmp_path)) as gw:
        status, _, received = post(gw, GENERATE, key_in=key_in)
    assert status == 200
    assert received == upstream.sent[0]
    doc = json.loads(received)
    assert doc["candidates"][0]["content"]["parts"][0]["text"] == "the fix is in calc.py"
    (sent,) = upstream.requests
    # The key in Google's header, never in the URL (which proxies and the upstream log).
    assert sent.path == GENERATE
    assert sent.headers["x-goog-api-key"] == REAL_KEY
    assert "authorization" not in sent.headers
    assert gw.token not in json.dumps(sent.headers) + sent.path
    assert json.loads(sent.body) == BODY
    (record,) = records(tmp_path / "model_calls.jsonl")
    assert record["api"] == "gemini" and record["model_call"] is True
    assert record["model"] == MODEL and record["stream"] is False
    assert record["outcome"] == "ok" and record["request"]["auth"] == "attempt-token"
    assert gw.token not in json.dumps(record)
    if key_in == "query":
        assert record["path"] == GENERATE + "?key=[redacted]"
    # Thinking is billed as output: 80 + 30.
    assert record["usage"]["classes"] == {
        "input": 1200,
        "cache_write": 0,
        "cache_write_1h": 0,
        "cache_read": 0,
        "output": 110,
    }
    assert record["usage"]["reported"]["thoughtsTokenCount"] == 30
    # gemini-2.5-pro at the built-in price: $1.25 in and $10 out per million tokens.
    assert record["cost_usd"] == pytest.approx((1200 * 1.25 + 110 * 10) / 1e6)
    assert (gw.summary.calls, gw.summary.input_tokens, gw.summary.output_tokens) == (1, 1200, 110)


def test_cached_prompt_tokens_are_reads_within_the_prompt(tmp_path: Path) -> None:
    reply = gemini("ok", usage=(5000, 40), cached=4000)
    with FakeProvider([reply]) as upstream, open_gateway(gemini_config(upstream, tmp_path)) as gw:
        assert post(gw, GENERATE)[0] == 200
    (record,) = records(tmp_path / "model_calls.jsonl")
    classes = record["usage"]["classes"]
    assert (classes["input"], classes["cache_read"], classes["output"]) == (1000, 4000, 40)
    assert record["usage"]["input_tokens"] == 5000
    # Gemini's cache-read price is not listed: the cost says so rather than guessing.
    assert record["cost"]["reason"] == f"no cache read price for {MODEL}"


@pytest.mark.parametrize("alt_sse", [True, False], ids=["sse", "json-array"])
def test_a_stream_is_passed_on_byte_for_byte_and_its_usage_recorded(
    tmp_path: Path, alt_sse: bool
) -> None:
    reply = gemini("patched mean() in calc.py", usage=(900, 45), stream=True, alt_sse=alt_sse)
    path = STREAM if alt_sse else STREAM.removesuffix("?alt=sse")
    with FakeProvider([reply]) as upstream, open_gateway(gemini_config(upstream, tmp_path)) as gw:
        status, headers, received = post(gw, path)
    assert status == 200
    assert received == upstream.sent[0]
    assert upstream.requests[0].path == path
    if alt_sse:
        assert headers["content-type"] == "text/event-stream"
        chunks = [json.loads(line[6:]) for line in received.decode().split("\n") if line]
    else:
        chunks = json.loads(received)
    text = "".join(c["candidates"][0]["content"]["parts"][0].get("text", "") for c in chunks)
    assert text == "patched mean() in calc.py"
    (record,) = records(tmp_path / "model_calls.jsonl")
    assert record["stream"] is True and record["outcome"] == "ok"
    assert record["response"]["body"].encode() == received
    # The running usage of the last chunk (early ones report the prompt alone).
    assert (record["usage"]["input_tokens"], record["usage"]["output_tokens"]) == (900, 45)
    assert gw.summary.tokens == 945


def test_count_tokens_is_forwarded_and_recorded_but_not_a_model_call(tmp_path: Path) -> None:
    path = f"/v1beta/models/{MODEL}:countTokens"
    with (
        FakeProvider([count_tokens(42)]) as upstream,
        open_gateway(gemini_config(upstream, tmp_path)) as gw,
    ):
        status, _, received = post(gw, path, {"contents": BODY["contents"]})
    assert status == 200 and json.loads(received)["totalTokens"] == 42
    assert upstream.requests[0].headers["x-goog-api-key"] == REAL_KEY
    (record,) = records(tmp_path / "model_calls.jsonl")
    assert record["api"] == "gemini-count-tokens" and record["model_call"] is False
    assert gw.summary.calls == 0


# -- budgets ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("budget", "budgets", "calls_made"),
    [
        ("calls", GatewayBudgets(max_calls=2), 2),
        ("tokens", GatewayBudgets(max_tokens=200), 2),  # 120 a call: refused at 240
        ("cost", GatewayBudgets(max_cost_usd=0.0006), 2),  # $0.000325 a call
        ("time", GatewayBudgets(max_wall_sec=0.0), 0),
    ],
)
def test_a_used_up_budget_refuses_the_call_in_googles_shape(
    tmp_path: Path, budget: str, budgets: GatewayBudgets, calls_made: int
) -> None:
    replies = [gemini("ok", usage=(100, 20)) for _ in range(3)]
    body = {**BODY, "generationConfig": {"maxOutputTokens": 20}}
    cfg = gemini_config(upstream := FakeProvider(replies), tmp_path, budgets=budgets)
    with upstream, open_gateway(cfg) as gw:
        statuses = [post(gw, GENERATE, body) for _ in range(3)]
        summary = gw.summary
    assert [s for s, _, _ in statuses] == [200] * calls_made + [400] * (3 - calls_made)
    # 400, which Gemini CLI does not retry (a 429 it would, ten times over).
    error = json.loads(statuses[-1][2])["error"]
    assert error["code"] == 400 and error["status"] == "INVALID_ARGUMENT"
    assert f"the attempt's {budget} budget is used up" in error["message"]
    assert len(upstream.requests) == calls_made == summary.calls
    assert summary.budget_exceeded == budget
    refused = records(tmp_path / "model_calls.jsonl")[-1]
    assert refused["outcome"] == "budget" and refused["error"]["budget"] == budget


def test_a_stream_past_the_token_budget_is_cut_with_a_gemini_error_event(tmp_path: Path) -> None:
    # Each chunk reports the prompt (3000 tokens): past the 1000-token budget at once.
    reply = gemini("a b c d e f", usage=(3000, 10), stream=True)
    cfg = gemini_config(
        upstream := FakeProvider([reply]), tmp_path, budgets=GatewayBudgets(max_tokens=1000)
    )
    body = {**BODY, "generationConfig": {"maxOutputTokens": 10}}
    with upstream, open_gateway(cfg) as gw:
        status, _, received = post(gw, STREAM, body)
        summary = gw.summary
    assert status == 200
    last = received.decode().strip().split("\n\n")[-1]
    error = json.loads(last.removeprefix("data: "))["error"]
    assert error["status"] == "INVALID_ARGUMENT" and "tokens budget" in error["message"]
    (record,) = records(tmp_path / "model_calls.jsonl")
    assert record["outcome"] == "budget" and record["error"]["budget"] == "tokens"
    assert summary.budget_exceeded == "tokens"


def test_parallel_streams_cannot_race_past_the_token_and_cost_budgets(tmp_path: Path) -> None:
    """20 Gemini streams at once against 3,000 tokens and $0.01, each 1,200 tokens in and 80
    out ($0.0023): the calls in flight hold their reservations (the body's bytes / 3, above
    the prompt's real count as with real text, and its maxOutputTokens), so only the last one
    admitted can cross a limit, by its own answer."""

    def slow(request):
        reply = gemini("ok", usage=(1200, 80), stream=True)
        reply.delay_sec = 0.2
        return reply

    budgets = GatewayBudgets(max_tokens=3000, max_cost_usd=0.01)
    prompt = "fix the bug in calc.py " * 160  # 3,680 bytes: 1,200 tokens as Gemini counts
    body = {
        "contents": [{"role": "user", "parts": [{"text": prompt}]}],
        "generationConfig": {"maxOutputTokens": 100},
    }
    results: list[tuple] = []
    with (
        FakeProvider(respond=slow) as upstream,
        open_gateway(gemini_config(upstream, tmp_path, budgets=budgets)) as gw,
    ):
        start = threading.Barrier(20)

        def call() -> None:
            start.wait()
            results.append(post(gw, STREAM, body))

        threads = [threading.Thread(target=call) for _ in range(20)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        summary = gw.summary
    answered = [r for r in results if r[0] == 200]
    refused = [r for r in results if r[0] != 200]
    assert len(answered) == len(upstream.requests) <= 3 and len(refused) >= 17
    assert all(json.loads(r[2])["error"]["status"] == "INVALID_ARGUMENT" for r in refused)
    # Two whole streams; a third admitted on what was left is cut with an error event.
    assert summary.tokens <= 3000 + 1280
    assert summary.cost_usd <= 0.01 + (1200 * 1.25 + 80 * 10) / 1e6
    assert summary.budget_exceeded in ("tokens", "cost")


# -- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "name", "kind", "tries"),
    [
        (400, "INVALID_ARGUMENT", "permanent", 1),
        (401, "UNAUTHENTICATED", "permanent", 1),
        (403, "PERMISSION_DENIED", "permanent", 1),
        (404, "NOT_FOUND", "permanent", 1),
        (429, "RESOURCE_EXHAUSTED", "transient", 3),
        (500, "INTERNAL", "transient", 3),
        (503, "UNAVAILABLE", "transient", 3),
    ],
)
def test_googles_errors_are_classified_and_only_transient_ones_retried(
    tmp_path: Path, status: int, name: str, kind: str, tries: int
) -> None:
    replies = [gemini_error(status, f"upstream said {name}", name) for _ in range(3)]
    with FakeProvider(replies) as upstream, open_gateway(gemini_config(upstream, tmp_path)) as gw:
        got, _, body = post(gw, GENERATE)
        summary = gw.summary
    assert got == status
    assert json.loads(body)["error"]["status"] == name  # the upstream's own answer, passed on
    assert len(upstream.requests) == tries  # FAST_RETRY: 3 attempts
    (record,) = records(tmp_path / "model_calls.jsonl")
    assert record["error"]["kind"] == kind
    assert record["error"]["message"] == f"{name}: upstream said {name}"
    if kind == "permanent":
        assert record["outcome"] == "permanent_error"
        assert summary.permanent_error is not None
        assert name in summary.permanent_error.message
    else:
        assert record["outcome"] == "transient_exhausted" and record["retries"] == 2


@pytest.mark.parametrize(
    ("name", "kind"), [("RESOURCE_EXHAUSTED", "transient"), ("INVALID_ARGUMENT", "permanent")]
)
def test_an_error_inside_a_stream_is_classified_by_its_status(
    tmp_path: Path, name: str, kind: str
) -> None:
    reply = gemini("half an answer", stream=True)
    reply.events = [reply.events[0], stream_error("stopped midway", 429, name)]
    with FakeProvider([reply]) as upstream, open_gateway(gemini_config(upstream, tmp_path)) as gw:
        status, _, received = post(gw, STREAM)
    assert status == 200 and name.encode() in received
    (record,) = records(tmp_path / "model_calls.jsonl")
    assert record["outcome"] == "stream_error"
    assert record["error"] == {"kind": kind, "message": f"{name}: stopped midway"}


# -- attacks ----------------------------------------------------------------------------------


def test_a_key_smuggled_in_the_query_of_another_path_is_refused_and_never_kept(
    tmp_path: Path,
) -> None:
    smuggled = "AIzaSy-someone-elses-key-0123456789"
    with FakeProvider([]) as upstream, open_gateway(gemini_config(upstream, tmp_path)) as gw:
        auth = {"authorization": f"Bearer {gw.token}"}
        for path in (
            f"/v1/chat/completions?key={smuggled}",
            f"/v1/messages?beta=true&key={smuggled}",
            f"/v1beta/models/{MODEL}:generateContent?key={gw.token}&key={smuggled}",
        ):
            status, _, body = raw_post(gw.host_base_url, path, BODY, auth)
            assert status == 400, path
            assert smuggled.encode() not in body
        # On a Gemini path a key other than the token is another credential: refused.
        path = f"{GENERATE}?key={smuggled}"
        status, _, body = raw_post(gw.host_base_url, path, BODY, {"x-goog-api-key": gw.token})
        assert status == 401 and json.loads(body)["error"]["status"] == "UNAUTHENTICATED"
        # Nor is a foreign key in Google's header kept (it is no value the gateway knows).
        status, _, _ = raw_post(gw.host_base_url, GENERATE, BODY, {"x-goog-api-key": smuggled})
        assert status == 401
    assert upstream.requests == []
    text = (tmp_path / "model_calls.jsonl").read_text()
    assert smuggled not in text and gw.token not in text
    found = records(tmp_path / "model_calls.jsonl")
    assert [r["outcome"] for r in found] == ["bad_request"] * 3 + ["refused"] * 2
    assert [r["request"]["auth"] for r in found[-2:]] == ["other", "other"]


@pytest.mark.parametrize(
    "path",
    [
        "/v1beta/models/gemini-2.5-flash:generateContent",  # another model
        f"/v1beta/models/{MODEL}-exp:streamGenerateContent?alt=sse",
        "/v1/models/gemini-2.5-flash:countTokens",
    ],
)
def test_a_model_in_the_path_other_than_the_configurations_is_refused(
    tmp_path: Path, path: str
) -> None:
    with FakeProvider([]) as upstream, open_gateway(gemini_config(upstream, tmp_path)) as gw:
        status, _, body = post(gw, path)
    assert status == 400 and "is not this attempt's" in json.loads(body)["error"]["message"]
    assert upstream.requests == []
    (record,) = records(tmp_path / "model_calls.jsonl")
    assert record["outcome"] == "not_allowed"


def test_count_tokens_cannot_name_another_model_in_its_body(tmp_path: Path) -> None:
    body = {"generateContentRequest": {"model": "models/gemini-2.5-flash", **BODY}}
    with FakeProvider([]) as upstream, open_gateway(gemini_config(upstream, tmp_path)) as gw:
        status, _, _ = post(gw, f"/v1beta/models/{MODEL}:countTokens", body)
    assert status == 400 and upstream.requests == []
    assert records(tmp_path / "model_calls.jsonl")[0]["model"] == "models/gemini-2.5-flash"


@pytest.mark.parametrize(
    "path",
    [
        "/v1beta/models/..:generateContent",  # a traversal as the model
        "/v1beta/models/../files:generateContent",
        "/v1beta/models/gemini-2.5-pro%2F..%2Ffiles:generateContent",
        f"/v1beta/models/{MODEL}:files:generateContent",  # a colon smuggled into the model
        f"/v1beta/models/{MODEL}:streamGenerateContent?alt=proto",
        f"/v1beta/models/{MODEL}:streamGenerateContent?alt=sse&upload_protocol=raw",
    ],
)
def test_a_traversal_or_odd_query_in_a_gemini_path_is_refused_before_the_upstream(
    tmp_path: Path, path: str
) -> None:
    with FakeProvider([]) as upstream, open_gateway(gemini_config(upstream, tmp_path)) as gw:
        status, _, body = post(gw, path)
    assert status == 400 and json.loads(body)["error"]["status"] == "INVALID_ARGUMENT"
    assert upstream.requests == []
    (record,) = records(tmp_path / "model_calls.jsonl")
    assert record["outcome"] == "bad_request"


@pytest.mark.parametrize(
    "path",
    [
        f"/v1beta/models/{MODEL}:embedContent",  # a method the gateway does not forward
        f"/v1beta/tunedModels/{MODEL}:generateContent",
        "/v1beta/messages",  # another API under Gemini's version
        "/v1beta/files",
    ],
)
def test_paths_outside_the_gemini_routes_are_not_forwarded(tmp_path: Path, path: str) -> None:
    with FakeProvider([]) as upstream, open_gateway(gemini_config(upstream, tmp_path)) as gw:
        status, _, body = post(gw, path)
    assert status == 404 and json.loads(body)["error"]["status"] == "NOT_FOUND"
    assert upstream.requests == []


# -- the per-CLI plans over the Gemini API ------------------------------------------------------


def test_a_plan_is_served_as_gemini_function_calls_through_the_gateway(tmp_path: Path) -> None:
    plan = fix_plan(
        workdir="/work", path="calc.py", old="//", new="/", test_command="python -m pytest -q"
    )
    tools = [
        {"functionDeclarations": [{"name": name} for name in GEMINI_TOOLS.values()]},
    ]
    contents: list[dict] = [{"role": "user", "parts": [{"text": "fix calc.py"}]}]
    seen = []
    with plan_provider(plan, usage=(700, 30)) as upstream:
        cfg = gemini_config(upstream, tmp_path)
        with open_gateway(cfg) as gw:
            # A side request (no tools, JSON asked for) gets JSON text, not a step.
            side = {**BODY, "generationConfig": {"responseMimeType": "application/json"}}
            status, _, body = post(gw, GENERATE, side)
            assert json.loads(body)["candidates"][0]["content"]["parts"][0]["text"] == "{}"
            for _ in range(4):
                status, _, body = post(gw, STREAM, {"contents": contents, "tools": tools})
                assert status == 200
                chunks = [json.loads(x[6:]) for x in body.decode().split("\n") if x]
                parts = [p for c in chunks for p in c["candidates"][0]["content"]["parts"]]
                call = next((p["functionCall"] for p in parts if "functionCall" in p), None)
                seen.append(call["name"] if call else "".join(p.get("text", "") for p in parts))
                contents = [*contents, {"role": "model", "parts": parts}]
                if call:
                    answer = {"name": call["name"], "response": {"output": "ok"}}
                    contents.append({"role": "user", "parts": [{"functionResponse": answer}]})
    assert seen == [
        "read_file",
        "run_shell_command",
        "replace",
        "The fix is applied and the tests pass.",
    ]
    assert keys_seen(upstream) == {REAL_KEY}
    assert gw.summary.calls == 5 and gw.summary.output_tokens == 5 * 30


def test_a_failing_plan_answers_in_googles_shape(tmp_path: Path) -> None:
    upstream = plan_provider([], fail_status=401)
    with upstream, open_gateway(gemini_config(upstream, tmp_path)) as gw:
        status, _, body = post(gw, STREAM)
    assert status == 401
    assert json.loads(body)["error"]["status"] == "UNAUTHENTICATED"
    (record,) = records(tmp_path / "model_calls.jsonl")
    assert record["outcome"] == "permanent_error"
