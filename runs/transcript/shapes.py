"""The shape every trajectory format is read into (``Transcript``, ``Turn``, ``ToolCall``,
``Block``) and the small lenient readers the format modules share. Pure: no Django."""

from __future__ import annotations

import datetime as dt
import json
import math
import posixpath
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

# A 2 MB trajectory exists in the SWE-bench sample; past this the page would be unreadable
# anyway, and the whole file stays a download.
MAX_FILE_BYTES = 16 * 1024 * 1024
# One text block (a tool result, a message) is cut past this; the page says how much is left.
MAX_BLOCK_CHARS = 50_000
# Blocks longer than this many lines are folded behind "show all" on the page.
FOLD_LINES = 25
FOLD_CHARS = 3_000

Reader = Callable[[str], bytes | None]

# An export (ATIF) wants every character, not the page's cut: ``full_blocks()`` lifts it.
_BLOCK_LIMIT: ContextVar[int | None] = ContextVar("transcript_block_limit", default=MAX_BLOCK_CHARS)


@contextmanager
def full_blocks() -> Iterator[None]:
    """Within this, ``block`` keeps whole texts (the file itself is still capped)."""
    token = _BLOCK_LIMIT.set(None)
    try:
        yield
    finally:
        _BLOCK_LIMIT.reset(token)


class TranscriptError(ValueError):
    """A trajectory file that is not what its name says."""


@dataclass
class Block:
    """A piece of text as shown: cut at MAX_BLOCK_CHARS, folded when long."""

    text: str
    total_chars: int
    lines: int

    @property
    def cut(self) -> int:
        """How many characters were left out."""
        return self.total_chars - len(self.text)

    @property
    def folded(self) -> bool:
        return self.lines > FOLD_LINES or len(self.text) > FOLD_CHARS

    def __bool__(self) -> bool:
        return bool(self.text)


def block(value: Any) -> Block:
    text = as_text(value)
    limit = _BLOCK_LIMIT.get()
    shown = text if limit is None else text[:limit]
    return Block(text=shown, total_chars=len(text), lines=shown.count("\n") + 1 if shown else 0)


@dataclass
class ToolCall:
    name: str
    arguments: Block
    call_id: str = ""
    result: Block | None = None  # None: no result recorded
    is_error: bool = False
    patch: str = ""  # the diff an apply_patch call applied (as stored in diffs/)
    patch_file: str = ""  # that diff's file in the attempt folder
    artifact: str = ""  # the call's full output in the attempt folder
    # The arguments as the agent sent them when they were an object (for an export that
    # must keep them structured); None when only their text is known.
    input: Any = field(default=None, repr=False)


@dataclass
class Turn:
    index: int
    role: str  # "system" | "user" | "assistant" | "tool" | "event"
    text: Block
    reasoning: Block | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    title: str = ""  # an event's name, a model's name
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None
    is_error: bool = False
    # An assistant turn's model call: when it started and when its reply was in (seconds since
    # the epoch), where the file records them (the gateway's model_calls.jsonl does).
    call_started: float | None = None
    call_ended: float | None = None


@dataclass
class Transcript:
    source: str  # "mini-swe-agent" | "swe-agent" | "inspect" | "llm" | "events" | ...
    file: str  # the file it came from, relative to the attempt folder
    turns: list[Turn] = field(default_factory=list)
    submission: str = ""
    exit_status: str = ""
    model: str = ""
    # The agent program and its version, where its file says (mini-swe-agent's info, ATIF's
    # agent): what an export names as the agent's version rather than the harness's.
    agent_name: str = ""
    agent_version: str = ""
    cost_usd: float | None = None
    api_calls: int | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    scores: list[tuple[str, str]] = field(default_factory=list)  # Inspect's (scorer, value)
    notes: list[str] = field(default_factory=list)  # what could not be read, what was cut
    error: str = ""  # the file could not be read at all

    @property
    def tool_call_count(self) -> int:
        return sum(len(t.tool_calls) for t in self.turns)

    def add(self, role: str, text: Any = "", **fields: Any) -> Turn:
        """Append a turn numbered after the last one."""
        turn = Turn(index=len(self.turns), role=role, text=block(text), **fields)
        self.turns.append(turn)
        return turn


