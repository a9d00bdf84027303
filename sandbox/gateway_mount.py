"""A model gateway's way into a sandbox: a Unix socket folder and a forwarder per exec.

The gateway (runs/gateway/) listens on a Unix socket in a host folder of its own. A sandbox
whose config carries a ``GatewayMount`` gets that folder read-only at ``MOUNT_POINT`` and the
forwarder binary read-only at ``FORWARDER_PATH`` (Docker: two volumes; bubblewrap: two
``--ro-bind`` over a tmpfs ``/run``), and every exec runs as

    /run/ab-gateway-forward PORT /run/ab-gateway/gateway.sock -- COMMAND...

so the command finds the gateway at ``http://127.0.0.1:PORT`` while its network namespace has
nothing but loopback (``sandbox/gateway_forward.c`` says how the forwarder behaves).

The forwarder is a static C binary built once from ``gateway_forward.c`` with the host's gcc
into a content-keyed cache (``GATEWAY_FORWARDER_CACHE``, default
``/var/lib/agentbench/gateway-forward/<hash of the source and flags>/forward``): static, it
runs in every image we use (the runner image, the offline SWE-bench trees, an image without
Python or with another libc), where a Python forwarder would need a ``python3`` on the path of
each (the SWE-bench trees keep theirs under conda).
"""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from sandbox.base import AGENT_UID
from sandbox.errors import SandboxError

MOUNT_POINT = "/run/ab-gateway"
FORWARDER_PATH = "/run/ab-gateway-forward"
SOCKET_NAME = "gateway.sock"
# Where the CLI finds the gateway inside the sandbox; any free high port would do.
DEFAULT_PORT = 47611
DEFAULT_CACHE = Path("/var/lib/agentbench/gateway-forward")
# The gateways' socket folders on the host, one per gateway (GATEWAY_SOCKET_ROOT overrides).
DEFAULT_SOCKET_ROOT = Path("/run/agentbench/gateway")
SOURCE = Path(__file__).with_name("gateway_forward.c")
CFLAGS = ("-static", "-Os", "-s", "-Wall", "-Wextra", "-Werror", "-std=gnu11")


@dataclass(frozen=True, slots=True)
class GatewayMount:
    """What a sandbox needs to expose a gateway: the host folder holding its socket, the
    forwarder binary on the host, and the loopback port the forwarder listens on inside."""

    host_dir: Path
    forwarder: Path
    port: int = DEFAULT_PORT

    @property
    def base_url(self) -> str:
        """The gateway's URL as commands in the sandbox see it."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def socket_path(self) -> str:
        """The socket's path inside the sandbox."""
        return f"{MOUNT_POINT}/{SOCKET_NAME}"

    @property
    def active(self) -> bool:
        """Whether the gateway still serves: once it is closed (its folder removed), execs run
        as in any sandbox, without forwarder or mounts (bubblewrap could not bind a folder that
        is gone; the sandbox outlives the agent stage for the final tests)."""
        return (self.host_dir / SOCKET_NAME).exists()

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` run under the forwarder (what every exec of the sandbox runs)."""
        return [FORWARDER_PATH, str(self.port), self.socket_path, "--", *argv]

    def docker_volumes(self) -> dict[str, dict[str, str]]:
        return {
            str(self.host_dir): {"bind": MOUNT_POINT, "mode": "ro"},
            str(self.forwarder): {"bind": FORWARDER_PATH, "mode": "ro"},
        }

    def bwrap_args(self) -> list[str]:
        # The rootfs is read-only: the mount points are made in a tmpfs over /run (which every
        # Debian-based tree has; nothing in a sandbox relies on what it holds).
        return [
            "--tmpfs",
            "/run",
            "--ro-bind",
            str(self.host_dir),
            MOUNT_POINT,
            "--ro-bind",
            str(self.forwarder),
            FORWARDER_PATH,
        ]


def socket_root() -> Path:
    """Where gateways make their socket folders: ``GATEWAY_SOCKET_ROOT``, else
    ``/run/agentbench/gateway``."""
    return Path(os.environ.get("GATEWAY_SOCKET_ROOT") or DEFAULT_SOCKET_ROOT)


def owner_of(folder_name: str) -> str:
    """The owner a socket folder's name carries (``<owner>.<random>``; "" for none)."""
    owner, dot, _ = folder_name.rpartition(".")
    return owner if dot else ""


def make_socket_dir(owner: str = "") -> Path:
    """A fresh host folder for a gateway's socket, ``socket_root()/<owner>.<random>`` (an
    attempt opens a gateway per try; the owner, its public id, tells the reaper whose it is),
    reachable by the sandbox user alone (and root): ``root:AGENT_UID`` mode 0750 when we are
    root. Elsewhere (tests as a normal user) a private temporary folder that bubblewrap,
    running as the same user, can bind."""
    name = secrets.token_hex(8)
    if owner:
        if "/" in owner or owner.startswith("."):
            raise ValueError(f"a gateway owner cannot be a path: {owner!r}")
        name = f"{owner}.{name}"
    if os.geteuid() != 0:
        return Path(tempfile.mkdtemp(prefix=f"ab-gateway-{name}-"))
    root = socket_root()
    directory = root / name
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)
    directory.mkdir(mode=0o750)
    os.chown(directory, 0, AGENT_UID)
    directory.chmod(0o750)  # whatever the umask
    return directory


def share_socket(path: Path) -> None:
    """Let the sandbox user connect to the socket at ``path`` (connect needs write access)."""
    if os.geteuid() == 0:
        os.chown(path, 0, AGENT_UID)
        path.chmod(0o660)


def cache_root() -> Path:
    return Path(os.environ.get("GATEWAY_FORWARDER_CACHE") or DEFAULT_CACHE)


def source_key() -> str:
    """The cache key: the source and the flags it is built with."""
    digest = hashlib.sha256(SOURCE.read_bytes())
    digest.update(" ".join(CFLAGS).encode())
    return digest.hexdigest()[:16]


def forwarder_binary(root: Path | None = None) -> Path:
    """The forwarder built from ``gateway_forward.c``: from the cache, or built into it now
    (under a second; needs gcc and a static libc, Debian's ``gcc`` and ``libc6-dev``)."""
    target = (root or cache_root()) / source_key() / "forward"
    if target.is_file():
        return target
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        raise SandboxError(
            "cannot build the gateway forwarder: no C compiler (apt-get install gcc libc6-dev)"
        )
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        # Built beside the target and renamed over it: a concurrent build never exposes half a
        # file.
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".build-")
    except OSError as exc:
        raise SandboxError(
            f"cannot build the gateway forwarder into {target.parent}: {exc.strerror} "
            "(set GATEWAY_FORWARDER_CACHE to a writable folder)"
        ) from exc
    os.close(fd)
    try:
        done = subprocess.run(
            [compiler, *CFLAGS, "-o", tmp, str(SOURCE)], capture_output=True, text=True
        )
        if done.returncode != 0:
            raise SandboxError(
                f"cannot build the gateway forwarder ({compiler} exit {done.returncode}): "
                f"{done.stderr.strip()[-2000:]}"
            )
        os.chmod(tmp, 0o755)
        os.replace(tmp, target)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return target
