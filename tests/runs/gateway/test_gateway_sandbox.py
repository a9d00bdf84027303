"""The model gateway seen from inside a real sandbox, on both backends: a command reaches the
gateway at http://127.0.0.1:<port> and nothing else on the host or beyond, the real key is
nowhere in the sandbox, and the per-exec forwarder leaves every command's result as it was.

The runner image has no curl: the "CLI" here is python3's http.client (raw HTTP, what curl
would send), and bash's /dev/tcp in an image without python3.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import tarfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors
import pytest

from runs.gateway import open_gateway
from sandbox.base import Sandbox, SandboxConfig
from sandbox.docker_backend import DockerSandbox
from sandbox.errors import SandboxError
from sandbox.gateway_mount import DEFAULT_PORT, FORWARDER_PATH, forwarder_binary, source_key
from sandbox.host_fence import host_ipv4_addresses
from tests.sandbox.test_sandbox_conformance import Listener, host_address_for
from tests.support import fake_provider as fake
from tests.support.fake_provider import FakeProvider
from tests.support.gateway_fixtures import REAL_KEY, MakeSandbox, config, records
from tests.support.netns_fixtures import FakeInternet

# The CLI stand-in: argv[1] is a JSON list of requests [path, body, stream]; argv[2] a JSON
# list of [host, port] to try to reach. Prints one JSON document.
CLIENT = r"""
import base64, http.client, json, os, socket, sys
calls = []
for path, body, stream in json.loads(sys.argv[1]):
    conn = http.client.HTTPConnection("127.0.0.1", int(os.environ["GATEWAY_PORT"]), timeout=30)
    conn.request("POST", path, body=json.dumps(body), headers={
        "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
        "Content-Type": "application/json"})
    response = conn.getresponse()
    data = response.read()
    calls.append([response.status, base64.b64encode(data).decode()])
    conn.close()
probes = {}
for host, port in json.loads(sys.argv[2]):
    try:
        s = socket.create_connection((host, port), timeout=2)
    except OSError as exc:
        probes[f"{host}:{port}"] = "refused " + type(exc).__name__
        continue
    try:
        probes[f"{host}:{port}"] = "reached " + s.recv(100).decode(errors="replace")
    except OSError:
        probes[f"{host}:{port}"] = "reached (it said nothing)"
    s.close()