# --- lenient readers: files are not trusted to match their format -----------------------------


def safe_relative(value: Any) -> str:
    """A path inside the attempt's folder, or "": an event names it, so it is not trusted."""
    if not isinstance(value, str) or not value:
        return ""
    cleaned = posixpath.normpath(value.replace("\\", "/"))
    if cleaned.startswith(("/", "..")) or ".." in cleaned.split("/") or cleaned == ".":
        return ""
    return cleaned


def sum_tokens(transcript: Transcript) -> None:
    turns = [t for t in transcript.turns if t.tokens_in is not None or t.tokens_out is not None]
    if turns and transcript.tokens_in is None:
        transcript.tokens_in = sum(t.tokens_in or 0 for t in turns)
        transcript.tokens_out = sum(t.tokens_out or 0 for t in turns)


def sum_cost(transcript: Transcript) -> None:
    costs = [t.cost_usd for t in transcript.turns if t.cost_usd is not None]
    if costs and transcript.cost_usd is None:
        transcript.cost_usd = round(sum(costs), 6)


def parse_json(data: bytes, name: str) -> Any:
    if len(data) > MAX_FILE_BYTES:
        raise TranscriptError(f"larger than {MAX_FILE_BYTES // (1024 * 1024)} MB; download it")
    try:
        return json.loads(data.decode("utf-8", errors="replace"))
    except json.JSONDecodeError as exc:
        message = f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        raise TranscriptError(message) from None


def parse_jsonl(data: bytes) -> list[dict]:
    """One object a line; lines that are not objects are skipped (a crash can cut the last)."""
    return list(_jsonl_objects(data[:MAX_FILE_BYTES]))


def _jsonl_objects(data: bytes) -> Iterator[dict]:
    for line in data.decode("utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            yield value


def obj(value: Any) -> dict:
    """``value`` when it is an object, else an empty one."""
    return value if isinstance(value, dict) else {}


def objects(values: Any) -> list[dict]:
    """The objects of a list (anything else is dropped); [] for a non-list."""
    return [m for m in values if isinstance(m, dict)] if isinstance(values, list) else []


def content_text(content: Any) -> str:
    text, reasoning = content_parts(content)
    return text if not reasoning else f"{reasoning}\n\n{text}".strip()


def content_parts(content: Any) -> tuple[str, str]:
    """(text, reasoning) of a message's content: a string, or a list of typed parts."""
    if content is None:
        return "", ""
    if isinstance(content, str):
        return content, ""
    if not isinstance(content, list):
        return as_text(content), ""
    texts, reasoning = [], []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict):
            kind = part.get("type")
            if kind == "reasoning":
                reasoning.append(as_text(part.get("reasoning") or part.get("summary")))
            elif "text" in part:
                texts.append(as_text(part.get("text")))
            else:
                texts.append(f"[{kind or 'content'}]")
    return "\n".join(texts), "\n".join(r for r in reasoning if r)


def decoded(arguments: Any) -> Any:
    """Tool-call arguments as an object when they are a JSON string of one."""
    if isinstance(arguments, str):
        try:
            value = json.loads(arguments)
        except ValueError:
            return arguments
        return value if isinstance(value, dict | list) else arguments
    return arguments


def as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
        # {"path": "x", "unified_diff": "..."}: one "key: value" block each, newlines kept.
        return "\n".join(f"{k}:\n{v}" if "\n" in v else f"{k}: {v}" for k, v in value.items())
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def integer(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def iso_seconds(value: Any) -> float | None:
    """An ISO 8601 time (``Z`` or an offset; naive is UTC) as seconds since the epoch; None
    when it is not one."""
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    seconds = moment.timestamp()
    return seconds if math.isfinite(seconds) else None


def iso_text(seconds: float) -> str:
    """Seconds since the epoch as ISO 8601 in UTC (``2026-11-27T10:18:51.250000Z``)."""
    moment = dt.datetime.fromtimestamp(seconds, tz=dt.UTC)
    return moment.isoformat().replace("+00:00", "Z")
