"""Helpers for the gateway tests: a gateway over a scripted provider, its records, raw HTTP, and
sandboxes that reach a gateway (``make_gateway_sandbox``)."""

from __future__ import annotations

import http.client
import json
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from runs.gateway import Gateway, GatewayBudgets, GatewayConfig
from runs.llm_errors import RetryPolicy
from sandbox import open_sandbox
from sandbox.base import Sandbox, SandboxConfig
from sandbox.gateway_mount import DEFAULT_PORT
from tests.support.fake_provider import FakeProvider

REAL_KEY = "sk-real-upstream-key-5e1f0c2a9b7d4e3f8a6c"
# Retries fast and without jitter (delays stay what the policy says, for the records).
FAST_RETRY = RetryPolicy(max_attempts=3, base_delay_sec=0.01, max_delay_sec=2.0, jitter=0.0)


def config(
    provider: FakeProvider,
    tmp_path: Path,
    *,
    anthropic: bool = False,
    budgets: GatewayBudgets | None = None,
    **overrides: Any,
) -> GatewayConfig:
    """A gateway config over ``provider``: its ``/v1`` as the OpenAI base URL, its root for
    Anthropic (whose client adds ``/v1`` itself), as with the real providers."""
    fields: dict[str, Any] = {
        "upstream_base_url": provider.url("" if anthropic else "/v1"),
        "upstream_api_key": REAL_KEY,
        "model_name": "claude-sonnet-4" if anthropic else "gpt-4o",
        "budgets": budgets or GatewayBudgets(),
        "record_path": tmp_path / "model_calls.jsonl",
        "retry": FAST_RETRY,
    }
    fields.update(overrides)
    return GatewayConfig(**fields)


def records(path: Path) -> list[dict[str, Any]]:
    """model_calls.jsonl in arrival order."""
    found = [json.loads(line) for line in path.read_text().splitlines()]
    return sorted(found, key=lambda r: r["seq"])


def raw_post(
    base_url: str, path: str, body: dict | bytes, headers: dict[str, str], method: str = "POST"
) -> tuple[int, dict[str, str], bytes]:
    """One request over a fresh connection: status, headers, the body bytes as received."""
    url = urllib.parse.urlsplit(base_url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    try:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        conn.request(
            method,
            path,
            body=data if method == "POST" else None,
            headers={"content-type": "application/json", **headers},
        )
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


MakeSandbox = Callable[..., Sandbox]


@pytest.fixture
def make_gateway_sandbox(backend: str, tmp_path: Path) -> Iterator[MakeSandbox]:
    """Open sandboxes (unique names, no network) whose only way out is the gateway ``gw``."""
    made: list[Sandbox] = []

    def make(gw: Gateway, **overrides: object) -> Sandbox:
        fields: dict[str, object] = {
            "name": f"test-gw-{uuid.uuid4().hex[:10]}",
            "workspace": tmp_path / f"ws{len(made)}",
            "memory_mb": 256,
            "pids_limit": 64,
            "labels": {"agentbench.test": "gateway"},
            "allow_network": False,
            "gateway": gw.sandbox_mount,
            "env": {
                "OPENAI_API_KEY": gw.token,
                "OPENAI_BASE_URL": gw.sandbox_base_url,
                "GATEWAY_PORT": str(DEFAULT_PORT),
            },
        }
        fields.update(overrides)
        sb = open_sandbox(SandboxConfig(**fields), backend)  # type: ignore[arg-type]
        made.append(sb)
        return sb

    yield make
    for sb in made:
        sb.close()
