"""What the gateway writes on the host, against a sandbox that tries to fill the disk with it or
to get a secret into it: refused requests keep no body, ``model_calls.jsonl`` keeps to its
byte budget (and the transcript reader still reads it), and the key, the token and configured
secrets are in no record, header, body (base64 ones included) or log, by value."""

from __future__ import annotations

import base64
import json
import logging
from pathlib import Path

import openai
import pytest

from runs.gateway import GatewayBudgets, open_gateway
from runs.transcript.model_calls import parse_model_calls
from tests.support import fake_provider as fake
from tests.support.fake_provider import FakeProvider, Request
from tests.support.gateway_fixtures import REAL_KEY, config, raw_post

MESSAGES = [{"role": "user", "content": "fix the bug"}]
MB = 1_000_000


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_refused_requests_keep_their_size_but_not_their_body(tmp_path: Path) -> None:
    """200 requests with a wrong key and a 1 MB body made model_calls.jsonl 249 MB (on the
    host, outside the sandbox's quota)."""
    big = {"model": "gpt-4o", "messages": [{"role": "user", "content": "x" * MB}]}
    with (
        FakeProvider([fake.chat("ok")]) as upstream,
        open_gateway(config(upstream, tmp_path, budgets=GatewayBudgets(max_calls=1))) as gw,
    ):
        for _ in range(200):
            status, _, _ = raw_post(
                gw.host_base_url, "/v1/messages", big, {"x-api-key": "sk-guessed-key-000"}
            )
            assert status == 401
        token = {"authorization": f"Bearer {gw.token}"}
        not_forwarded, _, _ = raw_post(gw.host_base_url, "/files", big, token)
        other_model, _, _ = raw_post(
            gw.host_base_url, "/chat/completions", {**big, "model": "o3"}, token
        )
        first, _, _ = raw_post(gw.host_base_url, "/chat/completions", big, token)
        over_budget, _, _ = raw_post(gw.host_base_url, "/chat/completions", big, token)
    size = (tmp_path / "model_calls.jsonl").stat().st_size
    # The one call forwarded keeps its body (1 MB, the cap); the 203 others a few hundred bytes.
    assert size < MB + 204 * 2000, size
    assert (not_forwarded, other_model, first, over_budget) == (404, 400, 200, 400)
    found = lines(tmp_path / "model_calls.jsonl")
    left_out = [r for r in found if r["outcome"] != "ok"]
    assert sorted({r["outcome"] for r in left_out}) == [
        "budget",
        "not_allowed",
        "refused",
    ]
    assert len(left_out) == 203
    for record in left_out:
        request = record["request"]
        assert request["body"] is None and request["body_omitted"] == record["outcome"]
        assert request["body_bytes"] > MB
    (ok,) = [r for r in found if r["outcome"] == "ok"]
    assert ok["request"]["body_kept_bytes"] == MB  # config()'s default body cap


def endless_chat(request: Request) -> fake.Reply:
    return fake.chat("ok " + "y" * 5000, usage=(10, 2))


def test_the_record_keeps_to_its_byte_budget_and_says_what_it_left_out(tmp_path: Path) -> None:
    budget = 300_000
    with (
        FakeProvider(respond=endless_chat) as upstream,
        open_gateway(config(upstream, tmp_path, record_max_bytes=budget)) as gw,
    ):
        client = openai.OpenAI(base_url=gw.host_base_url, api_key=gw.token, max_retries=0)
        for n in range(150):
            client.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": f"{n} " + "z" * 5000}]
            )
        # Headers of any size from a refused request: no room for them past the budget either.
        for _ in range(300):
            raw_post(gw.host_base_url, "/chat/completions", b"{}", {"x-pad": "p" * 8000})
    path = tmp_path / "model_calls.jsonl"
    assert path.stat().st_size <= budget
    found = lines(path)
    full = [r for r in found if "seq" in r and not r.get("summarised")]
    short = [r for r in found if "seq" in r and r.get("summarised")]
    (last,) = [r for r in found if r.get("record") == "record_budget"]
    assert found[-1] is last
    assert full and short and last["summarised"] == len(short)
    assert last["dropped"] > 0  # past all of it, requests are only counted
    assert len(full) + len(short) + last["dropped"] == 450 == gw.summary.requests
    assert all(r["request"]["body"] is None and "headers" not in r["request"] for r in short)
    assert all(r["outcome"] in ("ok", "refused") and r["seq"] for r in short)
    # The transcript reader reads it: the calls recorded in full, a note for the rest.
    transcript = parse_model_calls(path.read_bytes())
    assert transcript.api_calls >= len(full)
    assert any("byte budget" in note for note in transcript.notes), transcript.notes


