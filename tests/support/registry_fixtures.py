"""A real image registry on loopback for the tests: Debian's ``docker-registry`` (the
distribution project's registry:2) started on 127.0.0.1:<free port> with a storage folder of
its own, optionally behind htpasswd basic auth, stopped at teardown.

The engine talks plain http to it: Docker trusts 127.0.0.0/8 as an insecure registry by
default (``docker info``: Insecure Registries). Images are seeded by ``push``: tagged under
the registry's host, pushed, and the tag removed again, so the engine holds the image only
under its own name and a test that pulls really pulls."""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REGISTRY_BIN = "/usr/bin/docker-registry"


@dataclass
class LocalRegistry:
    host: str  # 127.0.0.1:<port>
    storage: Path
    process: subprocess.Popen

    def push(self, image: str, name: str) -> str:
        """Push local ``image`` as ``<host>/<name>``; returns its repository digest
        (``<host>/<repo>@sha256:...``). The engine keeps no tag under the registry's name."""
        target = f"{self.host}/{name}"
        subprocess.run(["docker", "tag", image, target], check=True, capture_output=True)
        try:
            done = subprocess.run(["docker", "push", target], capture_output=True, text=True)
            assert done.returncode == 0, done.stderr
            digest = next(
                word
                for line in done.stdout.splitlines()
                for word in line.split()
                if word.startswith("sha256:")
            )
        finally:
            # The push gave the image a RepoDigest under the registry's name: drop both.
            subprocess.run(["docker", "image", "rm", target], capture_output=True)
        return f"{target.rsplit(':', 1)[0]}@{digest}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def local_registry(folder: Path, *, users: dict[str, str] | None = None) -> Iterator[LocalRegistry]:
    """A registry serving from ``folder``; ``users`` (name -> password): basic auth."""
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    lines = [
        "version: 0.1",
        "log: {level: warn}",
        f"storage: {{filesystem: {{rootdirectory: {folder / 'data'}}}, delete: {{enabled: true}}}}",
        f"http: {{addr: '127.0.0.1:{port}', secret: {uuid.uuid4().hex}}}",
    ]
    if users:
        htpasswd = folder / "htpasswd"
        for number, (user, password) in enumerate(users.items()):
            flags = "-Bbc" if number == 0 else "-Bb"
            subprocess.run(
                ["htpasswd", flags, str(htpasswd), user, password], check=True, capture_output=True
            )
        lines.append(f"auth: {{htpasswd: {{realm: test, path: {htpasswd}}}}}")
    config = folder / "config.yml"
    config.write_text("\n".join(lines) + "\n")
    log = open(folder / "registry.log", "w")  # noqa: SIM115 (closed below)
    process = subprocess.Popen([REGISTRY_BIN, "serve", str(config)], stdout=log, stderr=log)
    registry = LocalRegistry(f"127.0.0.1:{port}", folder, process)
    try:
        _wait_ready(registry)
        yield registry
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def _wait_ready(registry: LocalRegistry) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(f"http://{registry.host}/v2/", timeout=2)
            return
        except urllib.error.HTTPError as exc:
            if exc.code == 401:  # behind auth: up all the same
                return
        except OSError:
            pass
        if registry.process.poll() is not None:
            log = (registry.storage / "registry.log").read_text()
            raise RuntimeError(f"docker-registry exited: {log[-2000:]}")
        if time.monotonic() > deadline:
            raise RuntimeError("docker-registry did not answer within 30 s")
        time.sleep(0.1)


def tiny_image(tag: str, folder: Path, marker: str) -> str:
    """A one-file image (``/etc/marker`` holding ``marker``; not runnable) made by
    ``docker import``; returns its ID."""
    tree = folder / "tree"
    (tree / "etc").mkdir(parents=True, exist_ok=True)
    (tree / "etc/marker").write_text(marker + "\n")
    archive = folder / "tree.tar"
    subprocess.run(["tar", "-C", str(tree), "-cf", str(archive), "."], check=True)
    done = subprocess.run(
        ["docker", "import", str(archive), tag], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def with_architecture(image: str, tag: str, architecture: str, folder: Path) -> None:
    """Load ``image`` again as ``tag`` with an image configuration saying ``architecture``
    (the files stay what they are: the engine runs nothing of it)."""
    import json
    import tarfile

    work = folder / f"arch-{architecture}"
    work.mkdir(parents=True, exist_ok=True)
    saved = work / "saved.tar"
    subprocess.run(["docker", "save", "-o", str(saved), image], check=True)
    with tarfile.open(saved) as archive:
        archive.extractall(work / "x", filter="data")
    manifest = json.loads((work / "x/manifest.json").read_text())
    config = json.loads((work / "x" / manifest[0]["Config"]).read_text())
    config["architecture"] = architecture
    name = "arch-config.json"
    (work / "x" / name).write_text(json.dumps(config))
    manifest[0]["Config"] = name
    manifest[0]["RepoTags"] = [tag]
    (work / "x/manifest.json").write_text(json.dumps(manifest))
    (work / "x/repositories").unlink(missing_ok=True)
    loaded = work / "loaded.tar"
    subprocess.run(["tar", "-C", str(work / "x"), "-cf", str(loaded), "."], check=True)
    subprocess.run(["docker", "load", "-q", "-i", str(loaded)], check=True, capture_output=True)
