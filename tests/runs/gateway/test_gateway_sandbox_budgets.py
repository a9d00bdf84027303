"""The budget race from where it starts: a command inside a real sandbox, on each backend, makes
30 model calls at once through the gateway against a token and a cost budget (before: all 30
answered, 12 and 18 times the budgets)."""

from __future__ import annotations

import json
from pathlib import Path

from runs.gateway import GatewayBudgets, open_gateway
from tests.support import fake_provider as fake
from tests.support.fake_provider import FakeProvider, Request
from tests.support.gateway_fixtures import MakeSandbox, config, records

# 30 threads, each one call on its own connection, all released at once.
RACE = r"""
import http.client, json, os, sys, threading
n = int(sys.argv[1])
body = json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "fix it"}]})
start = threading.Barrier(n)
statuses = []
def call():
    start.wait()
    conn = http.client.HTTPConnection("127.0.0.1", int(os.environ["GATEWAY_PORT"]), timeout=60)
    conn.request("POST", "/chat/completions", body=body, headers={
        "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
        "Content-Type": "application/json"})
    response = conn.getresponse()
    response.read()
    statuses.append(response.status)
threads = [threading.Thread(target=call) for _ in range(n)]
for t in threads: t.start()
for t in threads: t.join()
print(json.dumps(statuses))
"""


def slow_chat(request: Request) -> fake.Reply:
    reply = fake.chat("ok", usage=(100, 20))  # 120 tokens, $0.00045 at gpt-4o's price
    reply.delay_sec = 0.2
    return reply


def test_parallel_calls_from_a_sandbox_cannot_race_past_the_budgets(
    backend: str, make_gateway_sandbox: MakeSandbox, tmp_path: Path
) -> None:
    budgets = GatewayBudgets(max_tokens=300, max_cost_usd=0.001)
    with (
        FakeProvider(respond=slow_chat) as upstream,
        open_gateway(config(upstream, tmp_path, budgets=budgets)) as gw,
        make_gateway_sandbox(gw, pids_limit=128) as sb,
    ):
        result = sb.exec(["python3", "-c", RACE, "30"], timeout=120)
        assert result.ok, result.stderr
    statuses = json.loads(result.stdout)
    assert len(statuses) == 30
    answered = statuses.count(200)
    assert answered == len(upstream.requests) <= 3
    assert statuses.count(400) == 30 - answered
    summary = gw.summary
    # Only the last call admitted can cross a limit, by its one answer (120 tokens).
    assert summary.tokens == 120 * answered <= 300 + 120
    assert summary.cost_usd <= 0.001 + 0.00045
    assert summary.budget_exceeded in ("tokens", "cost")
    found = records(tmp_path / "model_calls.jsonl")
    assert {r["via"] for r in found} == {"sandbox"}
    assert [r["outcome"] for r in found].count("budget") == 30 - answered
