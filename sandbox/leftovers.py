"""What a sandbox killed with its process leaves on the host, found and removed by its name.

A sandbox closed normally removes all of it. One whose worker was killed (SIGKILL, OOM) leaves:
the quota filesystem and its image (``sandbox.disk``), the passwd/group folder
``/run/agentbench/accounts/<name>`` (``sandbox.accounts``), the exec server's socket folder
``/run/agentbench/docker/<name>`` (``sandbox.docker_exec_client``) and, for bubblewrap, the
workspace bind ``/run/agentbench/ws/<name>``. The harness's reaper calls these for sandboxes
whose attempt is over; they are safe to repeat and a no-op where nothing is left.
"""

from __future__ import annotations

import contextlib
import re
import shutil
from pathlib import Path

from sandbox import disk, mounts
from sandbox.accounts import ACCOUNTS_ROOT

# The roots are named here, not imported, so that listing leftovers loads no backend.
SOCKET_ROOT = Path("/run/agentbench/docker")  # sandbox.docker_exec_client.SOCKET_ROOT
EXPOSE_ROOT = Path("/run/agentbench/ws")  # sandbox.bwrap_backend.EXPOSE_ROOT
# Every backend names its sandboxes "ab-<name>": nothing else under these roots is touched.
SANDBOX_NAME = re.compile(r"ab-[A-Za-z0-9][A-Za-z0-9_.-]*")


def _roots() -> list[Path]:
    return [ACCOUNTS_ROOT, SOCKET_ROOT, EXPOSE_ROOT, disk.disk_root()]


def host_leftover_names() -> set[str]:
    """The sandbox names that still have a folder (or quota image) on this host."""
    names: set[str] = set()
    for root in _roots():
        with contextlib.suppress(OSError):
            for entry in root.iterdir():
                name = entry.name.removesuffix(".img")
                if SANDBOX_NAME.fullmatch(name):
                    names.add(name)
    return names


def remove_host_leftovers(name: str, workspace: Path | None = None) -> None:
    """Remove what the sandbox ``name`` left on the host (its quota filesystem bound over
    ``workspace`` too). Refuses a name that is not a sandbox's."""
    if not SANDBOX_NAME.fullmatch(name):
        raise ValueError(f"not a sandbox name: {name!r}")
    disk.remove_leftover(name, workspace)
    with contextlib.suppress(OSError):
        mounts.unbind(EXPOSE_ROOT / name)
    shutil.rmtree(ACCOUNTS_ROOT / name, ignore_errors=True)
    shutil.rmtree(SOCKET_ROOT / name, ignore_errors=True)
