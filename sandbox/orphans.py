"""Kill what commands left running in a Docker container, as bubblewrap's PID namespace does.

Every exec's wrapper kills the command's process group when the command ends, but a process
that left the group (``setsid``, a daemon's double fork) is re-parented to the container's
init and would live on into the next stages. Once no exec of the sandbox is running, the host
reads the container's cgroup (every process of the container, ``setsid`` or not) and kills all
but the container's own: its init, the init's first child (the launcher, later ``sleep``) and
the launcher's children (the exec server). Host side, so it needs the engine on this machine;
a remote engine's containers are not swept (README, "Known limits").
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

from sandbox import cgroups

ROUNDS = 50  # a fork bomb refills between rounds; each round kills every process it saw


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time in clock ticks) from /proc/<pid>/stat; None when gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ")".
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[1]), int(fields[19])


def container_own(init_pid: int, pids: list[int]) -> set[int]:
    """The container's own processes among ``pids`` (host pids): init, the launcher (init's
    oldest child) and the launcher's children."""
    stats = {pid: st for pid in pids if (st := _stat(pid)) is not None}
    own = {init_pid}
    children = [(st[1], pid) for pid, st in stats.items() if st[0] == init_pid]
    if children:
        launcher = min(children)[1]
        own.add(launcher)
        own.update(pid for pid, st in stats.items() if st[0] == launcher)
    return own


def _kill(pid: int, procs: Path) -> None:
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return
    try:
        # Still in the container? (The pid may have been reused since the listing.)
        if pid in cgroups.read_pids(procs):
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    finally:
        os.close(pidfd)


def sweep(init_pid: int, procs: Path) -> int:
    """Kill every process of the container but its own; return how many were killed."""
    killed = 0
    own: set[int] | None = None
    for _ in range(ROUNDS):
        pids = cgroups.read_pids(procs)
        if own is None:
            own = container_own(init_pid, pids)
        strays = [pid for pid in pids if pid not in own]
        if not strays:
            break
        for pid in strays:
            _kill(pid, procs)
        killed += len(strays)
        time.sleep(0.005)
    return killed
