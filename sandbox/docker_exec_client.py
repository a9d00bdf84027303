"""The host side of a Docker sandbox's exec server (sandbox/docker_exec_server.py).

Each sandbox gets a host directory ``SOCKET_ROOT/<container name>`` holding a copy of the server
script and a listening Unix socket; it is bind-mounted read-only at ``/run/agentbench`` in the
container, whose main program (``LAUNCHER``) runs the server when the image has a ``python3``
and otherwise just sleeps, leaving the backend on ``docker exec``. The host accepts one
connection, from a process in the container's PID namespace, then removes the socket file.

A command runs under a shell wrapper with the semantics of the ``docker exec`` one: coreutils
``timeout -s KILL`` puts it in a process group of its own and kills that group at the deadline,
and whatever the group still holds when the command ends is killed too. The wrapper writes the
command's process group and then its exit code on a status pipe (fd 3), and the host reads
stdout, stderr and status the way the bubblewrap backend does.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import selectors
import shutil
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sandbox import docker_exec_server
from sandbox.errors import SandboxError
from sandbox.output import CappedOutput, pump

log = logging.getLogger(__name__)

SOCKET_ROOT = Path("/run/agentbench/docker")
MOUNT_POINT = "/run/agentbench"
SOCKET_NAME = "exec.sock"
SERVER_NAME = "exec_server.py"
# The container's main program. If the server cannot run or stops, the container still lives
# (on ``sleep``) and the backend uses ``docker exec``.
LAUNCHER = [
    "sh",
    "-c",
    f"command -v python3 >/dev/null && python3 -I -S {MOUNT_POINT}/{SERVER_NAME} "
    f"{MOUNT_POINT}/{SOCKET_NAME}; exec sleep infinity",
]
# Run as ``sh -c WRAPPER sh CWD TIMEOUT ARGV...`` with fds 0-3: stdin, stdout, stderr, status.
# The command does not inherit the status pipe (3>&-). A working directory that is missing is
# exit 126 with the shell's message on stderr, as a failed ``docker exec`` chdir is.
WRAPPER = (
    'cd "$1" || { echo "exit 126" >&3; exit 126; }; unset OLDPWD; t=$2; shift 2; '
    'timeout -s KILL "$t" "$@" 3>&- & pid=$!; echo "group $pid" >&3; '
    'wait "$pid"; rc=$?; kill -KILL -"$pid" 2>/dev/null; echo "exit $rc" >&3; exit "$rc"'
)
# How long a start waits for the server to connect before settling for docker exec.
CONNECT_TIMEOUT_SEC = 3.0
# The server answers a spawn request at once; longer means it is stopped or gone.
REPLY_TIMEOUT_SEC = 10.0
# Once the wrapper has exited (or was killed), how long its output may still take to close:
# a process that left the command's group (setsid) can hold stdout open forever.
DRAIN_SEC = 1.0
STATUS_CAP = 256
# After a lost reply, how long to wait for the wrapper's first status line (or the pipe's end).
LOST_REPLY_WAIT_SEC = 2.0
REPLY_CAP = 65536
CANNOT_EXECUTE = 126
_NAME = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.-]*")


class ServerGone(OSError):
    """The request never reached the server (it is gone): nothing was started."""


class ReplyLost(Exception):
    """The server went away after a request reached it: it may or may not have started the
    command (the status pipe tells, see ``_started``)."""


class SpawnRefused(Exception):
    """The server could not start the command (a NUL byte in an argument, say)."""


@dataclass(frozen=True, slots=True)
class Finished:
    output: CappedOutput
    exit_code: int | None  # None: the wrapper died without reporting one
    duration_sec: float
    stuck: bool  # no exit code by the hard deadline: the command was killed from outside


def socket_dir(container_name: str) -> Path | None:
    # Container names cannot hold a "/", but the name is checked before it becomes a path.
    return SOCKET_ROOT / container_name if _NAME.fullmatch(container_name) else None


def remove_socket_dir(container_name: str) -> None:
    """Remove the socket directory of a container (one left by a crashed worker, say)."""
    directory = socket_dir(container_name)
    if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)


class ExecServer:
    """One sandbox's connection to its exec server (``listen`` before the container starts,
    ``accept`` after)."""

    def __init__(self, directory: Path, listener: socket.socket):
        self.directory = directory
        self._inode = directory.stat().st_ino
        self._listener: socket.socket | None = listener
        self._conn: socket.socket | None = None
        self._lock = threading.Lock()

    @classmethod
    def listen(cls, container_name: str) -> ExecServer | None:
        """Prepare the socket directory; None when this host cannot (not root, say)."""
        directory = socket_dir(container_name)
        if directory is None:
            return None
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            shutil.rmtree(directory, ignore_errors=True)  # left by a crashed worker
            SOCKET_ROOT.mkdir(parents=True, exist_ok=True)
            directory.mkdir(mode=0o755)
            directory.chmod(0o755)  # whatever the umask
            server = directory / SERVER_NAME
            shutil.copyfile(docker_exec_server.__file__, server)
            server.chmod(0o644)
            listener.bind(str(directory / SOCKET_NAME))
            # The container's user may differ from this host's uid.
            (directory / SOCKET_NAME).chmod(0o666)
            listener.listen(4)
        except OSError as exc:
            listener.close()
            shutil.rmtree(directory, ignore_errors=True)
            log.warning("no exec server for %s, using docker exec: %s", container_name, exc)
            return None
        return cls(directory, listener)

    @property
    def volume(self) -> dict[str, dict[str, str]]:
        return {str(self.directory): {"bind": MOUNT_POINT, "mode": "ro"}}

    @property
    def connected(self) -> bool:
        return self._conn is not None

    def accept(self, *, container_pid: int, timeout: float = CONNECT_TIMEOUT_SEC) -> bool:
        """Wait for the server in the container whose init is ``container_pid`` (host pid);
        True once connected. Connections from elsewhere are refused. Either way the socket
        file is removed: nothing can connect to the host through it afterwards."""
        assert self._listener is not None
        deadline = time.monotonic() + timeout
        try:
            pid_ns = os.stat(f"/proc/{container_pid}/ns/pid").st_ino
            while (remaining := deadline - time.monotonic()) > 0:
                self._listener.settimeout(remaining)
                try:
                    conn, _addr = self._listener.accept()
                except TimeoutError:
                    break
                if _peer_pid_ns(conn) == pid_ns:
                    conn.settimeout(REPLY_TIMEOUT_SEC)
                    self._conn = conn
                    break
                conn.close()
        except OSError as exc:
            log.warning("exec server of %s did not connect: %s", self.directory.name, exc)
        finally:
            self._listener.close()
            self._listener = None
            with contextlib.suppress(OSError):
                (self.directory / SOCKET_NAME).unlink()
        return self._conn is not None

    def spawn(self, argv: list[str], env: dict[str, str], fds: list[int]) -> int:
        """Start ``argv`` in the container with ``fds`` as its fds 0..n-1; return its pid (in
        the container's PID namespace). Raises ServerGone when the server is gone and
        SpawnRefused when it refused (either way nothing was started), ReplyLost when it went
        away after the request reached it."""
        payload = json.dumps({"argv": argv, "env": env}).encode()
        data = struct.pack(">I", len(payload)) + payload
        with self._lock:
            if self._conn is None:
                raise ServerGone("the exec server is gone")
            try:
                socket.send_fds(self._conn, [data[:4]], fds, socket.MSG_NOSIGNAL)
                self._conn.sendall(data[4:], socket.MSG_NOSIGNAL)
            except OSError as exc:
                self._disconnect()
                raise ServerGone(f"the exec server is gone: {exc}") from exc
            try:
                reply = json.loads(self._readline())
                if "error" in reply:
                    raise SpawnRefused(str(reply["error"]))
                return int(reply["pid"])
            except ConnectionError as exc:  # killed meanwhile (by the previous command, say)
                self._disconnect()
                raise ReplyLost(str(exc)) from exc
            except (OSError, ValueError, KeyError, TypeError) as exc:
                # It may or may not have started the command: not safe to run it again.
                self._disconnect()
                raise SandboxError(f"the exec server did not answer: {exc}") from exc

    def _readline(self) -> bytes:
        assert self._conn is not None
        line = b""
        while not line.endswith(b"\n"):
            chunk = self._conn.recv(4096)
            if not chunk:
                raise ConnectionResetError("the exec server exited")
            line += chunk
            if len(line) > REPLY_CAP:
                raise ValueError("the exec server's reply is too long")
        return line

    def _disconnect(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def run(
        self,
        argv: list[str],
        *,
        cwd: str,
        env: dict[str, str],
        timeout: float,
        grace: float,
        output_cap: int,
        kill_groups: Callable[[list[int]], None],
    ) -> Finished:
        """Run one command and collect its output and exit code. If no exit code comes by
        ``timeout + grace`` (the in-container ``timeout`` should have fired long before),
        ``kill_groups`` gets the wrapper's and the command's process groups to kill."""
        wrapped = ["sh", "-c", WRAPPER, "sh", cwd, f"{max(timeout, 0.01):.3f}", *argv]
        pipes = {name: os.pipe() for name in ("stdout", "stderr", "status")}
        started = time.monotonic()
        wrapper_pid: int | None = None
        try:
            with open(os.devnull, "rb") as devnull:
                fds = [devnull.fileno()] + [pipes[n][1] for n in ("stdout", "stderr", "status")]
                wrapper_pid = self.spawn(wrapped, env, fds)
        except ReplyLost:
            pass  # started or not: the status pipe tells, below
        except SpawnRefused as exc:
            _close_pipes(pipes)
            # A command that cannot start is the command's failure, as with docker exec.
            refused = CappedOutput(output_cap)
            refused.feed("stderr", f"cannot start the command: {exc}\n".encode())
            return Finished(refused, CANNOT_EXECUTE, time.monotonic() - started, stuck=False)
        except BaseException:
            _close_pipes(pipes)
            raise
        for _r, w in pipes.values():
            os.close(w)
        # Read ends still open; pump closes (and drops) each at its end of file.
        readers = {pipes[n][0]: n for n in ("stdout", "stderr", "status")}
        output = CappedOutput(output_cap)
        status = bytearray()
        if wrapper_pid is None and not _started(pipes["status"][0], status):
            for r in readers:
                os.close(r)
            raise ServerGone("the exec server died before starting the command")
        try:
            self._read(readers, output, status, deadline=started + timeout + grace)
            reported = _parse_status(status)
            stuck = "exit" not in reported and pipes["status"][0] in readers
            if stuck:
                groups = [wrapper_pid, reported.get("group")]
                kill_groups([g for g in groups if g is not None])
                self._read(readers, output, status, deadline=time.monotonic() + DRAIN_SEC)
        finally:
            for r in readers:
                os.close(r)
        return Finished(
            output=output,
            exit_code=reported.get("exit"),
            duration_sec=time.monotonic() - started,
            stuck=stuck,
        )

    @staticmethod
    def _read(
        readers: dict[int, str], output: CappedOutput, status: bytearray, *, deadline: float
    ) -> None:
        pump(
            readers,
            output,
            status,
            deadline=deadline,
            status_cap=STATUS_CAP,
            drain_after_status=DRAIN_SEC,
        )

    def close(self) -> None:
        """Disconnect and remove the socket directory (unless a newer sandbox of the same
        name has replaced it). Safe to call twice."""
        with self._lock:
            self._disconnect()
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        with contextlib.suppress(OSError):
            if self.directory.stat().st_ino == self._inode:
                shutil.rmtree(self.directory, ignore_errors=True)


def _started(status_fd: int, status: bytearray) -> bool:
    """After a lost reply: did the server start the wrapper? The wrapper holds the status pipe
    and writes its group at once; a server that died first took its copies of the fds with it,
    so the pipe ends (the kernel may close those copies a moment later). Read data is kept."""
    with selectors.DefaultSelector() as sel:
        sel.register(status_fd, selectors.EVENT_READ)
        if not sel.select(LOST_REPLY_WAIT_SEC):
            return True  # still held open by someone: treat the command as started
    data = os.read(status_fd, STATUS_CAP)
    status.extend(data)
    return bool(data)


def _close_pipes(pipes: dict[str, tuple[int, int]]) -> None:
    for r, w in pipes.values():
        os.close(r)
        os.close(w)


def _peer_pid_ns(conn: socket.socket) -> int | None:
    """The PID namespace (inode) of the process at the other end of ``conn``."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, _uid, _gid = struct.unpack("3i", creds)
    try:
        return os.stat(f"/proc/{pid}/ns/pid").st_ino
    except OSError:
        return None


def _parse_status(status: bytes | bytearray) -> dict[str, int]:
    """``group N`` and ``exit N`` lines from the wrapper (ignoring anything malformed)."""
    found: dict[str, int] = {}
    for line in bytes(status).decode(errors="replace").splitlines():
        key, _, value = line.partition(" ")
        if key in ("group", "exit") and value.isdigit():
            found[key] = int(value)
    return found
