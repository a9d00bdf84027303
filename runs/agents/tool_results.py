"""What the agent tools return: one frozen dataclass per tool, each able to render itself as
the observation the agent reads (long output clipped, start and end kept)."""

from __future__ import annotations

from dataclasses import dataclass

OBSERVATION_CHARS = 12_000


class ToolInputError(ValueError):
    """A tool was called with arguments it cannot use; the message names the argument."""


@dataclass(frozen=True, kw_only=True)
class ToolResult:
    tool: str
    ok: bool
    error: str = ""
    step: int = 0
    duration_sec: float = 0.0
    artifact: str = ""  # relative to the attempt folder

    def observation(self) -> str:
        return f"error: {self.error}" if not self.ok else "ok"

    def fingerprint(self) -> str:
        """What makes two failures 'the same' for the repeated-failure rule."""
        return f"{self.tool}:{' '.join(self.error.split())[:200]}"


@dataclass(frozen=True, kw_only=True)
class ListFilesResult(ToolResult):
    files: tuple[str, ...] = ()
    truncated: bool = False

    def observation(self) -> str:
        if not self.ok:
            return f"error: {self.error}"
        more = f"\n[list truncated at {len(self.files)} entries]" if self.truncated else ""
        return ("\n".join(self.files) or "(no files)") + more


@dataclass(frozen=True, kw_only=True)
class ReadFileResult(ToolResult):
    path: str = ""
    text: str = ""
    start_line: int = 0
    end_line: int = 0
    total_lines: int = 0
    truncated: bool = False
    suggestions: tuple[str, ...] = ()
    entries: tuple[str, ...] = ()  # when the path is a directory

    def observation(self) -> str:
        if not self.ok:
            hint = f"\ndid you mean: {', '.join(self.suggestions)}" if self.suggestions else ""
            return f"error: {self.error}{hint}"
        if self.entries:
            return f"{self.path} is a directory:\n" + "\n".join(self.entries)
        header = f"{self.path} (lines {self.start_line}-{self.end_line} of {self.total_lines})"
        note = (
            "\n[truncated: call read_file with start_line/end_line for the rest]"
            if self.truncated
            else ""
        )
        return f"{header}\n{self.text}{note}"


@dataclass(frozen=True, slots=True)
class SearchHit:
    path: str
    line_number: int
    line: str
    before: tuple[str, ...] = ()
    after: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class SearchResult(ToolResult):
    query: str = ""
    hits: tuple[SearchHit, ...] = ()
    truncated: bool = False

    def observation(self) -> str:
        if not self.ok:
            return f"error: {self.error}"
        if not self.hits:
            return f"no matches for {self.query!r}"
        blocks = []
        for hit in self.hits:
            first = hit.line_number - len(hit.before)
            lines = [*hit.before, hit.line, *hit.after]
            marks = [
                f"{n}{':' if n == hit.line_number else '-'} {text}"
                for n, text in enumerate(lines, start=first)
            ]
            blocks.append(f"{hit.path}\n" + "\n".join(marks))
        more = "\n[more matches not shown]" if self.truncated else ""
        return clip("\n--\n".join(blocks) + more)


@dataclass(frozen=True, kw_only=True)
class PatchResult(ToolResult):
    paths: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    git_flags: tuple[str, ...] = ()

    def observation(self) -> str:
        if not self.ok:
            return f"error: patch not applied: {self.error}"
        notes = f" ({'; '.join(self.notes)})" if self.notes else ""
        return f"patch applied to {', '.join(self.paths)}{notes}"


@dataclass(frozen=True, kw_only=True)
class RunResult(ToolResult):
    command: str = ""
    exit_code: int | None = None
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    truncated: bool = False

    def observation(self) -> str:
        if self.exit_code is None:
            return f"error: {self.error}"
        status = f"exit code {self.exit_code}" + (" (timed out)" if self.timed_out else "")
        body = self.stdout + (f"\n[stderr]\n{self.stderr}" if self.stderr.strip() else "")
        return f"{status}\n{clip(body)}"

    def fingerprint(self) -> str:
        tail = " ".join((self.stdout + self.stderr).split())[-150:]
        return f"run:{self.command[:80]}:{self.exit_code}:{tail}"


def clip(text: str, limit: int = OBSERVATION_CHARS) -> str:
    """Keep the start and the end (where tracebacks and summaries are) of long output."""
    if len(text) <= limit:
        return text
    head = limit // 4
    tail = limit - head
    return f"{text[:head]}\n[... {len(text) - limit} characters cut ...]\n{text[-tail:]}"
