"""The model gateway's added latency per model call, against calling the upstream directly.

    python bench/gateway.py [--calls 200] [--backends docker,bwrap] [--no-sandbox]
                            [--cli-runs 3] [--clis claude-code,codex,...]

Three processes, as in an attempt: the upstream (the scripted provider of the tests,
tests/support/fake_provider.py, on loopback: what is measured is the gateway, not a network),
the gateway (in this process, as in a worker) and the client (a CLI). In one run, each client
alternates calls to the upstream directly and through the gateway (the same client, the same
answer), so both see the same background load; the added latency is each gateway call's time
minus its direct twin's, and its p50 and p95 are printed with both sides' own. Target: <= 5 ms
at p50.

- host: the real ``openai`` and ``anthropic`` clients (an agent on the worker): chat
  completions as JSON and SSE, Responses and Anthropic Messages as SSE;
- sandbox: a raw HTTP client (python3's http.client, a kept-alive connection) in a sandbox of
  each backend, through the forwarder and the Unix socket, against the same client on the
  host calling the upstream directly (batches alternate).

Each measurement is a function returning ``Row``s, listed in ``MEASUREMENTS``. Then (unless
``--cli-runs 0``) a CLI attempt's wall time, gateway and sandbox included, against the same CLI
doing the same work bare against the same upstream, per CLI and backend (bench/cli_agents.py).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from runs.gateway import GatewayConfig, open_gateway  # noqa: E402
from sandbox import available_backends, open_sandbox  # noqa: E402
from sandbox.base import SandboxConfig  # noqa: E402

TARGET_MS = 5.0
KEY = "sk-bench-upstream-key"
MESSAGES = [{"role": "user", "content": "fix the failing test"}]
TEXT = "I will read calc.py, then change mean() to divide by len(values) and run the tests."
HOST_MODES = {
    "chat": "openai chat completions, JSON",
    "chat-sse": "openai chat completions, SSE",
    "responses": "openai responses, SSE",
    "messages": "anthropic messages, SSE",
    "gemini-sse": "raw client, Gemini SSE",
}
GEMINI_MODEL = "gemini-2.5-pro"
# The raw client: argv = port, path, JSON body, key, calls; prints each call's milliseconds.
RAW_CLIENT = r"""
import http.client, json, sys, time
port, path, body, key, calls = sys.argv[1:6]
conn = http.client.HTTPConnection("127.0.0.1", int(port), timeout=60)
headers = {"Authorization": "Bearer " + key, "Content-Type": "application/json"}
times = []
for _ in range(int(calls)):
    started = time.perf_counter()
    conn.request("POST", path, body=body, headers=headers)
    response = conn.getresponse()
    while response.read1(65536):
        pass
    times.append((time.perf_counter() - started) * 1000)
    assert response.status == 200, response.status
