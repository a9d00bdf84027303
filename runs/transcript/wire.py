"""What the four wire APIs have in common once read: a request's messages and a reply,
normalised (``Msg``, ``Reply``), and the server-sent-events framing of a streamed response.

``wire_anthropic`` (Messages), ``wire_responses`` (OpenAI Responses), ``wire_chat`` (chat
completions) and ``wire_gemini`` (Google's Gemini API) each turn a request body into ``Msg``s
and a response (JSON, or the raw SSE text of a stream) into a ``Reply``; ``model_calls`` builds
the conversation from them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any


@dataclass
class WireCall:
    """A tool call in a message: its id, name and arguments (an object, or text)."""

    call_id: str
    name: str
    arguments: Any


@dataclass
class WireResult:
    """A tool result the CLI sent back: the id of the call it answers and what it said."""

    call_id: str
    text: str
    is_error: bool = False


@dataclass
class Msg:
    role: str  # system | user | assistant | tool
    text: str = ""
    reasoning: str = ""
    calls: list[WireCall] = field(default_factory=list)
    results: list[WireResult] = field(default_factory=list)

    def key(self) -> tuple:
        """What identifies this message when a later request sends it again: tool call ids
        (unique per call), else the text with its spacing normalised."""
        if self.calls:
            return (self.role, "calls", tuple(c.call_id or c.name for c in self.calls))
        results = tuple((r.call_id, _squash(r.text)) for r in self.results)
        return (self.role, _squash(self.text), results)


@dataclass
class Reply:
    """What the model answered to one call."""

    message: Msg | None = None
    model: str = ""
    tokens_in: int | None = None
    tokens_out: int | None = None
    stop: str = ""
    error: str = ""  # an error the upstream sent (in the body or as a stream event)
    problems: list[str] = field(default_factory=list)  # what could not be read


class WireError(ValueError):
    """A body that is not what its API sends."""


def _squash(text: str) -> str:
    return " ".join(text.split())


@dataclass
class SseEvent:
    event: str
    data: Any  # the parsed JSON, or the raw text when it is not JSON ("[DONE]")


def sse_events(text: str, problems: list[str]) -> list[SseEvent]:
    """The events of a raw SSE stream; an event whose data is cut or not JSON is named in
    ``problems`` and skipped (a stream cut at the cap ends in half an event)."""
    events = []
    for chunk in re.split(r"\r?\n\r?\n", text):
        name, data_lines = "", []
        for line in chunk.splitlines():
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data_lines.append(line[5:].lstrip(" "))
        if not data_lines:
            continue
        data = "\n".join(data_lines)
        if data.strip() == "[DONE]":
            events.append(SseEvent(name or "done", "[DONE]"))
            continue
        try:
            value = json.loads(data)
        except ValueError:
            problems.append(f"a stream event {name or '(unnamed)'} that is not JSON: {data[:80]!r}")
            continue
        events.append(SseEvent(name or str(_get(value, "type")), value))
    return events


def is_sse(text: str) -> bool:
    head = text.lstrip()[:200]
    return head.startswith(("event:", "data:", ":"))


def load_json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise WireError(f"not JSON ({exc})") from None


def _get(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, dict) else None


def error_text(body: Any) -> str:
    """The message of an error body: Anthropic's ``{"error": {"type", "message"}}``, OpenAI's
    ``{"error": {"message", "type", "code"}}``, Gemini's ``{"error": {"code", "message",
    "status"}}``, or a gateway's ``{"detail": ...}``."""
    if not isinstance(body, dict):
        return ""
    error = body.get("error")
    if isinstance(error, dict):
        kind = error.get("type") or error.get("status") or error.get("code") or ""
        message = error.get("message") or ""
        return f"{kind}: {message}".strip(": ") if kind else str(message)
    if isinstance(error, str):
        return error
    detail = body.get("detail") or body.get("message")
    return detail if isinstance(detail, str) else ""
