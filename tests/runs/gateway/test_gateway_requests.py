"""How the gateway reads what a client sends (issue 28): request targets outside the exact route
table, absolute-form targets, hostile chunk sizes, too many connections or calls at once, and
many large bodies at once; each refused, recorded without its body, never forwarded. Raw bytes
on the loopback listener; the upstream is the scripted provider, which keeps what reached it."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from runs.gateway import open_gateway
from tests.conftest import REPO_ROOT
from tests.support import fake_provider as fake
from tests.support.fake_provider import FakeProvider
from tests.support.gateway_fixtures import REAL_KEY, config, records
from tests.support.gateway_raw import chunked, connect, exchange, head

ROOT = REPO_ROOT
BODY = json.dumps({"model": "claude-sonnet-4", "max_tokens": 10, "messages": []}).encode()


def post(gw, target: str, body: bytes = BODY, **headers: str) -> bytes:
    fields = {
        "Host": "127.0.0.1",
        "x-api-key": gw.token,
        "anthropic-version": "2023-06-01",
        "Content-Type": "application/json",
        "Content-Length": str(len(body)),
        "Connection": "close",
        **headers,
    }
    return head("POST", target, {k: v for k, v in fields.items() if v}) + body


def get(gw, target: str, **headers: str) -> bytes:
    fields = {"Host": "127.0.0.1", "Authorization": f"Bearer {gw.token}", "Connection": "close"}
    return head("GET", target, {**fields, **headers})


# -- the route table --------------------------------------------------------------------------

# The reproductions first: each was forwarded with the real key.
BYPASSES = [
    ("GET", "/v1/files/models/..", 400),
    ("GET", "/v1/messages/batches/msgbatch_01/results/models/..", 400),
    ("GET", "/v1/organizations/me/models/..", 400),
    ("POST", "/v1/files#/messages", 400),
    ("POST", "/v1/messages/batches;/messages", 400),
    ("POST", "/v1/threads/thr_1/messages", 404),
    ("GET", "/v1/models/%2e%2e", 400),
    ("GET", "/v1/models/%2E%2E%2Ffiles", 400),
    ("GET", "/v1/models/..%2f..%2ffiles", 400),
    ("POST", "/v1//messages", 400),
    ("POST", "/v1/./messages", 400),
    ("POST", "/v1/files/../messages", 400),
    ("POST", "/v1/messages/", 400),
    ("POST", "/v1/messages\\..\\files", 400),
    ("POST", "/v1/messages?beta=true&after=..%2Ffiles", 400),
    ("POST", "/v1/messages?beta=true#", 400),
    ("POST", "/chat/completions?api-version=2024", 400),
    ("POST", "/v1/messages?beta=true&beta=true", 400),
    ("GET", "/v1/models?limit=1;/files", 400),
    ("POST", "http://evil.example:1/v1/messages", 400),
    ("POST", "//evil.example/v1/messages", 400),
    ("POST", "/v1/files", 404),
    ("POST", "/v1/messages/batches", 404),
    ("GET", "/v1/models/claude/files", 404),
    ("DELETE", "/v1/models/claude-sonnet-4", 405),
    ("OPTIONS", "*", 405),
]


def test_only_the_route_tables_exact_paths_reach_the_upstream(tmp_path: Path) -> None:
    cfg = config(upstream := FakeProvider(), tmp_path, anthropic=True)
    with upstream, open_gateway(cfg) as gw:
        answers = []
        for method, target, _ in BYPASSES:
            raw = get(gw, target) if method == "GET" else post(gw, target)
            answers.append(exchange(gw.host_base_url, raw.replace(b"POST", method.encode(), 1)))
    assert upstream.requests == []
    assert [a.status for a in answers] == [status for _, _, status in BYPASSES]
    found = records(tmp_path / "model_calls.jsonl")
    assert [r["path"] for r in found] == [target for _, target, _ in BYPASSES]
    for record, (_, target, status) in zip(found, BYPASSES, strict=True):
        assert record["status"] == status and record["api"] is None, target
        if status == 404:
            assert record["outcome"] == "not_allowed"
            continue
        # Refused from the head alone: the body is neither read nor kept.
        assert record["outcome"] == "bad_request", target
        assert not record["request"].get("body") and not record["request"].get("body_bytes")
        assert record["request"]["auth"] == "attempt-token"
    absolute = answers[[t for _, t, _ in BYPASSES].index("http://evil.example:1/v1/messages")]
    assert "origin-form" in json.loads(absolute.body)["error"]["message"]
    assert REAL_KEY not in (tmp_path / "model_calls.jsonl").read_text()


def test_what_the_clis_send_reaches_the_upstream_at_the_routes_path(tmp_path: Path) -> None:
    """Claude Code's ``?beta=true``, Codex's model list with ``client_version``, a model's id:
    forwarded to the configured base URL's path, nothing of the client's target besides."""
    replies = [fake.messages("ok"), fake.Reply(body=b"{}"), fake.Reply(body=b"{}")]
    cfg = config(upstream := FakeProvider(replies), tmp_path, anthropic=True)
    with upstream, open_gateway(cfg) as gw:
        first = exchange(gw.host_base_url, post(gw, "/v1/messages?beta=true"))
        second = exchange(gw.host_base_url, get(gw, "/models?client_version=0.169.0"))
        third = exchange(gw.host_base_url, get(gw, "/v1/models/claude-sonnet-4-5@20250929"))
    assert (first.status, second.status, third.status) == (200, 200, 200)
    assert [r.path for r in upstream.requests] == [
        "/v1/messages?beta=true",
        "/models?client_version=0.169.0",
        "/v1/models/claude-sonnet-4-5@20250929",
    ]


def test_the_upstream_gets_its_own_host_never_the_clients(tmp_path: Path) -> None:
    cfg = config(upstream := FakeProvider([fake.messages("ok")]), tmp_path, anthropic=True)
    with upstream, open_gateway(cfg) as gw:
        absolute = exchange(gw.host_base_url, post(gw, "http://evil.example:1/v1/messages"))
        spoofed = exchange(gw.host_base_url, post(gw, "/v1/messages", Host="evil.example:1"))
    assert absolute.status == 400 and spoofed.status == 200
    (sent,) = upstream.requests
    assert sent.headers["host"] == f"127.0.0.1:{upstream.port}"
    assert sent.path == "/v1/messages" and sent.headers["x-api-key"] == REAL_KEY


# -- bodies -----------------------------------------------------------------------------------


def chunked_post(gw, target: str = "/v1/messages") -> bytes:
    return post(gw, target, b"", **{"Content-Length": "", "Transfer-Encoding": "chunked"})


def test_a_negative_chunk_size_is_refused_not_read_to_the_end(tmp_path: Path) -> None:
    """``-1`` once read the body to EOF past every limit: now a 400 at the chunk header, and
    the gateway stops reading (the sender is cut off long before its 64 MiB are out)."""
    cfg = config(upstream := FakeProvider(), tmp_path, anthropic=True, max_request_bytes=65536)
    flood = 64 * 1024 * 1024
    with upstream, open_gateway(cfg) as gw:
        pieces = [chunked_post(gw) + b"-1\r\n", *([b"x" * 65536] * (flood // 65536))]
        answer = exchange(gw.host_base_url, pieces)
    assert answer.status == 400 and b"chunk" in answer.body
    assert answer.sent < flood
    assert upstream.requests == []
    (record,) = records(tmp_path / "model_calls.jsonl")
    assert record["outcome"] == "bad_request" and not record["request"].get("body")


@pytest.mark.parametrize(
    ("size_line", "status"),
    [
        (b"FFFFFFFFFFFFFFFFFFFF", 413),  # 2**80 - 1: read as it comes, cut at the limit
        (b"FFFFFFFFFFFFFFFFFFFFF", 400),  # 21 digits
        (b"0x10", 400),
        (b"+10", 400),
        (b" 10", 400),
        (b"1_0", 400),
        (b"10;" + b"x" * 200_000, 431),  # an extension longer than a head may be
    ],
    ids=["2^80", "21-digits", "0x", "plus", "space", "underscore", "long-extension"],
)
def test_a_malformed_or_huge_chunk_size_is_refused(
    tmp_path: Path, size_line: bytes, status: int
) -> None:
    cfg = config(upstream := FakeProvider(), tmp_path, anthropic=True, max_request_bytes=65536)
    with upstream, open_gateway(cfg) as gw:
        flood = [b"y" * 65536] * 64
        answer = exchange(gw.host_base_url, [chunked_post(gw) + size_line + b"\r\n", *flood])
    assert answer.status == status
    assert upstream.requests == []
    (record,) = records(tmp_path / "model_calls.jsonl")
    assert record["outcome"] == "bad_request" and not record["request"].get("body")


def test_chunk_extensions_cannot_make_a_small_body_endless(tmp_path: Path) -> None:
    """One byte of data per 30 KB of extension: the framing counts against the limit too."""
    cfg = config(upstream := FakeProvider(), tmp_path, anthropic=True, max_request_bytes=65536)
    piece = b"1;" + b"e" * 30000 + b"\r\nA\r\n"
    count = 64 * 1024 * 1024 // len(piece)
    with upstream, open_gateway(cfg) as gw:
        answer = exchange(gw.host_base_url, [chunked_post(gw), *([piece] * count)])
    assert answer.status == 413 and answer.sent < count * len(piece)
    assert upstream.requests == []


def test_a_chunked_body_within_the_limit_is_forwarded_with_its_length(tmp_path: Path) -> None:
    cfg = config(upstream := FakeProvider([fake.messages("ok")]), tmp_path, anthropic=True)
    with upstream, open_gateway(cfg) as gw:
        answer = exchange(gw.host_base_url, chunked_post(gw) + chunked(BODY[:20], BODY[20:]))
    assert answer.status == 200
    (sent,) = upstream.requests
    assert sent.body == BODY and sent.headers["content-length"] == str(len(BODY))
    assert "transfer-encoding" not in sent.headers


def test_both_lengths_at_once_are_refused(tmp_path: Path) -> None:
    cfg = config(upstream := FakeProvider(), tmp_path, anthropic=True)
    with upstream, open_gateway(cfg) as gw:
        raw = post(gw, "/v1/messages", b"", **{"Transfer-Encoding": "chunked"}) + chunked(BODY)
        answer = exchange(gw.host_base_url, raw.replace(b"Content-Length: 0", b"Content-Length: 5"))
    assert answer.status == 400 and upstream.requests == []


def test_kept_alive_pipelined_and_100_continue_requests_are_each_answered(tmp_path: Path) -> None:
    replies = [fake.messages("one"), fake.messages("two"), fake.messages("three")]
    cfg = config(upstream := FakeProvider(replies), tmp_path, anthropic=True)
    with upstream, open_gateway(cfg) as gw:
        both = post(gw, "/v1/messages", Connection="keep-alive") + post(gw, "/v1/messages")
        pipelined = exchange(gw.host_base_url, both)
        sock = connect(gw.host_base_url)
        first = post(gw, "/v1/messages", Expect="100-continue")
        sock.sendall(first[: -len(BODY)])
        interim = sock.recv(65536)
        sock.sendall(BODY)
        final = sock.makefile("rb").read()
        sock.close()
    assert pipelined.status == 200 and pipelined.body.count(b"HTTP/1.1 200 OK") == 1
    assert interim == b"HTTP/1.1 100 Continue\r\n\r\n" and final.startswith(b"HTTP/1.1 200 OK")
    assert [r.body for r in upstream.requests] == [BODY] * 3


# -- limits on what is open at once -----------------------------------------------------------


def test_half_open_connections_past_the_limit_are_refused_without_a_thread(
    tmp_path: Path,
) -> None:
    """2,000 idle connections once took 2,003 threads: now at most ``max_connections``, the
    rest answered 503 at once and recorded."""
    cfg = config(upstream := FakeProvider([fake.messages("after")]), tmp_path, anthropic=True)
    with upstream, open_gateway(cfg) as gw:  # max_connections: 64 by default
        before = threading.active_count()
        idle = [connect(gw.host_base_url) for _ in range(300)]
        refused = []
        for sock in idle[64:]:
            sock.settimeout(10)
            refused.append(sock.recv(65536))
        threads = threading.active_count() - before
        for sock in idle:
            sock.close()
        deadline = time.monotonic() + 30
        while (answer := exchange(gw.host_base_url, post(gw, "/v1/messages"))).status == 503:
            assert time.monotonic() < deadline, "the closed connections' slots came back"
            time.sleep(0.05)
    assert threads <= 64
    assert all(r.startswith(b"HTTP/1.1 503 ") for r in refused)
    assert b"64 connections are open already" in refused[0]
    assert answer.status == 200
    found = [r for r in records(tmp_path / "model_calls.jsonl") if r["outcome"] == "busy"]
    assert len(found) >= 236 and found[0]["status"] == 503
    assert "connections are open already" in found[0]["error"]["message"]


def test_calls_past_the_limit_in_flight_are_refused_and_recorded(tmp_path: Path) -> None:
    held = [fake.messages(f"held {n}", stream=True) for n in range(2)]
    for reply in held:
        reply.hold_after = 1
    cfg = config(upstream := FakeProvider(held), tmp_path, anthropic=True, max_calls_in_flight=2)
    with upstream, open_gateway(cfg) as gw:
        streams = [connect(gw.host_base_url) for _ in held]
        for sock in streams:
            sock.sendall(post(gw, "/v1/messages"))
            sock.recv(65536)  # the stream has started: the call is in flight
        third = exchange(gw.host_base_url, post(gw, "/v1/messages"))
        for reply in held:
            reply.release.set()
        for sock in streams:
            sock.close()
    assert third.status == 429
    assert b"2 calls of this attempt are in flight already" in third.body
    assert len(upstream.requests) == 2
    busy = [r for r in records(tmp_path / "model_calls.jsonl") if r["outcome"] == "busy"]
    assert len(busy) == 1 and busy[0]["status"] == 429


def test_a_body_waits_for_room_then_is_refused_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("runs.gateway.inbound.BUSY_WAIT_SEC", 0.2)
    cfg = config(
        upstream := FakeProvider(),
        tmp_path,
        anthropic=True,
        max_request_bytes=1000,
        max_request_bytes_in_flight=1000,
    )
    with upstream, open_gateway(cfg) as gw:
        holder = connect(gw.host_base_url)
        held = post(gw, "/v1/messages", b"{" * 900)
        holder.sendall(held[:-899])  # 900 bytes announced, one sent: its room is held
        deadline = time.monotonic() + 30
        while gw.request_bytes.used < 900:
            assert time.monotonic() < deadline, "the gateway read the first head"
            time.sleep(0.01)
        second = exchange(gw.host_base_url, post(gw, "/v1/messages", BODY.ljust(200)))
        holder.close()
    assert second.status == 503
    assert b"bytes of requests are being read or sent already" in second.body
    assert upstream.requests == []


MEMORY_PROBE = r"""
import json, sys, threading
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from runs.gateway import GatewayConfig, open_gateway
gw = open_gateway(GatewayConfig(upstream_base_url=sys.argv[2], upstream_api_key="sk-real",
                                record_path=Path(sys.argv[3])))
