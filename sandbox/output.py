"""Capped capture of a command's stdout and stderr, shared by every backend."""

from __future__ import annotations

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
    )