interfaces = [name for _, name in socket.if_nameindex()]
print(json.dumps({"calls": calls, "probes": probes, "interfaces": interfaces}))
"""
CHAT = {"model": "gpt-4o", "messages": [{"role": "user", "content": "fix it"}]}


def run_client(sb: Sandbox, requests: list, probes: list | None = None, **kwargs: object) -> dict:
    result = sb.exec(
        ["python3", "-c", CLIENT, json.dumps(requests), json.dumps(probes or [])],
        timeout=60,
        **kwargs,  # type: ignore[arg-type]
    )
    assert result.ok, result.stderr
    return json.loads(result.stdout)


def body_of(call: list) -> bytes:
    return base64.b64decode(call[1])


def test_a_command_reaches_the_gateway_and_nothing_else(
    backend: str,
    make_gateway_sandbox: MakeSandbox,
    tmp_path: Path,
    listener: Listener,
    fake_internet: FakeInternet,
) -> None:
    replies = [fake.chat("plain answer"), fake.chat("streamed answer", stream=True)]
    with FakeProvider(replies) as upstream, open_gateway(config(upstream, tmp_path)) as gw:
        gateway_port = int(gw.host_base_url.rsplit(":", 1)[1])
        hosts = {"127.0.0.1", *host_ipv4_addresses(), host_address_for(backend)}
        probes = [
            [host, port]
            for host in sorted(hosts)
            for port in (listener.port, upstream.port, gateway_port)
        ]
        probes.append([fake_internet.address, fake_internet.port])
        with make_gateway_sandbox(gw) as sb:
            out = run_client(
                sb,
                [
                    ["/chat/completions", CHAT, False],
                    ["/chat/completions", {**CHAT, "stream": True}, True],
                ],
                probes,
            )
    (status1, _), (status2, _) = out["calls"]
    assert (status1, status2) == (200, 200)
    assert [body_of(call) for call in out["calls"]] == upstream.sent
    assert [r.path for r in upstream.requests] == ["/v1/chat/completions"] * 2
    assert {r["via"] for r in records(tmp_path / "model_calls.jsonl")} == {"sandbox"}
    reached = {target: how for target, how in out["probes"].items() if how.startswith("reached")}
    assert reached == {}
    assert len(out["probes"]) == len(probes) >= 10
    assert listener.accepted == 0
    assert out["interfaces"] == ["lo"]  # no route anywhere: loopback only
    assert gw.summary.calls == 2


def test_the_real_key_is_nowhere_in_the_sandbox(
    backend: str, make_gateway_sandbox: MakeSandbox, tmp_path: Path
) -> None:
    """Everything a CLI could see or leave: its environment and every process's, the files it
    wrote (workspace, /tmp, home), the answers it got (an upstream echoing the key in an
    error and in a stream cut inside the key), the mounted folder; and the stored record."""
    echo = fake.error(401, "invalid_api_key", f"Incorrect API key provided: {REAL_KEY}.")
    split = fake.Reply(
        events=[
            b'data: {"choices": [], "k": "' + REAL_KEY[:7].encode(),
            REAL_KEY[7:].encode() + b'"}\n\n',
        ],
        api="chat",
        headers={"content-type": "text/event-stream"},
    )
    replies = [fake.chat("ok"), echo, split]
    with (
        FakeProvider(replies) as upstream,
        open_gateway(config(upstream, tmp_path)) as gw,
        make_gateway_sandbox(gw) as sb,
    ):
        cli = CLIENT.replace(
            'print(json.dumps({"calls"',
            "import glob, shutil, tarfile\n"
            "os.makedirs('/workspace/out', exist_ok=True)\n"
            "for n, (s, b) in enumerate(calls):\n"
            "    open(f'/workspace/out/{n}.txt', 'wb').write(base64.b64decode(b))\n"
            "    open(f'/tmp/answer{n}', 'wb').write(base64.b64decode(b))\n"
            "open(os.path.expanduser('~/.cli-state'), 'w').write(json.dumps(calls))\n"
            "with open('/workspace/out/environ', 'wb') as env:\n"
            "    for path in glob.glob('/proc/[0-9]*/environ') +"
            " glob.glob('/proc/[0-9]*/cmdline'):\n"
            "        try: env.write(open(path, 'rb').read() + b'\\n')\n"
            "        except OSError: pass\n"
            "with tarfile.open('/workspace/out/snapshot.tar', 'w') as tar:\n"
            "    for top in ('/tmp', os.path.expanduser('~'), '/run'):\n"
            "        tar.add(top)\n"
            'print(json.dumps({"calls"',
        )
        requests = [
            ["/chat/completions", CHAT, False],
            ["/chat/completions", CHAT, False],
            ["/chat/completions", {**CHAT, "stream": True}, True],
        ]
        result = sb.exec(["python3", "-c", cli, json.dumps(requests), "[]"], timeout=60)
        assert result.ok, result.stderr
        listing = sb.exec("ls -la /run/ab-gateway; env", timeout=10)
        if backend == "docker":
            assert isinstance(sb, DockerSandbox)
            inspected = json.dumps(docker.from_env().api.inspect_container(sb.name))
            assert REAL_KEY not in inspected and gw.token in inspected
    statuses = [call[0] for call in json.loads(result.stdout)["calls"]]
    assert statuses == [200, 401, 200]
    written = sorted(p for p in sb.config.workspace.rglob("*") if p.is_file())
    assert {p.name for p in written} >= {"0.txt", "1.txt", "2.txt", "environ", "snapshot.tar"}
    with tarfile.open(sb.config.workspace / "out" / "snapshot.tar") as tar:
        names = tar.getnames()
    assert any(n.endswith("answer2") for n in names) and any("cli-state" in n for n in names)
    assert gw.token.encode() in (sb.config.workspace / "out" / "environ").read_bytes()
    key = REAL_KEY.encode()
    everything = [
        *(p.read_bytes() for p in written),
        result.stdout.encode(),
        result.stderr.encode(),
        listing.stdout.encode(),
        (tmp_path / "model_calls.jsonl").read_bytes(),
    ]
    assert [blob for blob in everything if key in blob] == []
    assert b"[redacted]" in (sb.config.workspace / "out" / "1.txt").read_bytes()
    # What the upstream got: the key, never the token.
    assert all(r.headers["authorization"] == f"Bearer {REAL_KEY}" for r in upstream.requests)


def test_the_forwarder_leaves_every_result_as_it_was(
    make_gateway_sandbox: MakeSandbox, tmp_path: Path
) -> None:
    with (
        FakeProvider() as upstream,
        open_gateway(config(upstream, tmp_path)) as gw,
        make_gateway_sandbox(gw) as sb,
    ):
        result = sb.exec("echo out; echo err >&2; exit 3", timeout=10)
        assert (result.exit_code, result.stdout, result.stderr) == (3, "out\n", "err\n")
        listed = sb.exec(
            ["python3", "-c", "import sys; print(sys.argv[1:])", "a b", "$X"], timeout=10
        )
        assert listed.stdout == "['a b', '$X']\n"
        killed = sb.exec("kill -9 $$", timeout=10)
        assert (killed.exit_code, killed.oom_killed, killed.timed_out) == (137, False, False)
        assert sb.exec("kill -TERM $$", timeout=10).exit_code == 143
        slow = sb.exec("sleep 30", timeout=1)
        assert (slow.exit_code, slow.timed_out) == (124, True)
        missing = sb.exec(["no-such-cli", "--version"], timeout=10)
        assert missing.exit_code == 127
        assert "ab-gateway-forward: no-such-cli: No such file or directory" in missing.stderr
        piped = sb.exec("yes | head -n 1; cat", timeout=10)
        assert (piped.stdout, piped.stderr) == ("y\n", "")
        parent = sb.exec("cat /proc/$PPID/cmdline | tr '\\0' ' '", timeout=10)
        assert parent.stdout.startswith(f"{FORWARDER_PATH} {DEFAULT_PORT} ")


def test_execs_after_the_gateway_closed_run_without_it(
    make_gateway_sandbox: MakeSandbox, tmp_path: Path
) -> None:
    """The sandbox outlives the agent stage (the final tests run in it): once the gateway is
    closed its execs run as in any sandbox, and nothing listens on the port."""
    probe = [["python3", "-c", CLIENT, "[]", json.dumps([["127.0.0.1", DEFAULT_PORT]])]]
    with FakeProvider() as upstream:
        gw = open_gateway(config(upstream, tmp_path))
        with make_gateway_sandbox(gw) as sb:
            during = json.loads(sb.exec(probe[0], timeout=20).stdout)["probes"]
            gw.close()
            after = sb.exec(probe[0], timeout=20)
            assert after.ok, after.stderr
            assert sb.exec("echo still fine", timeout=10).stdout == "still fine\n"
    assert during[f"127.0.0.1:{DEFAULT_PORT}"].startswith("reached")  # the forwarder's port
    assert json.loads(after.stdout)["probes"][f"127.0.0.1:{DEFAULT_PORT}"].startswith("refused")


def calling(sb: Sandbox, calls: int, outs: list[dict], errors: list[BaseException]):
    """A thread, started, whose exec makes ``calls`` chat calls through the gateway; its
    output goes to ``outs``, whatever it raised to ``errors``."""

    def run() -> None:
        try:
            outs.append(run_client(sb, [["/chat/completions", CHAT, False]] * calls))
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_concurrent_execs_each_reach_the_gateway(
    make_gateway_sandbox: MakeSandbox, tmp_path: Path
) -> None:
    """Docker's execs share a network namespace: each exec's forwarder binds the same port."""
    replies = [fake.chat(f"answer {n}") for n in range(4)]
    with (
        FakeProvider(replies) as upstream,
        open_gateway(config(upstream, tmp_path)) as gw,
        make_gateway_sandbox(gw) as sb,
    ):
        outs: list[dict] = []
        errors: list[BaseException] = []
        threads = [calling(sb, 2, outs, errors) for _ in range(2)]
        for thread in threads:
            thread.join()
    assert errors == []
    assert sorted(call[0] for out in outs for call in out["calls"]) == [200] * 4
    assert gw.summary.calls == 4


def test_short_execs_beside_a_long_one_never_cut_its_calls(
    make_gateway_sandbox: MakeSandbox, tmp_path: Path
) -> None:
    """A forwarder whose command ends first may hold (or have queued) another exec's
    connection: it relays it to the end before it exits, and the kernel moves what is queued
    on its listener to the other exec's. Short execs run over and over while a long one calls
    the gateway; every call answers and every short exec ends on its own."""
    calls = 24
    replies = [fake.chat(f"answer {n}") for n in range(calls)]
    with (
        FakeProvider(replies) as upstream,
        open_gateway(config(upstream, tmp_path)) as gw,
        make_gateway_sandbox(gw) as sb,
    ):
        outs: list[dict] = []
        errors: list[BaseException] = []
        thread = calling(sb, calls, outs, errors)
        short = []
        while thread.is_alive():
            short.append(sb.exec(["sh", "-c", "exit 3"], timeout=30))
        thread.join()
    assert errors == []
    assert [call[0] for call in outs[0]["calls"]] == [200] * calls
    assert gw.summary.calls == calls
    assert short and all(r.exit_code == 3 and not r.timed_out for r in short)


def test_a_networked_exec_reaches_the_gateway_and_the_internet_but_not_the_host(
    backend: str,
    make_gateway_sandbox: MakeSandbox,
    tmp_path: Path,
    listener: Listener,
    fake_internet: FakeInternet,
) -> None:
    with (
        FakeProvider([fake.chat("online")]) as upstream,
        open_gateway(config(upstream, tmp_path)) as gw,
        make_gateway_sandbox(gw, allow_network=True) as sb,
    ):
        probes = [
            [fake_internet.address, fake_internet.port],
            [host_address_for(backend), listener.port],
            [host_address_for(backend), upstream.port],
        ]
        out = run_client(sb, [["/chat/completions", CHAT, False]], probes, network=True)
    assert out["calls"][0][0] == 200
    assert out["probes"][f"{fake_internet.address}:{fake_internet.port}"].startswith("reached")
    assert [p for p, how in out["probes"].items() if how.startswith("reached")] == [
        f"{fake_internet.address}:{fake_internet.port}"
    ]
    assert listener.accepted == 0


@pytest.fixture(scope="module")
def no_python_image() -> Iterator[str]:
    """The runner image without python3 (a unique tag: parallel test runs may build theirs)."""
    tag = f"agentbench/test-gw-no-python3:{uuid.uuid4().hex[:8]}"
    dockerfile = (
        b"FROM agentbench/py-runner:0.1.0\nUSER root\n"
        b"RUN rm /usr/bin/python3 /usr/bin/python\nUSER agent\n"
    )
    client = docker.from_env()
    try:
        client.images.build(fileobj=io.BytesIO(dockerfile), tag=tag, rm=True)
        yield tag
    finally:
        with contextlib.suppress(docker.errors.APIError):
            client.images.remove(tag)
        client.close()


@pytest.mark.docker
def test_the_forwarder_needs_nothing_from_the_image(tmp_path: Path, no_python_image: str) -> None:
    """A static binary: it serves in an image without python3, where the sandbox itself runs
    commands by docker exec; the client here is bash's /dev/tcp."""
    request = json.dumps(CHAT)
    script = (
        "exec 3<>/dev/tcp/127.0.0.1/$GATEWAY_PORT; "
        "printf 'POST /chat/completions HTTP/1.1\\r\\nHost: x\\r\\nAuthorization: Bearer %s\\r\\n"
        "Content-Type: application/json\\r\\nContent-Length: %s\\r\\nConnection: close\\r\\n\\r\\n"
        '%s\' "$OPENAI_API_KEY" "${#BODY}" "$BODY" >&3; cat <&3'
    )
    with (
        FakeProvider([fake.chat("no python here")]) as upstream,
        open_gateway(config(upstream, tmp_path)) as gw,
    ):
        cfg = SandboxConfig(
            name=f"test-gw-{uuid.uuid4().hex[:10]}",
            workspace=tmp_path / "ws",
            image=no_python_image,
            allow_network=False,
            gateway=gw.sandbox_mount,
            env={"OPENAI_API_KEY": gw.token, "GATEWAY_PORT": str(DEFAULT_PORT), "BODY": request},
        )
        with DockerSandbox(cfg) as sb:
            assert sb.exec_mode == "docker-exec"
            assert sb.exec("command -v python3", timeout=10).exit_code != 0
            result = sb.exec(["bash", "-c", script], timeout=30)
    assert result.ok, result.stderr
    assert result.stdout.startswith("HTTP/1.1 200 OK")
    assert result.stdout.encode().endswith(upstream.sent[0])
    assert gw.summary.calls == 1


