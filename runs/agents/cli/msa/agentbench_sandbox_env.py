"""mini-swe-agent's environment for AgentBench: every command runs in the attempt's sandbox.

Loaded by mini-swe-agent itself (``--environment-class agentbench_sandbox_env.SandboxEnvironment``)
inside its own venv on the worker; this folder is on its ``PYTHONPATH``, nothing else of the
harness is. It sends each command to the harness over the Unix socket named by
``AGENTBENCH_BRIDGE_SOCKET`` (one JSON line each way: ``{"command", "cwd", "timeout"}`` ->
``{"output", "returncode", "exception_info"}``); the harness runs it with ``Sandbox.exec``
(no network, the sandbox's limits) and answers. Standard library and mini-swe-agent only.
"""

from __future__ import annotations

import json
import os
import socket
from typing import Any

from minisweagent.environments.local import LocalEnvironment, LocalEnvironmentConfig


class SandboxEnvironmentConfig(LocalEnvironmentConfig):
    pass


class SandboxEnvironment(LocalEnvironment):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(config_class=SandboxEnvironmentConfig, **kwargs)
        self.socket_path = os.environ["AGENTBENCH_BRIDGE_SOCKET"]

    def execute(self, action: dict, cwd: str = "", *, timeout: int | None = None) -> dict[str, Any]:
        request = {
            "command": action.get("command", ""),
            "cwd": cwd or self.config.cwd or "",
            "timeout": timeout or self.config.timeout,
        }
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                conn.connect(self.socket_path)
                conn.sendall(json.dumps(request).encode() + b"\n")
                reply = b""
                while not reply.endswith(b"\n"):
                    chunk = conn.recv(1 << 16)
                    if not chunk:
                        break
                    reply += chunk
            output = json.loads(reply)
        except (OSError, ValueError) as exc:
            output = {
                "output": "",
                "returncode": -1,
                "exception_info": f"the sandbox did not answer: {exc}",
            }
        self._check_finished(output)
        return output