# -- secrets, by value --------------------------------------------------------------------------

SECRET = "db-password-7f3a9c1e5b"


def test_a_key_an_upstream_echoes_in_any_header_is_not_recorded(tmp_path: Path) -> None:
    """Redacted for the CLI, but kept raw in model_calls.jsonl (redaction was by name)."""
    echo = fake.chat("ok")
    echo.headers.update({"x-echo": REAL_KEY, "x-request-note": f"key={REAL_KEY};"})
    with FakeProvider([echo]) as upstream, open_gateway(config(upstream, tmp_path)) as gw:
        status, headers, _ = raw_post(
            gw.host_base_url,
            "/chat/completions",
            {"model": "gpt-4o", "messages": MESSAGES},
            {"authorization": f"Bearer {gw.token}"},
        )
    assert status == 200 and headers["x-echo"] == "[redacted]"
    stored = (tmp_path / "model_calls.jsonl").read_text()
    assert REAL_KEY not in stored
    (record,) = lines(tmp_path / "model_calls.jsonl")
    assert record["response"]["headers"]["x-echo"] == "[redacted]"
    assert record["response"]["headers"]["x-request-note"] == "key=[redacted];"


def test_no_secret_reaches_a_record_or_a_log_whatever_header_or_body_carries_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An upstream echoing the key in a header of any name (``x-echo``) had it kept raw in
    model_calls.jsonl; a body that is not UTF-8 is kept as base64, which hid it from a check
    on the text; an agent that prints its environment sends the token in its next request."""
    key = REAL_KEY
    binary = b"\xff\xfe" + key.encode() + b"\x00" + SECRET.encode()
    replies = [
        fake.Reply(
            body=json.dumps({"echo": key, "also": SECRET}).encode(),
            headers={"content-type": "application/json", "x-echo": key, "x-other": SECRET},
        ),
        fake.Reply(body=binary, headers={"content-type": "application/octet-stream"}),
        fake.Reply(
            events=[fake.sse({"choices": [], "k": key, "s": SECRET}), fake.sse("[DONE]")],
            headers={"content-type": "text/event-stream", "x-echo": key},
        ),
    ]
    caplog.set_level(logging.DEBUG, logger="runs.gateway")
    with (
        FakeProvider(replies) as upstream,
        open_gateway(config(upstream, tmp_path, secrets=(SECRET,))) as gw,
    ):
        token = gw.token
        auth = {"authorization": f"Bearer {token}"}
        env_dump = f"OPENAI_API_KEY={token} DB={SECRET}"
        answers = [
            raw_post(
                gw.host_base_url,
                # (A query the API does not define is refused before forwarding: routes.py.)
                "/chat/completions",
                {"model": "gpt-4o", "messages": [{"role": "user", "content": env_dump}]},
                {**auth, "x-debug": token},
            )
            for _ in range(3)
        ]
        # Whatever the gateway's modules log while it serves (a request line, an error).
        logging.getLogger("runs.gateway.server").debug(
            "request line: POST /chat/completions?note=%s (%s)", token, key
        )
    assert [a[0] for a in answers] == [200] * 3
    # The CLI never gets the key or the configured secret, in headers or bodies.
    for _, headers, body in answers:
        assert key.encode() not in body and SECRET.encode() not in body
        assert key not in json.dumps(headers) and SECRET not in json.dumps(headers)
    stored = (tmp_path / "model_calls.jsonl").read_bytes()
    decoded = b"".join(
        base64.b64decode(side["body"])
        for record in lines(tmp_path / "model_calls.jsonl")
        for side in (record["request"], record["response"])
        if side.get("body_encoding") == "base64"
    )
    assert decoded  # the binary answer was kept as base64
    logged = "\n".join(r.getMessage() for r in caplog.records).encode()
    summary = json.dumps(gw.summary.as_dict()).encode()
    for blob in (stored, decoded, logged, summary):
        for secret in (key, token, SECRET):
            assert secret.encode() not in blob
    assert b"[redacted]" in stored and b"[redacted]" in decoded
    assert b"request line: POST /chat/completions?note=[redacted] ([redacted])" in logged
    # What the upstream got: the request as the CLI sent it (the token only where it wrote
    # it in its own text), with the real key in place of the token in the credentials.
    assert all(r.headers["authorization"] == f"Bearer {key}" for r in upstream.requests)
