"""Backend choice, Docker container hardening and naming, stale-container removal, image export
and the bubblewrap limits, all against the real engine and the real bwrap (what the
conformance suite does not cover because it is backend specific)."""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from sandbox import available_backends, open_sandbox
from sandbox.base import AGENT_UID, SandboxConfig
from sandbox.bwrap_backend import BwrapSandbox, default_rootfs
from sandbox.docker_backend import DockerSandbox, remove_stale_containers
from sandbox.docker_engine import EXPORT_LABEL, MANAGED_LABEL
from sandbox.docker_images import export_image_dir, remove_stale_export_containers
from sandbox.errors import SandboxError, SandboxUnavailable
from tests.support.backends import backend_params
from tests.support.private_dockerd import PrivateDockerd

UNREACHABLE_DOCKER = "unix:///nonexistent/docker.sock"


def config(tmp_path: Path, **overrides: object) -> SandboxConfig:
    fields: dict[str, object] = {
        "name": f"test-{uuid.uuid4().hex[:12]}",
        "workspace": tmp_path / "ws",
        "memory_mb": 256,
        "pids_limit": 64,
        "labels": {"agentbench.attempt": f"att-{uuid.uuid4().hex[:8]}"},
    }
    fields.update(overrides)
    return SandboxConfig(**fields)  # type: ignore[arg-type]


@pytest.fixture
def engine() -> Iterator[docker.DockerClient]:
    client = docker.from_env()
    yield client
    client.close()


# -- choosing a backend --------------------------------------------------------------------


@pytest.mark.docker
@pytest.mark.bwrap
def test_both_backends_are_available_here() -> None:
    assert available_backends() == {"docker": None, "bwrap": None}


@pytest.mark.docker
def test_auto_prefers_docker_when_its_engine_answers(tmp_path: Path) -> None:
    assert open_sandbox(config(tmp_path)).backend == "docker"


@pytest.mark.bwrap
def test_auto_falls_back_to_bubblewrap_without_docker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", UNREACHABLE_DOCKER)
    reasons = available_backends()
    assert reasons["docker"] is not None and "does not answer" in reasons["docker"]
    with open_sandbox(config(tmp_path)) as sb:
        assert sb.backend == "bwrap"
        assert sb.exec("echo ok", timeout=10).stdout == "ok\n"


def test_it_says_why_when_no_backend_can_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", UNREACHABLE_DOCKER)
    with pytest.raises(SandboxUnavailable) as caught:
        open_sandbox(config(tmp_path), bwrap_rootfs=tmp_path / "no-rootfs")
    message = str(caught.value)
    assert "docker: the Docker engine does not answer" in message
    assert f"bwrap: no runner rootfs at {tmp_path / 'no-rootfs'}" in message
    assert "Traceback" not in message


