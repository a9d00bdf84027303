"""Turning a list of chat messages into turns, shared by the formats that hold one: OpenAI-style
messages (our LLM agent, Inspect, SWE-agent's function calling, recorded model calls) and the
"assistant action, then its observation" pairs of mini-swe-agent and SWE-agent."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from runs.transcript.shapes import (
    ToolCall,
    Transcript,
    Turn,
    as_text,
    block,
    content_parts,
    content_text,
    decoded,
)


def openai_turns(
    transcript: Transcript, messages: list[dict], arguments_text: Callable[[Any], str]
) -> dict[str, ToolCall]:
    """Append turns; each ``tool`` message becomes the result of the call it answers."""
    calls: dict[str, ToolCall] = {}
    for message in messages:
        role = str(message.get("role") or "user")
        if role == "tool":
            ids = message.get("tool_call_ids") or [message.get("tool_call_id")]
            call = calls.get(str(ids[0])) if ids else None
            if call is not None and call.result is None:
                call.result = block(content_text(message.get("content")))
                error = message.get("error")
                if error:
                    call.is_error = True
                    detail = error.get("message") if isinstance(error, dict) else error
                    if detail and not call.result:
                        call.result = block(detail)
                continue
        turn = Turn(index=len(transcript.turns), role=role, text=block(""))
        text, reasoning = content_parts(message.get("content"))
        turn.text = block(text)
        if reasoning:
            turn.reasoning = block(reasoning)
        if role == "assistant" and message.get("model"):
            turn.title = as_text(message.get("model"))
        for raw in message.get("tool_calls") or []:
            if not isinstance(raw, dict):
                continue
            function = raw.get("function")
            if isinstance(function, dict):  # OpenAI: {"function": {"name", "arguments": str}}
                name, arguments = function.get("name"), function.get("arguments")
            else:  # Inspect: {"function": name, "arguments": {...}}
                name, arguments = function, raw.get("arguments")
            value = decoded(arguments)
            call = ToolCall(
                name=as_text(name) or "?",
                arguments=block(arguments_text(value)),
                call_id=as_text(raw.get("id")),
                input=value if isinstance(value, dict) else None,
            )
            turn.tool_calls.append(call)
            if call.call_id:
                calls[call.call_id] = call
        transcript.turns.append(turn)
    return calls


def paired_observations(
    transcript: Transcript, messages: list[dict], make: Callable[[int, dict], Turn]
) -> None:
    """Append turns; the message right after an assistant turn with one tool call and no
    result is that call's result (mini-swe-agent and SWE-agent without function calling)."""
    pending: ToolCall | None = None
    for message in messages:
        role = str(message.get("role") or "")
        if pending is not None and role in ("user", "tool"):
            pending.result = block(content_text(message.get("content")))
            pending.is_error = looks_failed(pending.result.text)
            pending = None
            continue
        turn = make(len(transcript.turns), message)
        transcript.turns.append(turn)
        pending = None
        if turn.role == "assistant" and len(turn.tool_calls) == 1 and not turn.tool_calls[0].result:
            pending = turn.tool_calls[0]


_RETURNCODE = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")


def looks_failed(output: str) -> bool:
    match = _RETURNCODE.search(output[:200])
    return bool(match and match.group(1) != "0")
