"""The exec server: the main program of a Docker sandbox, starting commands for the host.

A ``docker exec`` costs tens of milliseconds of engine and runc work (three API calls, a new
process joined to the container's namespaces and cgroups). This program runs inside the
container from its start, as the container's user, so a command is one request on a Unix
socket and one ``posix_spawn``: it inherits the namespaces, cgroup, user, capabilities (none),
``no-new-privileges`` and seccomp profile of the container, as an exec would, and nothing else.

It is a standalone script, copied into the sandbox's socket directory and run as
``python3 -I -S exec_server.py SOCKET`` (stdlib only, no ``sandbox`` imports, Python 3.9+).
The host listens on SOCKET and accepts exactly one connection, this one, then removes the
socket file; the server never listens, so nothing else in the container can reach the host.

Protocol (the shape of sandbox/spawner.py): a request is a 4-byte big-endian length and a JSON
object ``{"argv": [...], "env": {...}}`` sent with the child's file descriptors attached
(SCM_RIGHTS; they become fds 0, 1, 2, ... of the child, in order). ``env`` is merged over the
container's environment. The reply is one JSON line, ``{"pid": N}`` or ``{"error": "..."}``.
Exit codes never pass through here: the host's command wrapper writes its own on a status
pipe, so a server that an agent kills (``pkill python3``) loses no result.
"""

import fcntl
import json
import os
import signal
import socket
import struct
import sys

MAX_FDS = 16
# Signals Python ignores for itself; a command must start with them at their defaults.
DEFAULT_SIGNALS = (signal.SIGCHLD, signal.SIGPIPE, signal.SIGXFSZ)


def make_undumpable() -> None:
    """Processes of the same uid may ptrace a dumpable process (or take its socket with
    pidfd_getfd); a non-dumpable one needs CAP_SYS_PTRACE, which nothing in the container has.
    Commands are dumpable again: ``execve`` resets the flag."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except Exception:  # no ctypes in a minimal Python: serve anyway
        pass


def recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def spawn(request: dict, fds: list) -> dict:
    argv = request["argv"]
    env = dict(os.environ)
    env.update(request["env"])
    # Lift the fds above the target numbers first so that no dup2 overwrites a source.
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 64) for fd in fds]
    for fd in fds:
        os.close(fd)
    actions = [(os.POSIX_SPAWN_DUP2, fd, target) for target, fd in enumerate(high)]
    try:
        pid = os.posix_spawnp(
            argv[0],
            argv,
            env,
            file_actions=actions,
            setsid=True,
            setsigdef=DEFAULT_SIGNALS,
            setsigmask=(),
        )
        return {"pid": pid}
    except OSError as exc:
        return {"error": f"{argv[0]}: {exc.strerror}"}
    except ValueError as exc:  # a NUL byte in an argument, say
        return {"error": str(exc)}
    finally:
        for fd in high:
            os.close(fd)


def serve(sock: socket.socket) -> None:
    while True:
        try:
            head, fds, _flags, _addr = socket.recv_fds(sock, 4, MAX_FDS)
            if not head:
                return
            head += recv_exactly(sock, 4 - len(head))
            request = json.loads(recv_exactly(sock, struct.unpack(">I", head)[0]))
        except (EOFError, ConnectionError):
            return
        reply = spawn(request, fds)
        sock.sendall(json.dumps(reply).encode() + b"\n")


def main(path: str) -> None:
    make_undumpable()
    # Children are reaped by the kernel; the host learns exit codes from the status pipe.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    serve(sock)


if __name__ == "__main__":
    # The container's Python, not this project's: an old one exits, the host uses docker exec.
    if sys.version_info < (3, 9):  # noqa: UP036 (socket.recv_fds)
        sys.exit("agentbench exec server: needs Python 3.9+")
    main(sys.argv[1])
