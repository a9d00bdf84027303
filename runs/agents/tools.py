"""The five agent tools: list_files, read_file, search, apply_patch, run.

Everything runs inside the sandbox (``remote.SCRIPT``, ``rg``, ``git apply``, the agent's own
commands); the host only receives artifacts under the attempt's folder, under fixed names
(``diffs/step_NNNN.patch``, ``logs/tool_step_NNNN.txt``). Each tool validates its input and
returns a result dataclass; a bad call is an error result the agent sees, never an exception.
Only a failing sandbox (``SandboxError``) propagates: that is the pipeline's SANDBOX_ERROR.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from runs.agents import remote
from runs.agents.events import EventLog
from runs.agents.patching import PatchError, check_relative_path, normalize_patch
from runs.agents.tool_results import (
    ListFilesResult,
    PatchResult,
    ReadFileResult,
    RunResult,
    SearchHit,
    SearchResult,
    ToolInputError,
    ToolResult,
    clip,
)
from runs.agents.tool_schemas import TOOL_NAMES, TOOL_SCHEMAS, validate_arguments
from sandbox.base import ExecResult, Sandbox

EVENT_OUTPUT_CHARS = 4_000
READ_MAX_LINES = 1_000
READ_MAX_CHARS = 60_000
READ_MAX_BYTES = 2_000_000
LIST_LIMIT = 1_000
MAX_RUN_TIMEOUT_SEC = 3_600
ENV_CHUNK_CHARS = 100_000
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class RemoteError(Exception):
    """The in-sandbox helper could not run (as opposed to reporting a refused input)."""


class Toolbox:
    """The tools bound to one sandbox and one attempt folder. Not thread-safe."""

    def __init__(
        self,
        sandbox: Sandbox,
        *,
        workdir: str,
        artifacts_dir: Path,
        strict_patch: bool = False,
        default_timeout_sec: float = 300.0,
        allow_network: bool = False,
        events: EventLog | None = None,
        deadline: float | None = None,  # time.monotonic() value; commands never run past it
    ):
        self.sandbox = sandbox
        self.workdir = workdir.rstrip("/") or "/"
        self.root = sandbox.config.workspace_path.rstrip("/") or "/"
        self.artifacts_dir = artifacts_dir
        self.strict_patch = strict_patch
        self.default_timeout_sec = default_timeout_sec
        self.allow_network = allow_network
        self.events = events
        self.deadline = deadline
        self.step = 0

    # --- dispatch ----------------------------------------------------------------------------

    def call(self, name: str, arguments: Any) -> ToolResult:
        """Validate ``arguments`` against the tool's schema, run it, log start and finish."""
        self.step += 1
        step = self.step
        if self.events:
            self.events.emit("tool_start", step=step, tool=name, arguments=_brief(arguments))
        started = time.monotonic()
        try:
            kwargs = validate_arguments(name, arguments)
            method: Callable[..., ToolResult] = getattr(self, f"_{name}")
            result = method(step, **kwargs)
        except (ToolInputError, PatchError, RemoteError) as exc:
            result = ToolResult(tool=name, ok=False, error=str(exc))
        duration = round(time.monotonic() - started, 3)
        result = _with(result, step=step, duration_sec=duration)
        if self.events:
            self.events.emit(
                "tool_finish",
                step=step,
                tool=name,
                ok=result.ok,
                # What the agent saw, for the trajectory view (the full text is in logs/).
                output=clip(result.observation(), EVENT_OUTPUT_CHARS),
                **({"error": result.error[:500]} if not result.ok else {}),
                duration_sec=duration,
                artifact=result.artifact,
                exit_code=getattr(result, "exit_code", None),
            )
        return result

    # Typed convenience wrappers (what scripted agents and tests call).
    def list_files(self, root: str = ".", glob: str | None = None) -> ListFilesResult:
        return self.call("list_files", {"root": root, "glob": glob})  # type: ignore[return-value]

    def read_file(
        self, path: str, start_line: int | None = None, end_line: int | None = None
    ) -> ReadFileResult:
        args = {"path": path, "start_line": start_line, "end_line": end_line}
        return self.call("read_file", args)  # type: ignore[return-value]

    def search(
        self,
        query: str,
        glob: str | None = None,
        max_results: int = 50,
        context_lines: int = 2,
        is_regex: bool = False,
    ) -> SearchResult:
        args = {
            "query": query,
            "glob": glob,
            "max_results": max_results,
            "context_lines": context_lines,
            "is_regex": is_regex,
        }
        return self.call("search", args)  # type: ignore[return-value]

    def apply_patch(self, unified_diff: str) -> PatchResult:
        return self.call("apply_patch", {"unified_diff": unified_diff})  # type: ignore[return-value]

    def run(
        self,
        command: str,
        timeout_sec: float | None = None,
        env: dict[str, str] | None = None,
        network: bool | None = None,
    ) -> RunResult:
        args = {"command": command, "timeout_sec": timeout_sec, "env": env, "network": network}
        return self.call("run", args)  # type: ignore[return-value]

    # --- the tools ---------------------------------------------------------------------------

    def _list_files(self, step: int, root: str = ".", glob: str | None = None) -> ToolResult:
        root = _relative(root, "root", self.workdir)
        if glob is not None:
            _no_escape(glob, "glob")
        data = self._remote("list", {"dir": root, "glob": glob, "limit": LIST_LIMIT}, 30)
        if not data["ok"]:
            return ListFilesResult(tool="list_files", ok=False, error=data["error"])
        return ListFilesResult(
            tool="list_files", ok=True, files=tuple(data["files"]), truncated=data["truncated"]
        )

    def _read_file(
        self, step: int, path: str, start_line: int | None = None, end_line: int | None = None
    ) -> ToolResult:
        path = _relative(path, "path", self.workdir)
        if start_line is not None and start_line < 1:
            raise ToolInputError("start_line must be >= 1")
        if end_line is not None and end_line < (start_line or 1):
            raise ToolInputError("end_line must be >= start_line")
        data = self._remote("read", {"path": path, "max_bytes": READ_MAX_BYTES}, 10)
        if not data["ok"]:
            return ReadFileResult(
                tool="read_file",
                ok=False,
                path=path,
                error=data["error"],
                suggestions=tuple(data.get("suggestions", ())),
            )
        if data["directory"]:
            return ReadFileResult(
                tool="read_file", ok=True, path=path, entries=tuple(data["entries"]) or ("(empty)",)
            )
        lines = data["text"].splitlines()
        total = len(lines)
        first = start_line or 1
        last = min(end_line or total, total)
        selected = lines[first - 1 : last]
        truncated = bool(data["cut_bytes"])
        if len(selected) > READ_MAX_LINES:
            selected, truncated = selected[:READ_MAX_LINES], True
        text = "\n".join(selected)
        if len(text) > READ_MAX_CHARS:
            text = text[:READ_MAX_CHARS]
            selected = text.splitlines()
            truncated = True
        return ReadFileResult(
            tool="read_file",
            ok=True,
            path=path,
            text=text,
            start_line=first if selected else 0,
            end_line=first + len(selected) - 1 if selected else 0,
            total_lines=total,
            truncated=truncated,
        )

    def _search(
        self,
        step: int,
        query: str,
        glob: str | None = None,
        max_results: int = 50,
        context_lines: int = 2,
        is_regex: bool = False,
    ) -> ToolResult:
        if not query:
            raise ToolInputError("query must not be empty")
        if not 1 <= max_results <= 500:
            raise ToolInputError("max_results must be between 1 and 500")
        if not 0 <= context_lines <= 10:
            raise ToolInputError("context_lines must be between 0 and 10")
        cmd = ["rg", "--json", "-C", str(context_lines), "--max-columns", "500"]
        cmd += ["--max-filesize", "2M"] + ([] if is_regex else ["-F"])
        if glob:
            _no_escape(glob, "glob")
            cmd += ["--glob", glob]
        cmd += ["--", query, "."]
        result = self._exec(cmd, 60)
        if result.timed_out:
            return SearchResult(tool="search", ok=False, query=query, error="search timed out")
        hits, truncated = _parse_rg(result.stdout, max_results, context_lines)
        if result.exit_code not in (0, 1) and not hits:
            error = " ".join(result.stderr.split())[:400] or f"rg exit {result.exit_code}"
            return SearchResult(tool="search", ok=False, query=query, error=error)
        return SearchResult(tool="search", ok=True, query=query, hits=hits, truncated=truncated)

    def _apply_patch(self, step: int, unified_diff: str) -> ToolResult:
        artifact = f"diffs/step_{step:04d}.patch"
        self._write_artifact(artifact, unified_diff)
        patch = normalize_patch(unified_diff, strict=self.strict_patch, read_text=self._file_text)
        if patch.text != unified_diff:
            self._write_artifact(artifact, patch.text)
        chunks = [
            patch.text[i : i + ENV_CHUNK_CHARS] for i in range(0, len(patch.text), ENV_CHUNK_CHARS)
        ]
        env = {f"AB_PATCH_{i}": chunk for i, chunk in enumerate(chunks)}
        args = {
            "chunks": len(chunks),
            "strip": patch.strip,
            "strict": self.strict_patch,
            # Checked in the sandbox right before git apply: symlinks resolve in its own view.
            "paths": list(patch.paths),
        }
        data = self._remote("apply", args, 60, env=env)
        if not data["ok"]:
            error = (data.get("error") or "git apply failed").strip()
            return PatchResult(tool="apply_patch", ok=False, error=error, artifact=artifact)
        notes = list(patch.notes)
        if data["flags"]:
            notes.append(f"applied with {' '.join(data['flags'])}")
        return PatchResult(
            tool="apply_patch",
            ok=True,
            paths=patch.paths,
            notes=tuple(notes),
            git_flags=tuple(data["flags"]),
            artifact=artifact,
        )

    def _run(
        self,
        step: int,
        command: str,
        timeout_sec: float | None = None,
        env: dict[str, str] | None = None,
        network: bool | None = None,
    ) -> ToolResult:
        if not command.strip():
            raise ToolInputError("command must not be empty")
        if network and not self.allow_network:
            raise ToolInputError("network access is disabled for agent commands")
        if timeout_sec is not None and not 0 < timeout_sec <= MAX_RUN_TIMEOUT_SEC:
            raise ToolInputError(f"timeout_sec must be between 1 and {MAX_RUN_TIMEOUT_SEC}")
        for key, value in (env or {}).items():
            if not _ENV_NAME.match(key) or not isinstance(value, str):
                raise ToolInputError(f"env: invalid variable {key!r} (names [A-Za-z_0-9], str)")
        timeout = timeout_sec or self.default_timeout_sec
        result = self._exec(command, timeout, env=env, network=bool(network))
        return self._run_result("run", f"logs/tool_step_{step:04d}.txt", command, result)

    def run_tests(self, command: str, timeout_sec: float, label: str) -> RunResult:
        """The task's test command (not a tool the agent calls): output to logs/<label>.txt."""
        result = self._exec(command, timeout_sec)
        return self._run_result("tests", f"logs/{label}.txt", command, result)

    # --- helpers -----------------------------------------------------------------------------

    def _run_result(self, tool: str, artifact: str, command: str, result: ExecResult) -> RunResult:
        log = (
            f"$ {command}\n[exit {result.exit_code}, {result.duration_sec:.2f}s"
            f"{', timed out' if result.timed_out else ''}"
            f"{', output truncated' if result.truncated else ''}]\n"
            f"--- stdout ---\n{result.stdout}\n--- stderr ---\n{result.stderr}\n"
        )
        self._write_artifact(artifact, log)
        return RunResult(
            tool=tool,
            ok=result.exit_code == 0,
            error="" if result.exit_code == 0 else f"exit code {result.exit_code}",
            command=command,
            exit_code=result.exit_code,
            stdout=result.stdout,
            stderr=result.stderr,
            timed_out=result.timed_out,
            truncated=result.truncated,
            artifact=artifact,
            duration_sec=result.duration_sec,
        )

    def _file_text(self, path: str) -> str | None:
        """A file's content for patch conversion; None when it does not exist."""
        data = self._remote("read", {"path": path, "max_bytes": READ_MAX_BYTES}, 10)
        if not data["ok"]:
            if data["error"].startswith("no such file"):
                return None
            raise PatchError(data["error"])
        if data["directory"]:
            raise PatchError(f"{path} is a directory")
        return data["text"]

    def _remaining(self, timeout: float) -> float:
        if self.deadline is None:
            return timeout
        return max(1.0, min(timeout, self.deadline - time.monotonic()))

    def _exec(
        self,
        cmd: str | list[str],
        timeout: float,
        *,
        env: dict[str, str] | None = None,
        network: bool = False,
    ) -> ExecResult:
        return self.sandbox.exec(
            cmd, timeout=self._remaining(timeout), cwd=self.workdir, env=env, network=network
        )

    def _remote(
        self, op: str, args: dict[str, Any], timeout: float, env: dict[str, str] | None = None
    ) -> dict[str, Any]:
        payload = json.dumps({"root": self.root, "workdir": self.workdir, **args})
        cmd = ["python3", "-I", "-c", remote.SCRIPT, op, payload]
        result = self._exec(cmd, timeout, env=env)
        if result.timed_out:
            raise RemoteError(f"{op} timed out after {timeout:.0f}s")
        try:
            return json.loads(result.stdout.strip().splitlines()[-1])
        except (IndexError, json.JSONDecodeError) as exc:
            tail = (result.stderr or result.stdout).strip()[-300:]
            raise RemoteError(f"{op} failed (exit {result.exit_code}): {tail}") from exc

    def _write_artifact(self, relative: str, text: str) -> None:
        path = self.artifacts_dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def _parse_rg(
    stdout: str, max_results: int, context_lines: int
) -> tuple[tuple[SearchHit, ...], bool]:
    """Matches with their context from ``rg --json`` events (context lines come as their own
    events before and after each match, per file)."""
    hits: list[dict[str, Any]] = []
    context: list[tuple[str, int, str]] = []
    truncated = False
    for raw in stdout.splitlines():
        try:
            event = json.loads(raw)
        except json.JSONDecodeError:
            continue
        kind = event.get("type")
        if kind not in ("match", "context"):
            continue
        data = event["data"]
        path = data["path"].get("text", "?").removeprefix("./")
        number = data.get("line_number") or 0
        text = data["lines"].get("text", "").rstrip("\n")
        if kind == "context":
            context.append((path, number, text))
            for hit in hits[-3:]:
                if hit["path"] == path and 0 < number - hit["line_number"] <= context_lines:
                    hit["after"].append(text)
            continue
        if len(hits) >= max_results:
            truncated = True
            break
        before = [t for p, n, t in context if p == path and 0 < number - n <= context_lines]
        hits.append(
            {"path": path, "line_number": number, "line": text, "before": before, "after": []}
        )
        context.clear()
    return (
        tuple(
            SearchHit(h["path"], h["line_number"], h["line"], tuple(h["before"]), tuple(h["after"]))
            for h in hits
        ),
        truncated,
    )