print(json.dumps(times))
"""


@dataclass(frozen=True)
class Row:
    what: str
    via_ms: list[float]  # through the gateway
    direct_ms: list[float]  # the upstream directly, alternating with them
    cpu_ms: float | None = None  # the gateway's CPU time per call

    @property
    def added_ms(self) -> list[float]:
        return [v - d for v, d in zip(self.via_ms, self.direct_ms, strict=False)]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


# -- the upstream and the client, each a process of its own ----------------------------------


def serve_upstream() -> None:
    """``--serve-upstream``: answer every request like its API, forever; print the port."""
    from tests.support import fake_provider as fake
    from tests.support.fake_provider_gemini import gemini

    def respond(request: fake.Request) -> fake.Reply:
        if ":streamGenerateContent" in request.path:
            return gemini(TEXT, stream=True)
        stream = request.json.get("stream") is True
        if request.path.endswith("/messages"):
            return fake.messages(TEXT, stream=stream)
        if request.path.endswith("/responses"):
            return fake.responses(TEXT, stream=stream)
        return fake.chat(TEXT, stream=stream)

    with fake.FakeProvider(respond=respond, keep=False) as upstream:
        print(upstream.port, flush=True)
        sys.stdin.read()  # until the bench closes our stdin


@contextlib.contextmanager
def upstream_process() -> Iterator[int]:
    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve-upstream"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        yield int(proc.stdout.readline())
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(10)


def run_client(mode: str, direct: str, via: str, token: str, calls: int) -> None:
    """``--client``: alternate calls direct / through the gateway; print the pairs (ms)."""
    import anthropic
    import openai

    def make(base_url: str, key: str) -> Callable[[], object]:
        if mode == "gemini-sse":  # no Google SDK here: a kept-alive connection of the stdlib
            import http.client
            import urllib.parse

            url = urllib.parse.urlsplit(base_url)
            conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
            path = f"/v1beta/models/{GEMINI_MODEL}:streamGenerateContent?alt=sse"
            body = json.dumps({"contents": [{"role": "user", "parts": [{"text": "fix"}]}]})
            headers = {"x-goog-api-key": key, "content-type": "application/json"}

            def stream() -> bytes:
                conn.request("POST", path, body=body, headers=headers)
                response = conn.getresponse()
                data = response.read()  # as the SSE chunks arrive, to the last one
                if response.status != 200:
                    raise RuntimeError(f"HTTP {response.status}: {data[:200]!r}")
                return data

            return stream
        if mode == "messages":
            aclient = anthropic.Anthropic(base_url=base_url, api_key=key, max_retries=0)
            return lambda: list(
                aclient.messages.create(
                    model="claude-sonnet-4", max_tokens=100, messages=MESSAGES, stream=True
                )
            )
        client = openai.OpenAI(base_url=base_url, api_key=key, max_retries=0)
        if mode == "chat":
            return lambda: client.chat.completions.create(model="gpt-4o", messages=MESSAGES)
        if mode == "chat-sse":
            return lambda: list(
                client.chat.completions.create(
                    model="gpt-4o",
                    messages=MESSAGES,
                    stream=True,
                    stream_options={"include_usage": True},
                )
            )
        return lambda: list(client.responses.create(model="gpt-4o", input="fix", stream=True))

    def timed(fn: Callable[[], object]) -> float:
        started = time.perf_counter()
        fn()
        return (time.perf_counter() - started) * 1000

    call_direct, call_via = make(direct, KEY), make(via, token)
    for _ in range(5):  # warm-up: connections, imports, first-call costs
        call_direct(), call_via()
    print(json.dumps([(timed(call_via), timed(call_direct)) for _ in range(calls)]))


# -- measurements -----------------------------------------------------------------------------


def host_rows(args: argparse.Namespace) -> list[Row]:
    rows = []
    with upstream_process() as port:
        for mode, what in HOST_MODES.items():
            bare = mode in ("messages", "gemini-sse")  # their clients add the version
            root = f"http://127.0.0.1:{port}" + ("" if bare else "/v1")
            # The model the mode's client asks for: the gateway serves no other.
            model = {"messages": "claude-sonnet-4", "gemini-sse": GEMINI_MODEL}.get(mode, "gpt-4o")
            cfg = GatewayConfig(upstream_base_url=root, upstream_api_key=KEY, model_name=model)
            with open_gateway(cfg) as gw:
                argv = [
                    sys.executable,
                    __file__,
                    "--client",
                    mode,
                    "--direct",
                    root,
                    "--via",
                    gw.host_base_url,
                    "--token",
                    gw.token,
                    "--calls",
                    str(args.calls),
                ]
                cpu = time.process_time()  # this process is the gateway (and idle otherwise)
                done = subprocess.run(argv, capture_output=True, text=True)
                if done.returncode:
                    raise SystemExit(f"the {mode} client failed:\n{done.stderr[-2000:]}")
                cpu = time.process_time() - cpu
                calls = gw.summary.calls
            pairs = json.loads(done.stdout)
            rows.append(
                Row(
                    f"host, {what}",
                    [v for v, _ in pairs],
                    [d for _, d in pairs],
                    cpu_ms=cpu * 1000 / calls,
                )
            )
    return rows


def sandbox_rows(args: argparse.Namespace) -> list[Row]:
    """A raw client in a sandbox (forwarder, Unix socket, gateway) against the same client on
    the host calling the upstream directly; batches of 20 alternate."""
    if args.no_sandbox:
        return []
    reasons = available_backends()
    body = json.dumps(
        {
            "model": "gpt-4o",
            "messages": MESSAGES,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    )
    batch = 20
    rows = []
    for backend in args.backends.split(","):
        if reasons.get(backend):
            print(f"skipping {backend}: {reasons[backend]}", file=sys.stderr)
            continue
        with (
            upstream_process() as port,
            open_gateway(
                GatewayConfig(
                    upstream_base_url=f"http://127.0.0.1:{port}/v1",
                    upstream_api_key=KEY,
                    model_name="gpt-4o",
                )
            ) as gw,
            tempfile.TemporaryDirectory(prefix="ab-bench-") as tmp,
        ):
            config = SandboxConfig(
                name=f"bench-gw-{uuid.uuid4().hex[:8]}",
                workspace=Path(tmp) / "ws",
                allow_network=False,
                gateway=gw.sandbox_mount,
            )
            with open_sandbox(config, backend) as sb:

                def in_sandbox(n: int) -> list[float]:
                    argv = [
                        "python3",
                        "-c",
                        RAW_CLIENT,
                        str(gw.sandbox_mount.port),
                        "/chat/completions",
                        body,
                        gw.token,
                        str(n),
                    ]
                    result = sb.exec(argv, timeout=300)
                    assert result.ok, result.stderr
                    return json.loads(result.stdout)

                def on_host(n: int) -> list[float]:
                    argv = [
                        sys.executable,
                        "-c",
                        RAW_CLIENT,
                        str(port),
                        "/v1/chat/completions",
                        body,
                        KEY,
                        str(n),
                    ]
                    done = subprocess.run(argv, capture_output=True, text=True, check=True)
                    return json.loads(done.stdout)

                in_sandbox(batch), on_host(batch)  # warm-up
                via: list[float] = []
                direct: list[float] = []
                while len(via) < args.calls:
                    # The first call of a batch opens its connection: left out on both sides.
                    via += in_sandbox(batch + 1)[1:]
                    direct += on_host(batch + 1)[1:]
        rows.append(Row(f"{backend} sandbox, raw client, chat SSE", via, direct))
    return rows


MEASUREMENTS: list[Callable[[argparse.Namespace], list[Row]]] = [
    host_rows,
    sandbox_rows,
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="calls per mode and side")
    parser.add_argument("--backends", default="docker,bwrap")
    parser.add_argument("--no-sandbox", action="store_true", help="host clients only")
    parser.add_argument(
        "--cli-runs",
        type=int,
        default=3,
        help="CLI attempts and bare runs per CLI and backend (0: none)",
    )
    parser.add_argument("--clis", default="", help="comma-separated; default: every shipped CLI")
    parser.add_argument("--serve-upstream", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--client", help=argparse.SUPPRESS)
    parser.add_argument("--direct", help=argparse.SUPPRESS)
    parser.add_argument("--via", help=argparse.SUPPRESS)
    parser.add_argument("--token", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_upstream:
        return serve_upstream()
    if args.client:
        return run_client(args.client, args.direct, args.via, args.token, args.calls)
    load_before = os.getloadavg()
    rows = [row for measure in MEASUREMENTS for row in measure(args)]
    load_after = os.getloadavg()
    print(
        f"{'':44} {'direct p50/p95':>17} {'gateway p50/p95':>17} {'added p50/p95':>15}"
        "     gateway CPU/call"
    )
    for row in rows:
        added = row.added_ms
        verdict = "ok" if pct(added, 0.5) <= TARGET_MS else "MISSED"
        print(
            f"{row.what:44} {pct(row.direct_ms, 0.5):7.2f}/{pct(row.direct_ms, 0.95):<7.2f}ms "
            f"{pct(row.via_ms, 0.5):7.2f}/{pct(row.via_ms, 0.95):<7.2f}ms "
            f"{pct(added, 0.5):6.2f}/{pct(added, 0.95):<6.2f}ms  {verdict:6} "
            + (f"{row.cpu_ms:.2f} ms" if row.cpu_ms is not None else "")
        )
    print(
        f"target: added <= {TARGET_MS:g} ms at p50; {args.calls} calls per row and side; "
        f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after "
        f"({os.cpu_count()} cores)"
    )
    if args.cli_runs:
        print()
        cli_attempts(args)


def cli_attempts(args: argparse.Namespace) -> None:
    """bench/cli_agents.py's comparison, on this run's backends (on the host alone without
    sandboxes, none)."""
    if args.no_sandbox:
        return
    sys.path.insert(0, str(Path(__file__).parent))
    import cli_agents

    with tempfile.TemporaryDirectory(prefix="ab-bench-clis-") as tmp:
        cli_agents.setup_django(Path(tmp))
        load_before = os.getloadavg()
        from runs.agents.cli.definition import load_definitions

        clis = args.clis.split(",") if args.clis else list(load_definitions())
        rows = cli_agents.cli_rows(args.cli_runs, clis, args.backends.split(","))
        cli_agents.print_cli_rows(rows)
        print(
            f"CLI attempts: median of {args.cli_runs}; load average {load_before[0]:.2f} before, "
            f"{os.getloadavg()[0]:.2f} after ({os.cpu_count()} cores)"
        )


if __name__ == "__main__":
    main()
