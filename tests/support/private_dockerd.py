"""A private Docker engine for tests that stop or kill the engine: the shared one serves every
other test on this machine and must never go away.

It has its own data root, exec root, pid file and socket, runs in a network namespace of its
own (with no bridge and no iptables rules: sandboxes on it run without network), so nothing it
does reaches the shared engine's network. The runner image is loaded into it from a
``docker save`` of the shared engine's, cached under /var/lib/agentbench/cache keyed by the
image id; its data root is kept there too, so the image is loaded once per machine.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

CACHE = Path("/var/lib/agentbench/cache")
IMAGE = "agentbench/py-runner:0.1.0"
START_TIMEOUT_SEC = 60


class PrivateDockerd:
    def __init__(self, root: Path, run_dir: Path):
        self.root = root  # data root, kept between sessions
        self.run_dir = run_dir  # socket, exec root, pid file, log: this session only
        self.socket = run_dir / "docker.sock"
        self.url = f"unix://{self.socket}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.run_dir / "dockerd.log", "ab")  # noqa: SIM115 (the daemon keeps it)
        self.proc = subprocess.Popen(
            [
                # Its own network namespace: a dockerd without a bridge deletes any "docker0"
                # it sees, and the shared engine's must stay.
                "unshare",
                "--net",
                "dockerd",
                "--data-root",
                str(self.root / "data"),
                "--exec-root",
                str(self.run_dir / "exec"),
                "--pidfile",
                str(self.run_dir / "docker.pid"),
                "-H",
                self.url,
                "--bridge=none",
                "--iptables=false",
                "--ip-masq=false",
                "--storage-driver=overlay2",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + START_TIMEOUT_SEC
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"private dockerd exited: see {self.run_dir}/dockerd.log")
            with contextlib.suppress(Exception):
                client = self.client()
                try:
                    client.ping()
                    return
                finally:
                    client.close()
            time.sleep(0.2)
        raise RuntimeError("private dockerd did not answer in time")

    def client(self) -> docker.DockerClient:
        return docker.DockerClient(base_url=self.url, timeout=60)

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> None:
        """Stop the engine (SIGTERM: it stops its containers first) and wait for it, and for
        the containerd it started, to exit."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        # Its own containerd (same session) follows it; wait so a restart finds no stale lock.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        for _ in range(100):
            try:
                os.killpg(self.proc.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        self.proc = None

    def ensure_image(self, shared: docker.DockerClient) -> None:
        """The shared engine's runner image, loaded here (from a cached ``docker save``)."""
        image_id = shared.images.get(IMAGE).id
        client = self.client()
        try:
            with contextlib.suppress(docker.errors.ImageNotFound):
                if client.images.get(IMAGE).id == image_id:
                    return
            tarball = CACHE / f"py-runner-{image_id.split(':')[-1][:16]}.tar"
            if not tarball.exists():
                CACHE.mkdir(parents=True, exist_ok=True)
                partial = tarball.with_suffix(".partial")
                with open(partial, "wb") as out:
                    for chunk in shared.images.get(IMAGE).save(named=True):
                        out.write(chunk)
                partial.rename(tarball)
            with open(tarball, "rb") as data:
                client.images.load(data)
        finally:
            client.close()


@pytest.fixture(scope="module")
def private_dockerd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateDockerd]:
    """A running private engine with the runner image; DOCKER_HOST is NOT set (tests set it
    with monkeypatch, so nothing else in the session talks to this engine)."""
    shared = docker.from_env()
    try:
        shared.ping()
    except Exception as exc:
        shared.close()
        pytest.fail(f"the shared Docker engine does not answer: {exc}")
    CACHE.mkdir(parents=True, exist_ok=True)
    lock = open(CACHE / "private-dockerd.lock", "w")  # noqa: SIM115 (held for the module)
    fcntl.flock(lock, fcntl.LOCK_EX)  # one private engine per data root at a time
    # A short path: the socket's path must fit in sun_path (108 bytes).
    run_dir = Path(tmp_path_factory.mktemp("dockerd"))
    engine = PrivateDockerd(CACHE / "private-dockerd", run_dir)
    try:
        engine.start()
        engine.ensure_image(shared)
        yield engine
    finally:
        engine.stop()
        # dockerd bind-mounts its data root onto itself (private propagation) and leaves that
        # mount when it is killed, as these tests do; the last stop unmounts it.
        # (A bind mount on the same filesystem: os.path.ismount cannot see it, /proc can.)
        data = str(engine.root / "data")
        if any(
            line.split()[1] == data for line in Path("/proc/self/mounts").read_text().splitlines()
        ):
            subprocess.run(["umount", data], check=False)
        shared.close()
        lock.close()