def test_a_token_from_another_sandbox_is_refused(
    make_gateway_sandbox: MakeSandbox, tmp_path: Path
) -> None:
    """Two attempts, two gateways: a command holding one attempt's token gets nothing from
    the other's gateway."""
    with (
        FakeProvider([fake.chat("mine")]) as upstream,
        open_gateway(config(upstream, tmp_path / "a")) as mine,
        open_gateway(config(upstream, tmp_path / "b")) as theirs,
    ):
        env = {"OPENAI_API_KEY": theirs.token, "GATEWAY_PORT": str(DEFAULT_PORT)}
        with make_gateway_sandbox(mine, env=env) as sb:
            out = run_client(sb, [["/chat/completions", CHAT, False]])
    assert out["calls"][0][0] == 401
    assert upstream.requests == []
    assert mine.summary.refused == 1 and theirs.summary.requests == 0


def test_the_forwarder_is_built_once_per_source_version(tmp_path: Path) -> None:
    first = forwarder_binary(tmp_path / "cache")
    assert first == tmp_path / "cache" / source_key() / "forward"
    assert os.access(first, os.X_OK)
    built = first.stat().st_mtime_ns
    assert forwarder_binary(tmp_path / "cache") == first
    assert first.stat().st_mtime_ns == built  # from the cache, not built again
    blocked = tmp_path / "blocked"
    blocked.touch()  # a file where the cache folder should be (root writes anywhere else)
    with pytest.raises(SandboxError, match="GATEWAY_FORWARDER_CACHE"):
        forwarder_binary(blocked)
