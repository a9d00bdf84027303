"""How a Docker sandbox runs commands: through its in-container exec server, or with
``docker exec`` when the image has no python3 or the server is gone. Both paths against the
real engine (the conformance suite covers the server path with the runner image)."""

from __future__ import annotations

import contextlib
import io
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors
import pytest

from sandbox import docker_backend
from sandbox.base import AGENT_UID, SandboxConfig
from sandbox.docker_backend import DockerSandbox, remove_stale_containers
from sandbox.docker_exec_client import SOCKET_ROOT
from tests.sandbox.test_sandbox_conformance import host_processes_with

pytestmark = pytest.mark.docker

NO_PYTHON_IMAGE = "agentbench/test-no-python3:1"
# Removes the python3 command (the interpreter file stays: the layer is tiny).
NO_PYTHON_DOCKERFILE = b"""\
FROM agentbench/py-runner:0.1.0
USER root
RUN rm /usr/bin/python3 /usr/bin/python
USER agent
"""
# The exec server is the container's only python3 process.
FIND_SERVER = 'for p in /proc/[0-9]*; do grep -qsx python3 "$p/comm" && echo "${p#/proc/}"; done'


def config(tmp_path: Path, **overrides: object) -> SandboxConfig:
    fields: dict[str, object] = {
        "name": f"test-{uuid.uuid4().hex[:12]}",
        "workspace": tmp_path / f"ws-{uuid.uuid4().hex[:6]}",
        "memory_mb": 256,
        "pids_limit": 64,
        "labels": {"agentbench.attempt": f"att-{uuid.uuid4().hex[:8]}"},
    }
    fields.update(overrides)
    return SandboxConfig(**fields)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def no_python_image() -> Iterator[str]:
    client = docker.from_env()
    try:
        client.images.build(fileobj=io.BytesIO(NO_PYTHON_DOCKERFILE), tag=NO_PYTHON_IMAGE, rm=True)
        yield NO_PYTHON_IMAGE
    finally:
        # APIError: still used by a container that a failed test left.
        with contextlib.suppress(docker.errors.APIError):
            client.images.remove(NO_PYTHON_IMAGE)
        client.close()