def _relative(path: str, field_name: str, workdir: str) -> str:
    """A path relative to the working directory; absolute paths inside it are accepted."""
    if path.startswith(workdir + "/") or path == workdir:
        path = path[len(workdir) :].lstrip("/") or "."
    if path in ("", "."):
        return "."
    try:
        return check_relative_path(path)
    except PatchError as exc:
        raise ToolInputError(f"{field_name}: {exc}") from exc


def _no_escape(pattern: str, field_name: str) -> None:
    if pattern.startswith("/") or ".." in pattern.split("/"):
        raise ToolInputError(f"{field_name}: patterns may not leave the repository: {pattern!r}")


def _brief(arguments: Any) -> Any:
    """Arguments for the event log, long strings shortened (patches live in diffs/)."""
    if not isinstance(arguments, dict):
        return str(arguments)[:200]
    return {
        k: (v[:200] + "..." if isinstance(v, str) and len(v) > 200 else v)
        for k, v in arguments.items()
    }


def _with(result: ToolResult, **changes: Any) -> ToolResult:
    return replace(result, **changes)


__all__ = [
    "TOOL_NAMES",
    "TOOL_SCHEMAS",
    "ListFilesResult",
    "PatchResult",
    "ReadFileResult",
    "RunResult",
    "SearchHit",
    "SearchResult",
    "ToolResult",
    "Toolbox",
]
