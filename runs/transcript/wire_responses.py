"""OpenAI Responses (``POST /v1/responses``), Codex CLI's API: the request's ``instructions``
and ``input`` items (messages, ``function_call`` / ``custom_tool_call`` and their outputs,
``reasoning``), and the reply, whole or reassembled from its stream
(``response.output_item.added`` / ``.done``, ``response.output_text.delta``,
``response.function_call_arguments.delta``, ``response.completed``)."""

from __future__ import annotations

from typing import Any

from runs.transcript.shapes import as_text, content_text, decoded, integer, obj, objects
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

# Items the model produced (a reply is a run of them), and the outputs the CLI sent back.
_CALLS = {"function_call", "custom_tool_call", "local_shell_call"}
_OUTPUTS = {"function_call_output", "custom_tool_call_output", "local_shell_call_output"}


def request_messages(body: dict) -> list[Msg]:
    found: list[Msg] = []
    if body.get("instructions"):
        found.append(Msg("system", as_text(body.get("instructions"))))
    items = body.get("input")
    if isinstance(items, str):
        return [*found, Msg("user", items)]
    return found + _group(objects(items))


def _group(items: list[dict]) -> list[Msg]:
    """Consecutive model items (reasoning, assistant text, calls) are one assistant message,
    as one reply produced them; consecutive outputs are one tool message."""
    found: list[Msg] = []
    for item in items:
        kind = item.get("type") or "message"
        role = str(item.get("role") or "")
        if kind == "message" and role != "assistant":
            found.append(
                Msg(
                    "system" if role in ("system", "developer") else "user",
                    content_text(item.get("content")),
                )
            )
            continue
        if kind in _OUTPUTS:
            if not found or found[-1].role != "tool":
                found.append(Msg("tool"))
            found[-1].results.append(
                WireResult(as_text(item.get("call_id")), _output_text(item.get("output")))
            )
            continue
        if not found or found[-1].role != "assistant":
            found.append(Msg("assistant"))
        _add_item(found[-1], item, kind)
    return found


def _add_item(msg: Msg, item: dict, kind: str) -> None:
    if kind == "message":
        text = content_text(item.get("content"))
        msg.text = f"{msg.text}\n{text}".strip("\n") if msg.text else text
    elif kind == "reasoning":
        summary = "\n".join(as_text(p.get("text")) for p in objects(item.get("summary")))
        detail = "\n".join(as_text(p.get("text")) for p in objects(item.get("content")))
        hidden = "[encrypted reasoning]" if item.get("encrypted_content") else ""
        text = summary or detail or hidden
        msg.reasoning = f"{msg.reasoning}\n{text}".strip("\n") if msg.reasoning else text
    elif kind == "function_call":
        msg.calls.append(
            WireCall(_call_id(item), as_text(item.get("name")), decoded(item.get("arguments")))
        )
    elif kind == "custom_tool_call":  # a freeform tool (Codex's apply_patch): raw text input
        msg.calls.append(WireCall(_call_id(item), as_text(item.get("name")), item.get("input")))
    elif kind == "local_shell_call":
        msg.calls.append(WireCall(_call_id(item), "local_shell", obj(item.get("action"))))
    else:  # web_search_call and friends: named, not parsed
        msg.calls.append(
            WireCall(
                _call_id(item), kind, {k: v for k, v in item.items() if k not in ("type", "id")}
            )
        )


def _call_id(item: dict) -> str:
    return as_text(item.get("call_id") or item.get("id"))


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    return content_text(output)


def reply(text: str) -> Reply:
    if is_sse(text):
        return _stream(text)
    body = load_json(text)
    if not isinstance(body, dict):
        raise WireError("expected a JSON object")
    if "output" not in body and body.get("error"):
        return Reply(error=error_text(body))
    return _from_response(body, Reply())


def _from_response(body: dict, result: Reply) -> Reply:
    result.model = as_text(body.get("model")) or result.model
    result.stop = as_text(body.get("status")) or result.stop
    if body.get("error"):
        result.error = error_text(body)
    items = objects(body.get("output"))
    if items:
        msgs = _group(items)
        result.message = msgs[0] if msgs else None
    usage = obj(body.get("usage"))
    if integer(usage.get("input_tokens")) is not None:
        result.tokens_in = integer(usage.get("input_tokens"))
    if integer(usage.get("output_tokens")) is not None:
        result.tokens_out = integer(usage.get("output_tokens"))
    return result


def _stream(text: str) -> Reply:
    result = Reply()
    items: dict[int, dict] = {}
    final: dict | None = None
    for event in sse_events(text, result.problems):
        data = obj(event.data)
        kind = str(data.get("type") or event.event)
        index = integer(data.get("output_index"))
        if kind in ("response.created", "response.in_progress"):
            result.model = as_text(obj(data.get("response")).get("model")) or result.model
        elif kind in ("response.output_item.added", "response.output_item.done"):
            items[index or 0] = dict(obj(data.get("item")))
        elif kind == "response.output_text.delta":
            item = items.setdefault(index or 0, {"type": "message", "role": "assistant"})
            item["_text"] = item.get("_text", "") + as_text(data.get("delta"))
        elif kind in (
            "response.function_call_arguments.delta",
            "response.custom_tool_call_input.delta",
        ):
            item = items.setdefault(index or 0, {"type": "function_call"})
            field = "input" if item.get("type") == "custom_tool_call" else "arguments"
            item[field] = as_text(item.get(field)) + as_text(data.get("delta"))
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            item = items.setdefault(index or 0, {"type": "reasoning"})
            item["_reasoning"] = item.get("_reasoning", "") + as_text(data.get("delta"))
        elif kind in ("response.completed", "response.failed", "response.incomplete"):
            final = obj(data.get("response"))
        elif kind == "error":
            result.error = error_text({"error": data}) or as_text(data.get("message"))
    if final is not None and objects(final.get("output")):
        return _from_response(final, result)
    if final is not None:
        _from_response(final, result)  # usage and status; the items come from the events
    msgs = _group([_finished(items[i]) for i in sorted(items)])
    result.message = msgs[0] if msgs else result.message
    return result


def _finished(item: dict) -> dict:
    """An item built from deltas only (its ``.done`` event never came: a cut stream)."""
    if "_text" in item and not item.get("content"):
        item["content"] = [{"type": "output_text", "text": item["_text"]}]
    if "_reasoning" in item and not item.get("summary"):
        item["summary"] = [{"type": "summary_text", "text": item["_reasoning"]}]
    return item
