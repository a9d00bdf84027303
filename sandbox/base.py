"""The one sandbox interface every backend implements (see
tests/sandbox/test_sandbox_conformance.py).

A sandbox is a context manager: entering starts it, leaving always tears it down. Commands run
with a workspace directory as their only writable place besides a tmpfs /tmp.
"""

from __future__ import annotations

import abc
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Final, Literal

if TYPE_CHECKING:  # sandbox.gateway_mount imports this module (AGENT_UID)
    from sandbox.gateway_mount import GatewayMount

log = logging.getLogger(__name__)

TIMEOUT_EXIT_CODE = 124
# ``exec(network=BLACKHOLE)``: a network that silently drops everything (sandbox/blackhole.py).
BLACKHOLE: Final = "blackhole"
# What ``exec(network=...)`` takes: False (no network), True (the internet, never the host) or
# BLACKHOLE.
ExecNetwork = bool | Literal["blackhole"]
KILLED_EXIT_CODE = 137
DEFAULT_AGENT_UID = 64000


def _agent_uid() -> int:
    raw = os.environ.get("SANDBOX_UID", "").strip()
    return int(raw) if raw else DEFAULT_AGENT_UID


# The uid (and gid) commands run as in every backend, named ``agent`` inside the sandbox; the
# workspace is handed to it. It must have no account on the host (sandbox.accounts checks): a
# process that escapes lands on a uid that owns nothing there. ``SANDBOX_UID`` overrides it.
AGENT_UID = _agent_uid()


@dataclass(frozen=True, slots=True)
class ExecResult:
    exit_code: int
    stdout: str
    stderr: str
    duration_sec: float
    timed_out: bool = False
    oom_killed: bool = False
    # True when stdout or stderr was cut at the configured output cap.
    truncated: bool = False
    # True when the sandbox's disk quota (workspace, /tmp, home) was full as the command ended.
    disk_full: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


# Where read-only mounts go inside a sandbox: an empty folder every Debian image has, so the
# bubblewrap backend can put a tmpfs over it to make the mount points (its root is read-only).
READONLY_MOUNT_ROOT = "/mnt"


@dataclass(frozen=True, slots=True)
class ReadOnlyMount:
    """A host folder seen read-only inside the sandbox (an agent CLI's install, say)."""

    source: Path
    target: str  # inside the sandbox, under READONLY_MOUNT_ROOT

    def __post_init__(self) -> None:
        parts = self.target.split("/")
        if not self.target.startswith(READONLY_MOUNT_ROOT + "/") or ".." in parts:
            raise ValueError(f"a read-only mount goes under {READONLY_MOUNT_ROOT}/: {self.target}")


@dataclass(frozen=True, slots=True)
class SandboxConfig:
    """How to build one sandbox. ``name`` is deterministic (e.g. from the attempt's public id)."""

    name: str
    workspace: Path  # host directory mounted (or bound) at ``workspace_path`` inside
    image: str = "agentbench/py-runner:0.1.0"
    workspace_path: str = "/workspace"
    memory_mb: int = 2048
    cpus: float = 1.0
    pids_limit: int = 256
    output_cap_bytes: int = 1_000_000
    labels: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    # False: no command of this sandbox may use the network (``exec(network=True)`` raises), so
    # the backend need not prepare any (Docker creates the container with no network at all).
    allow_network: bool = True
    # The disk quota in MiB for everything the sandbox may write (workspace, /tmp, home): one
    # filesystem of that size (sandbox/disk.py). None: no quota (tmpfs /tmp and home).
    disk_mb: int | None = None
    # Files (inodes) that filesystem holds, whatever their size: empty files cost the host's
    # later walks of the tree (git, the patch, its page) per file, not per byte. None: mkfs's
    # own count for the size (one per 16 KiB: 655,360 for 10 GiB).
    disk_files: int | None = None
    # With a quota, copy the workspace's tree back into ``workspace`` at close (False when the
    # caller deletes it anyway).
    disk_copy_back: bool = True
    # Host folders mounted read-only (Docker ``:ro`` bind mounts, bubblewrap ``--ro-bind``).
    readonly_mounts: tuple[ReadOnlyMount, ...] = ()
    # A model gateway to expose (runs/gateway/): its socket folder is mounted in and every exec
    # runs under a forwarder serving it at ``gateway.base_url`` (sandbox/gateway_mount.py).
    gateway: GatewayMount | None = None

    def resolve_cwd(self, cwd: str | None) -> str:
        """A command's working directory inside the sandbox: relative ones are taken from the
        workspace, none is the workspace."""
        if cwd is None:
            return self.workspace_path
        if cwd.startswith("/"):
            return cwd
        return f"{self.workspace_path.rstrip('/')}/{cwd}"


class Sandbox(abc.ABC):
    """Start on ``__enter__``, always clean up on ``__exit__`` (also after exceptions)."""

    backend: str = "abstract"

    def __init__(self, config: SandboxConfig):
        self.config = config
        # What bounds the sandbox's disk use, once started: the quota, or why there is none.
        self.disk_quota = "none (not asked for)"

    @abc.abstractmethod
    def start(self) -> None: ...

    @abc.abstractmethod
    def close(self) -> None:
        """Remove everything the sandbox started. Safe to call twice."""

    @abc.abstractmethod
    def exec(
        self,
        cmd: str | list[str],
        *,
        timeout: float,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        network: ExecNetwork = False,
    ) -> ExecResult:
        """Run a command (a string goes through ``sh -c``). A timeout gives exit 124 and
        ``timed_out``; an OOM kill or SIGKILL gives 137. ``network``: False, loopback only;
        True, the internet but never the host; ``BLACKHOLE``, a default route whose packets
        are dropped (connects time out, DNS gets no answer; loopback only where the host
        cannot set it up)."""

    @abc.abstractmethod
    def read_file(self, path: str) -> bytes: ...

    @abc.abstractmethod
    def write_file(self, path: str, content: bytes | str) -> None: ...

    @abc.abstractmethod
    def copy_in(self, host_dir: Path, sandbox_dir: str) -> None: ...

    @abc.abstractmethod
    def copy_out(self, sandbox_dir: str, host_dir: Path) -> None: ...

    def __enter__(self) -> Sandbox:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None:
            self.close()
            return
        # Leaving on an error: that error is what went wrong (an engine gone mid-command, say),
        # not the clean-up that fails after it for the same reason.
        try:
            self.close()
        except Exception as close_error:
            log.warning(
                "closing sandbox %s after an error failed too: %s", self.config.name, close_error
            )
