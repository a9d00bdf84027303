"""The sandbox user: a uid with no account on the host, named ``agent`` inside the sandbox.

Commands run as ``AGENT_UID`` (64000 unless ``SANDBOX_UID`` says otherwise), which must not
exist in the host's user database: files it creates on the host belong to nobody, and a process
that escaped would own nothing there. The images (the runner's ``agent`` is uid 1000) do not
know that uid, so each sandbox gets its own ``/etc/passwd`` and ``/etc/group``: the image's,
with any ``agent`` entry (or one holding the uid) replaced by ``agent`` at ``AGENT_UID``. Both
are small files in ``ACCOUNTS_ROOT/<sandbox>``, bound read-only over the image's.
"""

from __future__ import annotations

import grp
import logging
import pwd
import shutil
from dataclasses import dataclass
from pathlib import Path

from sandbox.base import AGENT_UID
from sandbox.errors import SandboxUnavailable

log = logging.getLogger(__name__)

ACCOUNTS_ROOT = Path("/run/agentbench/accounts")
AGENT_NAME = "agent"
AGENT_HOME = "/home/agent"


def check_no_host_account() -> None:
    """Refuse to run sandboxes as a uid or gid that names an account on this host."""
    for lookup, what in ((pwd.getpwuid, "user"), (grp.getgrgid, "group")):
        try:
            entry = lookup(AGENT_UID)
        except KeyError:
            continue
        raise SandboxUnavailable(
            f"the sandbox uid {AGENT_UID} is the host {what} {entry[0]!r}; set SANDBOX_UID to "
            "an id no host account uses (see README, Sandboxes)"
        )


def _without_agent(text: str, id_field: int) -> list[str]:
    kept = []
    for line in text.splitlines():
        fields = line.split(":")
        if len(fields) > id_field and (
            fields[0] == AGENT_NAME or fields[id_field] == str(AGENT_UID)
        ):
            continue
        if line.strip():
            kept.append(line)
    return kept


def passwd_for_sandbox(image_passwd: str) -> str:
    lines = _without_agent(image_passwd, 2)
    lines.append(f"{AGENT_NAME}:x:{AGENT_UID}:{AGENT_UID}::{AGENT_HOME}:/bin/sh")
    return "\n".join(lines) + "\n"


def group_for_sandbox(image_group: str) -> str:
    lines = _without_agent(image_group, 2)
    lines.append(f"{AGENT_NAME}:x:{AGENT_UID}:")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True, slots=True)
class AccountFiles:
    """One sandbox's ``passwd`` and ``group`` on the host."""

    directory: Path

    @property
    def passwd(self) -> Path:
        return self.directory / "passwd"

    @property
    def group(self) -> Path:
        return self.directory / "group"

    @property
    def binds(self) -> dict[str, str]:
        """Host file -> path in the sandbox."""
        return {str(self.passwd): "/etc/passwd", str(self.group): "/etc/group"}

    @classmethod
    def write(cls, sandbox_name: str, *, image_passwd: str, image_group: str) -> AccountFiles:
        directory = ACCOUNTS_ROOT / sandbox_name
        shutil.rmtree(directory, ignore_errors=True)  # left by a crashed worker
        directory.mkdir(parents=True, mode=0o755)
        directory.chmod(0o755)
        files = cls(directory)
        files.passwd.write_text(passwd_for_sandbox(image_passwd))
        files.group.write_text(group_for_sandbox(image_group))
        for path in (files.passwd, files.group):
            path.chmod(0o644)  # read by the sandbox user
        return files

    def remove(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)