def test_it_rejects_an_unknown_backend_name(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown sandbox backend 'podman'"):
        open_sandbox(config(tmp_path), "podman")


def test_a_named_backend_that_cannot_run_raises_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", UNREACHABLE_DOCKER)
    with pytest.raises(SandboxUnavailable, match="docker: the Docker engine does not answer"):
        open_sandbox(config(tmp_path), "docker")


# -- Docker ----------------------------------------------------------------------------------


@pytest.mark.docker
def test_the_container_is_named_labelled_and_hardened(
    tmp_path: Path, engine: docker.DockerClient
) -> None:
    cfg = config(tmp_path, cpus=0.5)
    with DockerSandbox(cfg) as sb:
        container = engine.containers.get(f"ab-{cfg.name}")
        assert container.labels[MANAGED_LABEL] == "1"
        assert container.labels["agentbench.attempt"] == cfg.labels["agentbench.attempt"]
        host = container.attrs["HostConfig"]
        assert host["CapDrop"] == ["ALL"]
        assert host["SecurityOpt"] == ["no-new-privileges"]
        assert host["PidsLimit"] == 64
        assert host["Memory"] == host["MemorySwap"] == 256 * 1024 * 1024
        assert host["NanoCpus"] == 500_000_000
        assert host["ReadonlyRootfs"] is True
        assert set(host["Tmpfs"]) == {"/tmp", "/home/agent"}
        assert container.attrs["Config"]["User"] == f"{AGENT_UID}:{AGENT_UID}"
        # Created on the bridge, disconnected before the first command.
        assert container.attrs["NetworkSettings"]["Networks"] == {}
        caps = sb.exec("grep CapEff /proc/self/status", timeout=10).stdout.split()
        assert caps == ["CapEff:", "0000000000000000"]
        assert sb.exec("cat /proc/net/dev | grep -c :", timeout=10).stdout == "1\n"  # lo only


@pytest.mark.docker
def test_a_leftover_container_with_the_same_name_is_replaced(
    tmp_path: Path, engine: docker.DockerClient
) -> None:
    cfg = config(tmp_path)
    crashed = DockerSandbox(cfg)
    crashed.start()  # a worker that died without closing
    first_id = engine.containers.get(f"ab-{cfg.name}").id
    with DockerSandbox(cfg) as sb:
        assert engine.containers.get(f"ab-{cfg.name}").id != first_id
        assert sb.exec("true", timeout=10).ok
    crashed.close()


@pytest.mark.docker
def test_it_refuses_to_replace_a_container_it_does_not_own(
    tmp_path: Path, engine: docker.DockerClient
) -> None:
    cfg = config(tmp_path)
    foreign = engine.containers.create(
        "agentbench/py-runner:0.1.0", ["true"], name=f"ab-{cfg.name}"
    )
    try:
        with pytest.raises(SandboxError, match="is not AgentBench's"), DockerSandbox(cfg):
            pass
        foreign.reload()  # still there
    finally:
        foreign.remove(force=True)


@pytest.mark.docker
def test_a_missing_image_is_a_clear_sandbox_error(tmp_path: Path) -> None:
    cfg = config(tmp_path, image="agentbench/does-not-exist:0")
    with pytest.raises(SandboxError, match="image agentbench/does-not-exist:0 is not on"):
        DockerSandbox(cfg).start()


@pytest.mark.docker
def test_remove_stale_containers_removes_only_matching_managed_ones(
    tmp_path: Path, engine: docker.DockerClient
) -> None:
    worker = f"worker-{uuid.uuid4().hex[:8]}"
    crashed = [
        DockerSandbox(config(tmp_path / str(i), labels={"agentbench.worker": worker}))
        for i in range(2)
    ]
    other = DockerSandbox(config(tmp_path / "other", labels={"agentbench.worker": "someone"}))
    for sb in [*crashed, other]:
        sb.start()
    try:
        assert remove_stale_containers({"agentbench.worker": worker}) == 2
        assert remove_stale_containers({"agentbench.worker": worker}) == 0
        names = {c["Names"][0].lstrip("/") for c in engine.api.containers(all=True)}
        assert not {f"ab-{sb.config.name}" for sb in crashed} & names
        assert f"ab-{other.config.name}" in names
    finally:
        for sb in [*crashed, other]:
            sb.close()


def test_remove_stale_containers_without_an_engine_removes_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DOCKER_HOST", UNREACHABLE_DOCKER)
    assert remove_stale_containers({"agentbench.worker": "any"}) == 0


@pytest.mark.docker
def test_export_image_dir_copies_a_directory_out_without_running_it(
    tmp_path: Path, engine: docker.DockerClient
) -> None:
    dest = tmp_path / "pytest"
    before = export_containers(engine, os.getpid())
    export_image_dir("agentbench/py-runner:0.1.0", "/usr/lib/python3/dist-packages/_pytest", dest)
    # The image was imported from the bwrap rootfs: the same files, byte for byte.
    source = default_rootfs() / "usr/lib/python3/dist-packages/_pytest"
    exported = sorted(p.relative_to(dest) for p in dest.rglob("*"))
    assert exported == sorted(p.relative_to(source) for p in source.rglob("*"))
    assert (dest / "python_api.py").read_bytes() == (source / "python_api.py").read_bytes()
    # Its own container is gone (others may be left by killed processes of other tests).
    assert export_containers(engine, os.getpid()) <= before


@pytest.mark.docker
def test_export_image_dir_stops_at_its_byte_cap(
    tmp_path: Path, engine: docker.DockerClient
) -> None:
    """A testbed that could not fit the sandbox's disk quota is refused while it streams."""
    before = export_containers(engine, os.getpid())
    with pytest.raises(SandboxError, match=r"^\[disk-quota\] /usr/lib/python3 of .* is over"):
        export_image_dir(
            "agentbench/py-runner:0.1.0", "/usr/lib/python3", tmp_path / "out", max_bytes=100_000
        )
    written = sum(p.stat().st_size for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert written <= 100_000
    assert export_containers(engine, os.getpid()) <= before


def export_containers(engine: docker.DockerClient, pid: int | None = None) -> set[str]:
    """Export containers on the engine; with ``pid``, only those that process made (the
    workers of a parallel test run export at the same time)."""
    label = EXPORT_LABEL if pid is None else f"{EXPORT_LABEL}={pid}"
    return {c["Id"] for c in engine.api.containers(all=True, filters={"label": label})}


@pytest.mark.docker
def test_it_removes_export_containers_a_killed_process_left(
    private_dockerd: PrivateDockerd, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On an engine of its own: on the shared one, removing every export container would
    # remove those other tests are streaming from at the same time.
    monkeypatch.setenv("DOCKER_HOST", private_dockerd.url)
    engine = private_dockerd.client()
    try:
        # What a worker SIGKILLed between create and remove leaves: a Created export container.
        left = engine.containers.create(
            "agentbench/py-runner:0.1.0", command=["true"], labels={EXPORT_LABEL: "1"}
        )
        remove_stale_export_containers(older_than_sec=3600)  # too young: kept
        assert left.id in export_containers(engine)
        assert remove_stale_export_containers(older_than_sec=0) >= 1
        assert left.id not in export_containers(engine)
    finally:
        engine.close()


@pytest.mark.docker
def test_export_image_dir_reports_a_missing_path(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="cannot export /no/such/dir"):
        export_image_dir("agentbench/py-runner:0.1.0", "/no/such/dir", tmp_path / "out")


# -- bubblewrap --------------------------------------------------------------------------------


def cgroup_dirs(name: str) -> list[Path]:
    """The sandbox's cgroup directories (one per controller with v1, one with v2)."""
    root = Path("/sys/fs/cgroup")
    return [*root.glob(f"*/agentbench/ab-{name}"), *root.glob(f"agentbench/ab-{name}")]


@pytest.mark.bwrap
def test_bwrap_limits_live_in_a_per_sandbox_cgroup(tmp_path: Path) -> None:
    cfg = config(tmp_path, cpus=0.5)
    with BwrapSandbox(cfg) as sb:
        assert sb.limits_mode in ("cgroup-v1", "cgroup-v2")
        dirs = cgroup_dirs(cfg.name)
        pids = next(d for d in dirs if (d / "pids.max").exists())
        assert (pids / "pids.max").read_text().strip() == "64"
        memory = next(
            d
            for d in dirs
            if {"memory.max", "memory.limit_in_bytes"} & {p.name for p in d.iterdir()}
        )
        limit = memory / (
            "memory.max" if sb.limits_mode == "cgroup-v2" else "memory.limit_in_bytes"
        )
        assert int(limit.read_text()) == 256 * 1024 * 1024
        # A running command is counted in the group (the spawner, bwrap, its init, sleep...).
        running = threading.Thread(target=sb.exec, args=("sleep 1",), kwargs={"timeout": 10})
        running.start()
        time.sleep(0.5)
        assert int((pids / "pids.current").read_text()) >= 3
        running.join()
        caps = sb.exec("grep CapEff /proc/self/status", timeout=10).stdout.split()
        assert caps == ["CapEff:", "0000000000000000"]
        nested = sb.exec("unshare -U true", timeout=10)
        assert nested.exit_code != 0  # no user namespaces inside
    assert cgroup_dirs(cfg.name) == []


@pytest.mark.parametrize("backend", backend_params())
def test_a_missing_working_directory_is_exit_126_with_a_message(
    backend: str, tmp_path: Path
) -> None:
    with open_sandbox(config(tmp_path), backend) as sb:
        result = sb.exec("pwd", timeout=10, cwd="/no/such/dir")
    assert result.exit_code == 126
    assert "/no/such/dir" in result.stderr
    assert result.stdout == ""


FORKER = (
    "import os, time\n"
    "n = 0\n"
    "try:\n"
    "    for _ in range(1000):\n"
    "        if os.fork() == 0:\n"
    "            time.sleep(30)\n"
    "            os._exit(0)\n"
    "        n += 1\n"
    "except OSError as exc:\n"
    "    print(n, exc.errno)\n"
)


@pytest.mark.bwrap
def test_bwrap_without_cgroups_falls_back_to_rlimits(tmp_path: Path) -> None:
    with BwrapSandbox(config(tmp_path), use_cgroups=False) as sb:
        assert sb.limits_mode == "rlimit"
        forked, errno_ = sb.exec(["python3", "-c", FORKER], timeout=10).stdout.split()
        assert int(forked) < 64 and int(errno_) == 11  # RLIMIT_NPROC: EAGAIN
        # RLIMIT_AS makes an allocation fail instead of the OOM killer stepping in.
        hog = sb.exec(["python3", "-c", "x = bytearray(600 * 1024 * 1024)"], timeout=10)
        assert hog.exit_code == 1 and "MemoryError" in hog.stderr
        slow = sb.exec("sleep 10", timeout=0.5)
        assert slow.exit_code == 124 and slow.timed_out
    assert cgroup_dirs(sb.config.name) == []
