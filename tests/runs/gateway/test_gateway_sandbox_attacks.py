"""Issue 28's gateway reproductions from inside a real sandbox, on both backends: a command with
the attempt's token sends paths outside the route table, an absolute-form target, a spoofed
Host, Gemini paths with a traversal as the model or a key in a query, and a chunk size of -1
followed by a flood, through the forwarder and the Unix socket.
Nothing of it reaches the upstream but the one plain call, with the configured Host."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from runs.gateway import open_gateway
from tests.support import fake_provider as fake
from tests.support.fake_provider import FakeProvider
from tests.support.gateway_fixtures import REAL_KEY, MakeSandbox, config, records

# argv[1]: a JSON list of [head (base64), flood bytes after it]; prints, for each, the status
# the gateway answered (None: closed without one) and how many bytes it took.
ATTACKER = r"""
import base64, json, os, socket, sys
out = []
for head, flood in json.loads(sys.argv[1]):
    s = socket.create_connection(("127.0.0.1", int(os.environ["GATEWAY_PORT"])), timeout=30)
    sent = 0
    try:
        s.sendall(base64.b64decode(head))
        piece = b"x" * 65536
        while sent < flood:
            s.sendall(piece)
            sent += len(piece)
        s.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    data = b""
    try:
        while chunk := s.recv(65536):
            data += chunk
    except OSError:
        pass
    s.close()
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.1 ") else None
    out.append([status, sent])
print(json.dumps(out))
"""
BODY = json.dumps({"model": "claude-sonnet-4", "max_tokens": 10, "messages": []})
FLOOD = 64 * 1024 * 1024
SMUGGLED = "AIzaSy-someone-elses-key-0123456789"


def raw(
    target: str, *, method: str = "POST", host: str = "127.0.0.1", chunked: bool = False, token: str
) -> str:
    lines = [
        f"{method} {target} HTTP/1.1",
        f"Host: {host}",
        f"x-api-key: {token}",
        "anthropic-version: 2023-06-01",
        "Content-Type: application/json",
    ]
    if chunked:
        lines.append("Transfer-Encoding: chunked")
        body = "-1\r\n"
    else:
        lines += [f"Content-Length: {len(BODY)}", "Connection: close"]
        body = BODY
    return base64.b64encode(("\r\n".join(lines) + "\r\n\r\n" + body).encode()).decode()


def test_a_sandbox_cannot_bend_the_gateways_routes_host_or_body_limit(
    backend: str, make_gateway_sandbox: MakeSandbox, tmp_path: Path
) -> None:
    targets = [
        ("GET", "/v1/files/models/..", 400),
        ("GET", "/v1/messages/batches/msgbatch_01/results/models/..", 400),
        ("GET", "/v1/organizations/me/models/..", 400),
        ("POST", "/v1/files#/messages", 400),
        ("POST", "/v1/messages/batches;/messages", 400),
        ("POST", "/v1/threads/thr_1/messages", 404),
        ("POST", "http://evil.example:1/v1/messages", 400),
        # Gemini's routes: a traversal or a second ":" as the model, a key in another's query.
        ("POST", "/v1beta/models/..:generateContent", 400),
        ("POST", "/v1beta/models/gemini-2.5-pro:files:streamGenerateContent?alt=sse", 400),
        ("POST", f"/v1/chat/completions?key={SMUGGLED}", 400),
    ]
    cfg = config(upstream := FakeProvider([fake.messages("ok")]), tmp_path, anthropic=True)
    with upstream, open_gateway(cfg) as gw, make_gateway_sandbox(gw) as sb:
        attacks = [[raw(t, method=m, token=gw.token), 0] for m, t, _ in targets]
        attacks.append([raw("/v1/messages", host="evil.example:1", token=gw.token), 0])
        attacks.append([raw("/v1/messages", chunked=True, token=gw.token), FLOOD])
        result = sb.exec(["python3", "-c", ATTACKER, json.dumps(attacks)], timeout=300)
        assert result.ok, result.stderr
    answers = json.loads(result.stdout)
    assert [status for status, _ in answers] == [s for _, _, s in targets] + [200, 400]
    assert answers[-1][1] < FLOOD  # the gateway stopped reading at the "-1"
    (sent,) = upstream.requests  # the plain call alone, to the configured Host
    assert sent.headers["host"] == f"127.0.0.1:{upstream.port}" and sent.path == "/v1/messages"
    found = records(tmp_path / "model_calls.jsonl")
    assert {r["via"] for r in found} == {"sandbox"}
    assert [r["outcome"] for r in found] == [
        *("not_allowed" if s == 404 else "bad_request" for _, _, s in targets),
        "ok",
        "bad_request",
    ]
    assert not found[-1]["request"].get("body") and not found[-1]["request"].get("body_bytes")
    assert REAL_KEY not in (tmp_path / "model_calls.jsonl").read_text()
    assert SMUGGLED not in (tmp_path / "model_calls.jsonl").read_text()
