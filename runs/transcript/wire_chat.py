"""OpenAI chat completions (``POST /v1/chat/completions``), mini-swe-agent's API (through
litellm): the request's ``messages`` (``tool_calls``, ``tool`` messages) and the reply, whole or
reassembled from its chunks (``choices[0].delta`` with ``content`` and ``tool_calls`` pieces
by index)."""

from __future__ import annotations

from runs.transcript.shapes import as_text, content_parts, decoded, integer, obj, objects
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
    return [_message(m) for m in objects(body.get("messages"))]


def _message(message: dict) -> Msg:
    role = str(message.get("role") or "user")
    text, reasoning = content_parts(message.get("content"))
    reasoning = as_text(message.get("reasoning_content") or message.get("reasoning")) or reasoning
    if role == "developer":
        role = "system"
    msg = Msg(role, text, reasoning)
    if role == "tool":
        msg.results.append(WireResult(as_text(message.get("tool_call_id")), text))
        msg.text = ""
    for raw in objects(message.get("tool_calls")):
        function = obj(raw.get("function"))
        msg.calls.append(
            WireCall(
                as_text(raw.get("id")),
                as_text(function.get("name")),
                decoded(function.get("arguments")),
            )
        )
    return msg


def reply(text: str) -> Reply:
    if is_sse(text):
        return _stream(text)
    body = load_json(text)
    if not isinstance(body, dict):
        raise WireError("expected a JSON object")
    if "choices" not in body and body.get("error"):
        return Reply(error=error_text(body))
    choices = objects(body.get("choices"))
    result = Reply(model=as_text(body.get("model")))
    if choices:
        result.message = _message({"role": "assistant", **obj(choices[0].get("message"))})
        result.stop = as_text(choices[0].get("finish_reason"))
    _usage(result, obj(body.get("usage")))
    return result


def _usage(result: Reply, usage: dict) -> None:
    if integer(usage.get("prompt_tokens")) is not None:
        result.tokens_in = integer(usage.get("prompt_tokens"))
    if integer(usage.get("completion_tokens")) is not None:
        result.tokens_out = integer(usage.get("completion_tokens"))


def _stream(text: str) -> Reply:
    result = Reply()
    content, reasoning = [], []
    calls: dict[int, dict] = {}
    for event in sse_events(text, result.problems):
        data = obj(event.data)
        if data.get("error"):
            result.error = error_text(data)
        result.model = as_text(data.get("model")) or result.model
        if data.get("usage"):
            _usage(result, obj(data.get("usage")))
        choices = objects(data.get("choices"))
        if not choices:
            continue
        choice = choices[0]
        result.stop = as_text(choice.get("finish_reason")) or result.stop
        delta = obj(choice.get("delta"))
        content.append(as_text(delta.get("content")))
        reasoning.append(as_text(delta.get("reasoning_content") or delta.get("reasoning")))
        for piece in objects(delta.get("tool_calls")):
            call = calls.setdefault(
                integer(piece.get("index")) or 0, {"id": "", "name": "", "arguments": ""}
            )
            function = obj(piece.get("function"))
            call["id"] = call["id"] or as_text(piece.get("id"))
            call["name"] += as_text(function.get("name"))
            call["arguments"] += as_text(function.get("arguments"))
    if content or calls or reasoning:
        result.message = Msg("assistant", "".join(content), "".join(reasoning))
        for index in sorted(calls):
            call = calls[index]
            result.message.calls.append(
                WireCall(call["id"], call["name"], decoded(call["arguments"]))
            )
    return result
