"""User-mode networking for one bubblewrap command: slirp4netns attached to its network
namespace.

The command's namespace has no route to the host: slirp4netns gives it a tap device whose
traffic slirp turns into ordinary sockets opened from the host, with ``--disable-host-loopback``
(10.0.2.2 does not lead to the host's 127.0.0.1) and as group ``host_fence.net_gid()``, which
the host firewall refuses every address of the host (sandbox/host_fence.py). DNS inside is
slirp's forwarder at 10.0.2.3.

slirp4netns runs as root with that group: joining a network namespace that bwrap's user
namespace owns takes CAP_SYS_ADMIN over it, and bwrap maps no root into that user namespace
for slirp to become. Once its tap device exists it keeps no capability but
CAP_NET_BIND_SERVICE and sits in an empty mount namespace (``--enable-sandbox``) under a
seccomp filter (``--enable-seccomp``).
"""

from __future__ import annotations

import contextlib
import os
import selectors
import shutil
import subprocess
import tempfile
import time

from sandbox import host_fence
from sandbox.errors import SandboxError

RESOLV_CONF = b"nameserver 10.0.2.3\n"
TAP = "tap0"
MTU = 65520
READY_TIMEOUT_SEC = 10.0


def unavailable_reason() -> str | None:
    if shutil.which("slirp4netns") is None:
        return "slirp4netns is not installed (apt-get install slirp4netns)"
    return None


class SlirpNetwork:
    """Started once the command's namespaces exist (bwrap is blocked on ``--block-fd``);
    closed when the command ended."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._exit_w: int | None = None
        # slirp4netns's messages, for the error when it fails; open until close().
        self._log = tempfile.TemporaryFile()  # noqa: SIM115

    def attach(self, child_pid: int) -> None:
        """Give ``child_pid``'s network namespace a configured tap device; return once slirp
        says it is ready. Raises SandboxError when it cannot."""
        reason = unavailable_reason()
        if reason:
            raise SandboxError(reason)
        ready_r, ready_w = os.pipe()
        exit_r, self._exit_w = os.pipe()
        argv = [
            "slirp4netns",
            "--configure",
            f"--mtu={MTU}",
            "--disable-host-loopback",
            "--enable-sandbox",
            "--enable-seccomp",
            f"--ready-fd={ready_w}",
            f"--exit-fd={exit_r}",
            # A path, not a pid: given a pid, slirp4netns also joins the process's current
            # user namespace, a nested one (--disable-userns) without rights over the network.
            "--netns-type=path",
            f"/proc/{child_pid}/ns/net",
            TAP,
        ]
        try:
            self._proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=self._log,
                pass_fds=(ready_w, exit_r),
                start_new_session=True,
                group=host_fence.net_gid(),
                extra_groups=[],
            )
        except OSError as exc:
            os.close(ready_r)
            raise SandboxError(f"cannot start slirp4netns: {exc}") from exc
        finally:
            os.close(ready_w)
            os.close(exit_r)
        try:
            ready = _read_byte(ready_r, READY_TIMEOUT_SEC)
        finally:
            os.close(ready_r)
        if not ready:
            detail = self._log_tail()
            self.close()
            raise SandboxError(f"slirp4netns could not attach the network: {detail}")

    def close(self) -> None:
        if self._exit_w is not None:
            os.close(self._exit_w)  # slirp4netns exits when its exit fd closes
            self._exit_w = None
        if self._proc is not None:
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None
        self._log.close()

    def _log_tail(self) -> str:
        with contextlib.suppress(OSError, ValueError):
            self._log.seek(0)
            lines = self._log.read().decode(errors="replace").strip().splitlines()
            return " | ".join(lines[-5:]) if lines else "no message"
        return "no message"


def _read_byte(fd: int, timeout: float) -> bool:
    """True once one byte arrives on ``fd``; False at end of file or after ``timeout``."""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while (remaining := deadline - time.monotonic()) > 0:
            if sel.select(remaining):
                return bool(os.read(fd, 1))
    return False