print(json.dumps({"url": gw.host_base_url, "token": gw.token}), flush=True)
sys.stdin.read()
print(open("/proc/self/status").read(), flush=True)
"""


@pytest.mark.slow
def test_twenty_parallel_32_mib_requests_stay_under_a_gigabyte(tmp_path: Path) -> None:
    """The gateway alone in a process, as in a worker: its peak memory (VmHWM) while 20
    clients send 32 MiB bodies at once (1.19 GB before bodies waited for room)."""
    content = "x" * (32 * 1024 * 1024 - 200)
    body = json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": content}]})
    body_bytes = body.encode()
    del content, body
    upstream = FakeProvider(keep=False, respond=lambda request: fake.chat("ok"))
    with upstream:
        probe = subprocess.Popen(
            [sys.executable, "-c", MEMORY_PROBE, str(ROOT), upstream.url("/v1"), tmp_path / "r"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert probe.stdin is not None and probe.stdout is not None
        started = json.loads(probe.stdout.readline())
        statuses: list[int | None] = []

        def call() -> None:
            raw = head(
                "POST",
                "/chat/completions",
                {
                    "Host": "127.0.0.1",
                    "Authorization": f"Bearer {started['token']}",
                    "Content-Length": str(len(body_bytes)),
                    "Connection": "close",
                },
            )
            statuses.append(exchange(started["url"], [raw, body_bytes], timeout=300).status)

        threads = [threading.Thread(target=call) for _ in range(20)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        status_text, _ = probe.communicate("", timeout=60)
    peak_kb = int(
        next(line for line in status_text.splitlines() if line.startswith("VmHWM:")).split()[1]
    )
    print(f"the gateway process peaked at {peak_kb // 1024} MiB")
    assert statuses == [200] * 20
    assert peak_kb < 1024 * 1024, f"the gateway process peaked at {peak_kb // 1024} MiB"
