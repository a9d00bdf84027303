"""A tiny per-sandbox process that starts bwrap on request.

Why: a process only inherits a cgroup for free when it is forked inside it; moving one in
afterwards costs the kernel an RCU grace period (milliseconds per controller under cgroup v1).
The spawner is moved into the sandbox's cgroup once, at start, and every exec's bwrap is forked
from it, so execs pay no migration. Forking from a small process instead of the (large) worker
is cheaper too.

Protocol over a Unix stream socket (its fd number is the spawner's argument): the host sends
a 4-byte length and a JSON request ``{"argv": [...], "env": {...}}`` with the child's file
descriptors attached (they become fds 0, 1, 2, ... of the child, in order); the spawner
answers one JSON line ``{"pid": N}`` or ``{"error": "..."}``. Children are reaped by the
kernel (SIGCHLD ignored); the host learns exit codes from bwrap's ``--json-status-fd``. The
children get SIGCHLD back to its default (bwrap waits for its own child and would hang with
SIGCHLD ignored), and SIGPIPE and SIGXFSZ, which Python ignores: ``yes | head -1`` must end
quietly, as in a shell, not with "Broken pipe" errors.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading

# Runs in a fresh interpreter (python -I -S): stdlib only, no sandbox package imports.
SPAWNER_SOURCE = r"""
import fcntl, json, os, signal, socket, struct, sys
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
sock = socket.socket(fileno=int(sys.argv[1]))
os.set_inheritable(sock.fileno(), False)

def recv_exactly(n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data

while True:
    try:
        head, fds, _flags, _addr = socket.recv_fds(sock, 4, 16)
        if not head:
            break
        head += recv_exactly(4 - len(head))
        request = json.loads(recv_exactly(struct.unpack(">I", head)[0]))
    except (EOFError, ConnectionError):
        break
    # Lift the fds above the target numbers first so no dup2 overwrites a source.
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 64) for fd in fds]
    for fd in fds:
        os.close(fd)
    actions = [(os.POSIX_SPAWN_DUP2, fd, target) for target, fd in enumerate(high)]
    try:
        pid = os.posix_spawnp(
            request["argv"][0], request["argv"], request["env"],
            file_actions=actions, setsid=True,
            setsigdef=(signal.SIGCHLD, signal.SIGPIPE, signal.SIGXFSZ),
        )
        reply = {"pid": pid}
    except OSError as exc:
        reply = {"error": f"{request['argv'][0]}: {exc.strerror}"}
    finally:
        for fd in high:
            os.close(fd)
    sock.sendall(json.dumps(reply).encode() + b"\n")
"""


def _interpreter() -> str:
    # The spawner runs as the sandbox uid, which may not reach this process's interpreter
    # (a pyenv under /root): the system one is world-readable.
    return "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable


class SpawnerError(OSError):
    pass


class Spawner:
    def __init__(self, *, user: int | None, label: str = "sandbox"):
        self._user = user
        self._label = label
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None

    @property
    def pid(self) -> int:
        assert self._proc is not None
        return self._proc.pid

    def start(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._proc = subprocess.Popen(
                # The label only names the process (ps, leftover checks).
                [
                    _interpreter(),
                    "-I",
                    "-S",
                    "-c",
                    SPAWNER_SOURCE,
                    str(theirs.fileno()),
                    self._label,
                ],
                stdin=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
                user=self._user,
                group=self._user,
                extra_groups=[] if self._user is not None else None,
                start_new_session=True,
                close_fds=True,
            )
        finally:
            theirs.close()
        self._sock = ours

    def spawn(self, argv: list[str], env: dict[str, str], fds: list[int]) -> int:
        """Start ``argv`` with ``fds`` as its fds 0..n-1; return its pid."""
        if self._sock is None:
            raise SpawnerError("spawner not started")
        payload = json.dumps({"argv": argv, "env": env}).encode()
        data = struct.pack(">I", len(payload)) + payload
        with self._lock:
            try:
                socket.send_fds(self._sock, [data[:4]], fds)
                self._sock.sendall(data[4:])
                line = self._readline()
            except OSError as exc:
                raise SpawnerError(f"the bwrap spawner is gone: {exc}") from exc
        reply = json.loads(line)
        if "error" in reply:
            raise SpawnerError(reply["error"])
        return int(reply["pid"])

    def _readline(self) -> bytes:
        assert self._sock is not None
        chunks = []
        while True:
            chunk = self._sock.recv(4096)
            if not chunk:
                raise SpawnerError("the bwrap spawner exited")
            chunks.append(chunk)
            if chunk.endswith(b"\n"):
                return b"".join(chunks)

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._proc.pid, signal.SIGKILL)
            self._proc.wait()
            self._proc = None