@pytest.fixture(params=["server", "docker-exec"])
def sb(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[DockerSandbox]:
    """A sandbox on each path; docker-exec forced with the runner image."""
    sandbox = DockerSandbox(config(tmp_path), exec_server=request.param == "server")
    with sandbox:
        assert sandbox.exec_mode == request.param
        yield sandbox


# -- both paths report alike -------------------------------------------------------------


def test_it_reports_exit_code_output_env_and_working_directory(sb: DockerSandbox) -> None:
    sb.exec("mkdir -p sub", timeout=10)
    result = sb.exec(
        'echo "$FROM_EXEC $HOME"; pwd; id -u; echo err >&2; exit 3',
        timeout=10,
        cwd="sub",
        env={"FROM_EXEC": "e"},
    )
    assert (result.exit_code, result.stderr) == (3, "err\n")
    assert result.stdout == f"e /home/agent\n/workspace/sub\n{AGENT_UID}\n"
    assert not result.timed_out and not result.oom_killed


def test_the_environment_is_the_same_on_both_paths(tmp_path: Path) -> None:
    envs = []
    for use_server in (True, False):
        with DockerSandbox(config(tmp_path, env={"C": "1"}), exec_server=use_server) as sb:
            envs.append(sb.exec("env | sort", timeout=10, env={"E": "2"}).stdout)
    assert envs[0] == envs[1]
    assert "C=1\n" in envs[0] and "E=2\n" in envs[0]


def test_a_timeout_is_124_and_kills_the_command_and_its_background_jobs(
    sb: DockerSandbox,
) -> None:
    marker = f"{uuid.uuid4().int % 10**6 + 10**6}.5"
    result = sb.exec(f"sleep {marker} & sleep {marker}", timeout=0.5)
    assert (result.exit_code, result.timed_out) == (124, True)
    assert 0.5 <= result.duration_sec < 3
    deadline = time.monotonic() + 3
    while host_processes_with(f"sleep {marker}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert host_processes_with(f"sleep {marker}") == []


def test_a_missing_working_directory_is_126_with_a_message(sb: DockerSandbox) -> None:
    result = sb.exec("pwd", timeout=10, cwd="/no/such/dir")
    assert (result.exit_code, result.stdout) == (126, "")
    assert "/no/such/dir" in result.stderr


def test_a_kill_is_137_and_an_oom_kill_says_so(sb: DockerSandbox) -> None:
    killed = sb.exec("kill -9 $$", timeout=10)
    assert (killed.exit_code, killed.oom_killed, killed.timed_out) == (137, False, False)
    hog = sb.exec("tail /dev/zero", timeout=20)  # reads one endless line into memory
    assert (hog.exit_code, hog.oom_killed, hog.timed_out) == (137, True, False)


def test_output_is_capped(tmp_path: Path) -> None:
    for use_server in (True, False):
        with DockerSandbox(config(tmp_path, output_cap_bytes=1000), exec_server=use_server) as sb:
            result = sb.exec("head -c 300000 /dev/zero | tr '\\0' x; echo e >&2", timeout=10)
            assert (result.exit_code, result.truncated) == (0, True)
            assert (result.stdout, result.stderr) == ("x" * 1000, "e\n")


def test_a_process_that_leaves_the_group_does_not_hold_the_exec_open(sb: DockerSandbox) -> None:
    started = time.monotonic()
    result = sb.exec("setsid sleep 100 & echo started", timeout=30)  # keeps stdout open
    assert (result.exit_code, result.stdout) == (0, "started\n")
    assert time.monotonic() - started < 5


# -- the exec server -------------------------------------------------------------------------


def test_concurrent_commands_get_their_own_results(tmp_path: Path) -> None:
    with DockerSandbox(config(tmp_path)) as sb:
        assert sb.exec_mode == "server"
        results: dict[int, str] = {}

        def run(i: int) -> None:
            results[i] = sb.exec(f"sleep 0.{9 - i}; echo {i}", timeout=10).stdout

        threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert results == {i: f"{i}\n" for i in range(8)}
        assert time.monotonic() - started < 3  # together, not one after another


def test_a_command_the_server_cannot_start_is_126_not_an_error(tmp_path: Path) -> None:
    with DockerSandbox(config(tmp_path)) as sb:
        result = sb.exec(["echo", "a\0b"], timeout=10)
        assert (result.exit_code, result.stdout) == (126, "")
        assert "null byte" in result.stderr
        assert sb.exec_mode == "server"


def test_the_socket_directory_is_read_only_and_holds_no_socket(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    host_dir = SOCKET_ROOT / f"ab-{cfg.name}"
    with DockerSandbox(cfg) as sb:
        assert sb.exec_mode == "server"
        assert sb.exec("ls -A /run/agentbench", timeout=10).stdout == "exec_server.py\n"
        assert sb.exec("touch /run/agentbench/x", timeout=10).exit_code != 0
        assert sorted(p.name for p in host_dir.iterdir()) == ["exec_server.py"]
    assert not host_dir.exists()


def test_commands_cannot_trace_the_exec_server(tmp_path: Path) -> None:
    with DockerSandbox(config(tmp_path)) as sb:
        pid = sb.exec(FIND_SERVER, timeout=10).stdout.split()
        assert len(pid) == 1
        # Same uid, but the server is not dumpable: no /proc/<pid>/environ, mem or fd.
        for what in ("environ", "mem", "fd/0"):
            peek = sb.exec(f"head -c1 /proc/{pid[0]}/{what}", timeout=10)
            assert peek.exit_code != 0 and "Permission denied" in peek.stderr, what
        # A command is dumpable again (execve resets the flag).
        assert sb.exec("head -c1 /proc/self/environ", timeout=10).ok


def test_a_killed_server_leaves_docker_exec_and_no_lost_result(tmp_path: Path) -> None:
    with DockerSandbox(config(tmp_path)) as sb:
        killing = sb.exec(f"kill -9 $({FIND_SERVER}); echo done", timeout=10)
        assert (killing.exit_code, killing.stdout) == (0, "done\n")
        after = sb.exec("echo still here", timeout=10)
        assert (after.exit_code, after.stdout) == (0, "still here\n")
        assert sb.exec_mode == "docker-exec"


def test_a_command_that_stops_its_timeout_is_killed_at_the_hard_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(docker_backend, "HARD_DEADLINE_GRACE_SEC", 1.0)
    marker = f"{uuid.uuid4().int % 10**6 + 10**6}.25"
    with DockerSandbox(config(tmp_path)) as sb:
        started = time.monotonic()
        # The command's parent is coreutils timeout: stopped, it never fires.
        result = sb.exec(f"kill -STOP $PPID; sleep {marker}", timeout=0.5)
        assert (result.exit_code, result.timed_out) == (124, True)
        assert time.monotonic() - started < 5
        deadline = time.monotonic() + 3
        while host_processes_with(f"sleep {marker}") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert host_processes_with(f"sleep {marker}") == []
        assert sb.exec("echo usable", timeout=10).stdout == "usable\n"


def test_an_image_without_python3_falls_back_to_docker_exec(
    tmp_path: Path, no_python_image: str
) -> None:
    with DockerSandbox(config(tmp_path, image=no_python_image)) as sb:
        assert sb.exec_mode == "docker-exec"
        result = sb.exec("echo out; echo err >&2; exit 3", timeout=10)
        assert (result.exit_code, result.stdout, result.stderr) == (3, "out\n", "err\n")
        slow = sb.exec("sleep 5", timeout=0.5)
        assert (slow.exit_code, slow.timed_out) == (124, True)
    assert not (SOCKET_ROOT / f"ab-{sb.config.name}").exists()


def test_stale_container_removal_removes_the_socket_directory(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    crashed = DockerSandbox(cfg)
    crashed.start()  # a worker that died without closing
    try:
        assert (SOCKET_ROOT / f"ab-{cfg.name}").is_dir()
        assert remove_stale_containers(cfg.labels) == 1
        assert not (SOCKET_ROOT / f"ab-{cfg.name}").exists()
    finally:
        crashed.close()
