"""The harness's end of mini-swe-agent's sandbox environment (msa/agentbench_sandbox_env.py).

A Unix socket in a private folder of the worker (0700, only the harness's user reaches it): each
connection carries one command as a JSON line, run with ``Sandbox.exec`` (no network, the
sandbox's limits and disk quota), answered with its output and exit code in mini-swe-agent's
own shape. The CLI process on the worker never gets a shell on the worker through it: every
command goes to the sandbox.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from pathlib import Path
from types import TracebackType

from sandbox.base import Sandbox
from sandbox.errors import SandboxError

MAX_REQUEST_BYTES = 4_000_000
MAX_COMMAND_TIMEOUT_SEC = 3600


class SandboxBridge:
    def __init__(self, sandbox: Sandbox, path: Path, *, default_cwd: str):
        self.sandbox = sandbox
        self.path = path
        self.default_cwd = default_cwd
        self.calls = 0
        self._server: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._closing = threading.Event()

    def __enter__(self) -> SandboxBridge:
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(str(self.path))
        self.path.chmod(0o600)
        self._server.listen(4)
        self._thread = threading.Thread(target=self._serve, name="sandbox-bridge", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._closing.set()
        if self._server is not None:
            self._server.close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.path.unlink(missing_ok=True)

    def _serve(self) -> None:
        assert self._server is not None
        while not self._closing.is_set():
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            with conn:
                try:
                    self._handle(conn)
                except (OSError, SandboxError, ValueError) as exc:
                    reply = {"output": "", "returncode": -1, "exception_info": str(exc)}
                    with contextlib.suppress(OSError):
                        conn.sendall(json.dumps(reply).encode() + b"\n")

    def _handle(self, conn: socket.socket) -> None:
        data = b""
        while not data.endswith(b"\n"):
            chunk = conn.recv(1 << 16)
            if not chunk:
                break
            data += chunk
            if len(data) > MAX_REQUEST_BYTES:
                raise ValueError("request too large")
        request = json.loads(data)
        command = str(request.get("command") or "")
        timeout = min(float(request.get("timeout") or 60), MAX_COMMAND_TIMEOUT_SEC)
        cwd = str(request.get("cwd") or self.default_cwd)
        self.calls += 1
        result = self.sandbox.exec(command, timeout=timeout, cwd=cwd)
        reply = {
            "output": result.stdout + result.stderr,
            "returncode": result.exit_code,
            "exception_info": (
                f"the command timed out after {timeout:.0f}s" if result.timed_out else ""
            ),
        }
        conn.sendall(json.dumps(reply).encode() + b"\n")
