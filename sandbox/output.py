"""Capped capture of a command's stdout and stderr, shared by every backend."""

from __future__ import annotations

import os
import selectors
import time

from sandbox.base import KILLED_EXIT_CODE, TIMEOUT_EXIT_CODE, ExecResult


class CappedOutput:
    """Collects stdout and stderr up to ``cap`` bytes each; the rest is read and dropped.

    Reading on after the cap matters: a command blocked on a full pipe would otherwise hang
    until its timeout instead of finishing.
    """

    def __init__(self, cap: int):
        self.cap = cap
        self._chunks: dict[str, list[bytes]] = {"stdout": [], "stderr": []}
        self._kept = {"stdout": 0, "stderr": 0}
        self.truncated = False

    def feed(self, stream: str, data: bytes) -> None:
        room = self.cap - self._kept[stream]
        if len(data) > room:
            self.truncated = True
            data = data[: max(room, 0)]
        if data:
            self._chunks[stream].append(data)
            self._kept[stream] += len(data)

    def text(self, stream: str) -> str:
        # A multi-byte character cut at the cap decodes to U+FFFD rather than failing.
        return b"".join(self._chunks[stream]).decode("utf-8", errors="replace")


def pump(
    readers: dict[int, str],
    output: CappedOutput,
    status: bytearray,
    *,
    deadline: float,
    status_cap: int | None = None,
    drain_after_status: float | None = None,
) -> bool:
    """Read a command's pipes (``readers``: fd -> "stdout", "stderr" or "status") until all
    close; True if ``deadline`` passed first. stdout and stderr go to ``output``, the status
    pipe to ``status`` (at most ``status_cap`` bytes). With ``drain_after_status``, once the
    status pipe closes the others get at most that many seconds more: a process that left the
    command's group can hold stdout open forever. A pipe at its end is closed and removed from
    ``readers``, so a second pass (after a kill) skips it."""
    with selectors.DefaultSelector() as sel:
        for fd, name in readers.items():
            sel.register(fd, selectors.EVENT_READ, name)
        while readers:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return True
            for key, _events in sel.select(remaining):
                data = os.read(key.fd, 65536)
                if not data:
                    sel.unregister(key.fd)
                    os.close(key.fd)
                    del readers[key.fd]
                    if key.data == "status" and drain_after_status is not None:
                        deadline = min(deadline, time.monotonic() + drain_after_status)
                elif key.data != "status":
                    output.feed(key.data, data)
                elif status_cap is None:
                    status += data
                else:
                    status += data[: max(status_cap - len(status), 0)]
    return False


def exit_status(returncode: int) -> int:
    """Shell convention: a process killed by signal N exits 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


def build_result(
    *,
    output: CappedOutput,
    exit_code: int,
    duration_sec: float,
    timed_out: bool,
    oom_killed: bool = False,
    disk_full: bool = False,
) -> ExecResult:
    """The one place that turns a finished command into an ExecResult, so that both backends
    report a timeout as 124 and a SIGKILL (OOM or not) as 137 the same way."""
    if timed_out:
        exit_code = TIMEOUT_EXIT_CODE
        oom_killed = False
    elif oom_killed:
        exit_code = KILLED_EXIT_CODE
    return ExecResult(
        exit_code=exit_code,
        stdout=output.text("stdout"),
        stderr=output.text("stderr"),
        duration_sec=round(duration_sec, 4),
        timed_out=timed_out,
        oom_killed=oom_killed,
        truncated=output.truncated,
        disk_full=disk_full,
    )
