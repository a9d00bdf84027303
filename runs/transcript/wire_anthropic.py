"""Anthropic Messages (``POST /v1/messages``), Claude Code's API: the request's ``system`` and
``messages`` (content blocks: text, thinking, tool_use, tool_result), and the reply, whole or
reassembled from its stream (``content_block_start`` / ``content_block_delta`` with text,
thinking and ``input_json_delta`` / ``message_delta``)."""

from __future__ import annotations

import json
from typing import Any

from runs.transcript.shapes import as_text, content_text, integer, obj, objects
from runs.transcript.wire import (
    Msg,
    Reply,
    WireCall,
    WireError,
    WireResult,
    error_text,
    is_sse,
    load_json,
    sse_events,
)


def request_messages(body: dict) -> list[Msg]:
    """The system prompt (a message of its own) and every message, in order."""
    found: list[Msg] = []
    system = body.get("system")
    if system:
        text = (
            system
            if isinstance(system, str)
            else "\n".join(as_text(b.get("text")) for b in objects(system))
        )
        found.append(Msg("system", text))
    for message in objects(body.get("messages")):
        found.append(_message(str(message.get("role") or "user"), message.get("content")))
    return found


def _message(role: str, content: Any) -> Msg:
    msg = Msg(role)
    if isinstance(content, str):
        msg.text = content
        return msg
    texts, thinking = [], []
    for part in objects(content):
        kind = part.get("type")
        if kind == "text":
            texts.append(as_text(part.get("text")))
        elif kind == "thinking":
            thinking.append(as_text(part.get("thinking")))
        elif kind == "redacted_thinking":
            thinking.append("[redacted thinking]")
        elif kind in ("tool_use", "server_tool_use"):
            msg.calls.append(
                WireCall(as_text(part.get("id")), as_text(part.get("name")), part.get("input"))
            )
        elif kind == "tool_result":
            msg.results.append(
                WireResult(
                    as_text(part.get("tool_use_id")),
                    content_text(part.get("content")),
                    part.get("is_error") is True,
                )
            )
        else:
            texts.append(f"[{kind or 'content'}]")
    msg.text = "\n".join(t for t in texts if t)
    msg.reasoning = "\n".join(t for t in thinking if t)
    return msg


def reply(text: str) -> Reply:
    """The reply in a response body: a message object, an error object, or a raw stream."""
    if is_sse(text):
        return _stream(text)
    body = load_json(text)
    if not isinstance(body, dict):
        raise WireError("expected a JSON object")
    if body.get("type") == "error" or "error" in body:
        return Reply(error=error_text(body))
    result = Reply(
        message=_message("assistant", body.get("content")),
        model=as_text(body.get("model")),
        stop=as_text(body.get("stop_reason")),
    )
    _usage(result, obj(body.get("usage")))
    return result


def _usage(result: Reply, usage: dict) -> None:
    # Anthropic counts cache reads and writes apart from input_tokens; all of them were sent.
    parts = [
        integer(usage.get(k))
        for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    ]
    if any(p is not None for p in parts):
        result.tokens_in = sum(p or 0 for p in parts)
    if integer(usage.get("output_tokens")) is not None:
        result.tokens_out = integer(usage.get("output_tokens"))


def _stream(text: str) -> Reply:
    result = Reply()
    blocks: dict[int, dict] = {}
    json_parts: dict[int, list[str]] = {}
    for event in sse_events(text, result.problems):
        data = obj(event.data)
        kind = data.get("type") or event.event
        if kind == "message_start":
            message = obj(data.get("message"))
            result.model = as_text(message.get("model"))
            _usage(result, obj(message.get("usage")))
        elif kind == "content_block_start":
            index = integer(data.get("index")) or 0
            blocks[index] = dict(obj(data.get("content_block")))
        elif kind == "content_block_delta":
            index = integer(data.get("index")) or 0
            _delta(blocks.setdefault(index, {}), obj(data.get("delta")), json_parts, index)
        elif kind == "message_delta":
            result.stop = as_text(obj(data.get("delta")).get("stop_reason")) or result.stop
            usage = obj(data.get("usage"))
            if integer(usage.get("output_tokens")) is not None:
                result.tokens_out = integer(usage.get("output_tokens"))
        elif kind == "error":
            result.error = error_text(data) or "error event"
    for index, parts in json_parts.items():
        raw = "".join(parts)
        try:
            blocks[index]["input"] = json.loads(raw) if raw.strip() else {}
        except ValueError:
            blocks[index]["input"] = raw  # cut mid-stream: shown as the text that came
            call_id = blocks[index].get("id")
            result.problems.append(f"the arguments of tool call {call_id} end early")
    if blocks:
        result.message = _message("assistant", [blocks[i] for i in sorted(blocks)])
    return result


def _delta(block: dict, delta: dict, json_parts: dict[int, list[str]], index: int) -> None:
    kind = delta.get("type")
    if kind == "text_delta":
        block.setdefault("type", "text")
        block["text"] = as_text(block.get("text")) + as_text(delta.get("text"))
    elif kind == "thinking_delta":
        block.setdefault("type", "thinking")
        block["thinking"] = as_text(block.get("thinking")) + as_text(delta.get("thinking"))
    elif kind == "input_json_delta":
        json_parts.setdefault(index, []).append(as_text(delta.get("partial_json")))
