"""Conditions: files a model configuration adds to the workspace before its agent starts
(an ``AGENTS.md`` / ``CLAUDE.md``, a skills folder, any relative path -> text).

Two configurations that differ only in these files are two *conditions* of one agent: the
same variant, model, upstream, sampling, budgets and prices (``agent_key``), with different
files (``condition_label``). Compare and the leaderboard show which condition a row is; the
success delta and the paired test between two conditions are the same figures as for any pair.

The files are the condition's input, not the agent's work: the pipeline writes them after the
baseline through the sandbox's file methods (which never follow a link the repository or the
setup planted) and leaves them out of the final patch (``diff_excludes``), so they count
neither as the agent's changes nor in its lines changed. Pure: no Django.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from collections.abc import Iterable
from typing import Any

# The instructions file each shipped agent CLI reads from the repository it works in: the
# path a condition adds to give that CLI notes (docs/agent-clis.md lists them). mini-swe-agent
# reads none (its prompt is its config's).
CONTEXT_FILES = {
    "claude-code": "CLAUDE.md",
    "codex": "AGENTS.md",
    "qwen-code": "QWEN.md",
    "gemini-cli": "GEMINI.md",
    "opencode": "AGENTS.md",  # else CLAUDE.md, else CONTEXT.md (the first it finds)
}

# Limits (settings.CONDITION_FILES_MAX, CONDITION_FILE_MAX_BYTES, CONDITION_FILES_MAX_BYTES
# override them; these are the defaults).
MAX_FILES = 200
MAX_FILE_BYTES = 256 * 1024
MAX_TOTAL_BYTES = 1024 * 1024
MAX_PATH_CHARS = 300

# What a configuration is besides its condition: every field but these.
NOT_THE_AGENT = frozenset(
    {"id", "public_id", "name", "slug", "description", "created_at", "workspace_files", "condition"}
)


class ConditionError(ValueError):
    """Workspace files that cannot be used; ``problems`` names each path and what is wrong."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("; ".join(problems))


def clean_files(
    value: Any,
    *,
    max_files: int = MAX_FILES,
    max_file_bytes: int = MAX_FILE_BYTES,
    max_total_bytes: int = MAX_TOTAL_BYTES,
) -> dict[str, str]:
    """``value`` as {normalised relative path: text}; ``ConditionError`` naming every problem.

    A path is relative to the repository, "/"-separated, without ``..``, ``.`` or empty parts,
    never inside ``.git``, and no file is the folder of another."""
    if value in (None, ""):
        return {}
    if not isinstance(value, dict):
        raise ConditionError(["workspace files must be an object of {path: text}"])
    problems: list[str] = []
    files: dict[str, str] = {}
    total = 0
    for raw, content in value.items():
        path = str(raw)
        problem = _path_problem(path)
        if problem:
            problems.append(f"{path!r}: {problem}")
            continue
        if not isinstance(content, str):
            problems.append(f"{path}: the content must be text, got {type(content).__name__}")
            continue
        size = len(content.encode("utf-8", "surrogatepass"))
        if size > max_file_bytes:
            problems.append(f"{path}: {size} bytes, over the {max_file_bytes}-byte limit a file")
        total += size
        files[path] = content
    if len(files) > max_files:
        problems.append(f"{len(files)} files, over the limit of {max_files}")
    if total > max_total_bytes:
        problems.append(f"{total} bytes in all, over the {max_total_bytes}-byte limit")
    folders = set()
    for path in files:
        while path := posixpath.dirname(path):
            folders.add(path)
    problems += [f"{p}: both a file and the folder of another file" for p in files if p in folders]
    if problems:
        raise ConditionError(sorted(set(problems), key=problems.index))
    return dict(sorted(files.items()))


def _path_problem(path: str) -> str:
    if not path:
        return "an empty path"
    if len(path) > MAX_PATH_CHARS:
        return f"longer than {MAX_PATH_CHARS} characters"
    if "\x00" in path or "\\" in path:
        return "NUL bytes and backslashes are not allowed"
    if path.startswith("/") or path[1:3] == ":/":
        return "must be relative to the repository"
    parts = path.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return "no '..', '.' or empty parts (write a/b/c.md)"
    if any(p.lower() == ".git" for p in parts):
        return "nothing inside .git"
    return ""


def digest(files: dict[str, str]) -> str:
    """Changes with any path or content; "" for no files."""
    if not files:
        return ""
    canonical = json.dumps(files, sort_keys=True, ensure_ascii=False).encode()
    return hashlib.sha256(canonical).hexdigest()


def condition_label(files: dict[str, str]) -> str:
    """A short name for a condition: its paths (the first few) and a digest of the contents,
    so two configurations adding the same path with different texts read apart."""
    if not files:
        return ""
    paths = sorted(files)
    shown = ", ".join(paths[:3]) + (f" +{len(paths) - 3}" if len(paths) > 3 else "")
    return f"{shown} · {digest(files)[:8]}"[:200]


def agent_key(fields: dict[str, Any]) -> str:
    """What the agent is, whatever its condition: a digest of the configuration's fields but
    its name, description, ids and workspace files (``fields``: field name -> value)."""
    kept = {k: v for k, v in sorted(fields.items()) if k not in NOT_THE_AGENT}
    return hashlib.sha256(json.dumps(kept, sort_keys=True, default=str).encode()).hexdigest()


def diff_excludes(files: Iterable[str]) -> list[str]:
    """Pathspecs that keep the condition's files out of the final patch (literal: no globs)."""
    return [f":(exclude,literal){path}" for path in files]
