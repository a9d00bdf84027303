"""Gathering an attempt's ``Evidence`` from what the harness stored: the final patch (the
harness's own diff of the workspace), the transcript the gateway or the agent's file recorded,
the baseline and final test logs, and the task's spec.

What the sandbox left is untrusted input: every file is read through ``runs.artifacts`` (inside
the attempt's folder, no links followed) up to a byte limit, JSON is parsed leniently, and past
``MAX_TOOL_USES`` calls or ``MAX_ARGUMENT_CHARS`` of one call's arguments the rest is not read
(the evidence says so in ``notes``). Nothing here raises on a malformed file.
"""

from __future__ import annotations

import json
import re
from pathlib import PurePosixPath

from runs import artifacts
from runs.integrity.rules import Evidence, ToolUse
from runs.models import Attempt
from runs.pipeline.artifacts import LOG_NAMES

MAX_PATCH_CHARS = 2 * 1024 * 1024
MAX_TOOL_USES = 5_000
MAX_ARGUMENT_CHARS = 20_000
MAX_WORDS_CHARS = 4_000
# Test counts are in the summary at a log's end: its tail is enough.
LOG_TAIL_BYTES = 256 * 1024

# Harbor tasks: the verifier's tests and the oracle's solution are copied in only for them
# (runs/pipeline/harbor.py); the agent never has a reason to look there.
HARBOR_HIDDEN_PATHS = ("/tests", "/solution", "/tmp/.harbor")
HARBOR_HIDDEN_NAMES = ("solve.sh",)
GOLD_NAMES = ("gold.patch", "gold_patch")
SHELL_KEYS = ("command", "cmd", "script", "bash", "input")

# pytest's summary ("3 passed, 1 failed in 0.12s", with or without its "=" rule), unittest's
# "Ran 4 tests", and pytest's "collected 4 items".
_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed)\b")
_SUMMARY = re.compile(
    r"^=*\s*(?:\d+ (?:passed|failed|errors?|skipped|xfailed|xpassed|deselected|"
    r"warnings?)(?:, )?)+.* in [\d.]+s"
)
_UNITTEST = re.compile(r"^Ran (\d+) tests? in ")
_COLLECTED = re.compile(r"\bcollected (\d+) items?")


def collected_tests(log: str) -> int | None:
    """How many tests a run's log says ran: the last summary line's counts (pytest), "Ran N
    tests" (unittest), else "collected N items"; None when the log says none of these."""
    for line in reversed(log.splitlines()):
        text = line.strip()
        if _SUMMARY.match(text):
            return sum(int(n) for n, _ in _COUNT.findall(text.split(" in ")[0]))
        unit = _UNITTEST.match(text)
        if unit:
            return int(unit.group(1))
    collected = _COLLECTED.findall(log)
    return int(collected[-1]) if collected else None


def _log_count(attempt: Attempt, stage: str) -> int | None:
    tail = artifacts.read_tail(attempt, LOG_NAMES[stage], LOG_TAIL_BYTES)
    return collected_tests(tail.text) if tail is not None else None


def _command_of(name: str, arguments: str, raw) -> str:
    """The shell command a tool call ran, when it is a shell tool's call."""
    value = raw
    if value is None:
        try:
            value = json.loads(arguments)
        except ValueError:
            value = None
    if isinstance(value, dict):
        for key in SHELL_KEYS:
            found = value.get(key)
            if isinstance(found, list):
                return " ".join(str(v) for v in found)[:MAX_ARGUMENT_CHARS]
            if isinstance(found, str):
                return found[:MAX_ARGUMENT_CHARS]
        return ""
    if name.lower() in ("bash", "shell", "sh", "terminal", "exec", "execute_bash", "run"):
        return arguments
    return ""


def tool_uses(found) -> tuple[tuple[ToolUse, ...], str, list[str]]:
    """The transcript's tool calls, the agent's last words and what was cut."""
    uses: list[ToolUse] = []
    notes: list[str] = []
    words = ""
    for turn in found.turns:
        if turn.role == "assistant" and turn.text.text.strip():
            words = turn.text.text
        for call in turn.tool_calls:
            if len(uses) >= MAX_TOOL_USES:
                notes.append(f"only the first {MAX_TOOL_USES} tool calls were read")
                return tuple(uses), words[-MAX_WORDS_CHARS:], notes
            arguments = call.arguments.text[:MAX_ARGUMENT_CHARS]
            raw = call.input if isinstance(call.input, dict) else None
            uses.append(
                ToolUse(str(call.name)[:200], arguments, _command_of(call.name, arguments, raw))
            )
    if found.submission and not words:
        words = found.submission
    return tuple(uses), words[-MAX_WORDS_CHARS:], notes


def hidden(attempt: Attempt) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The paths and file names the attempt's task keeps from its agent."""
    task = attempt.task
    paths: list[str] = []
    names: list[str] = list(GOLD_NAMES)
    if task.source == "harbor":
        paths += HARBOR_HIDDEN_PATHS
        names += HARBOR_HIDDEN_NAMES
    spec = task.spec if isinstance(task.spec, dict) else {}
    reference = spec.get("reference_solution")
    if isinstance(reference, str) and reference.strip():
        names.append(PurePosixPath(reference.strip()).name)
    return tuple(dict.fromkeys(paths)), tuple(dict.fromkeys(n for n in names if n))


def gather(attempt: Attempt) -> Evidence:
    """Everything the rules look at for ``attempt``, from the database and its folder."""
    notes: list[str] = []
    uses: tuple[ToolUse, ...] = ()
    words = ""
    found = artifacts.read_transcript(attempt)
    if found is not None:
        if found.error:
            notes.append(f"transcript: {found.error}"[:300])
        uses, words, cut = tool_uses(found)
        notes += cut
    patch = attempt.final_patch or ""
    if len(patch) > MAX_PATCH_CHARS:
        notes.append(f"only the first {MAX_PATCH_CHARS} characters of the patch were read")
        patch = patch[:MAX_PATCH_CHARS]
    paths, names = hidden(attempt)
    spec = attempt.task.spec if isinstance(attempt.task.spec, dict) else {}
    # A Harbor task may give its sandbox the internet (runs/pipeline/harbor.py); no other does.
    internet = attempt.task.source == "harbor" and bool(spec.get("allow_internet"))
    has_folder = bool(artifacts.attempt_root(attempt))
    return Evidence(
        patch=patch,
        tool_uses=uses,
        final_words=words,
        baseline_tests=_log_count(attempt, "baseline_run") if has_folder else None,
        final_tests=_log_count(attempt, "final_test") if has_folder else None,
        hidden_paths=paths,
        hidden_names=names,
        internet_allowed=internet,
        resolved=attempt.resolved,
        notes=tuple(notes),
    )
