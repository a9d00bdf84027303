"""Google's Gemini API (``POST /v1beta/models/{model}:generateContent`` and
``:streamGenerateContent``), Gemini CLI's API: the request's ``systemInstruction`` and
``contents`` (roles ``user`` and ``model``; parts with ``text``, ``thought``, ``functionCall``,
``functionResponse``), and the reply, whole, reassembled from its SSE chunks, or from the JSON
array Google streams without ``alt=sse``.

Gemini's function calls seldom carry an id, and a CLI sends its results back by name: so each
call is numbered by its place in the conversation (``gemini-call-3``: the third call the model
made), which is the same in every request that re-sends it, and a result answers the earliest
call of the previous model turn of its name not yet answered. A reply's calls are numbered
after the calls its request holds (``number_reply``).
"""

from __future__ import annotations

import json
from typing import Any

from runs.transcript.shapes import as_text, integer, obj, objects
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

CALL_ID = "gemini-call-{}"


def request_messages(body: dict) -> list[Msg]:
    """The system instruction (a message of its own) and every content, in order."""
    found: list[Msg] = []
    system = obj(body.get("systemInstruction") or body.get("system_instruction"))
    text = "\n".join(as_text(p.get("text")) for p in objects(system.get("parts")) if "text" in p)
    if text:
        found.append(Msg("system", text))
    numbered = 0
    pending: list[WireCall] = []  # the previous model turn's calls not yet answered
    for content in objects(body.get("contents")):
        role = "assistant" if content.get("role") == "model" else "user"
        msg = _message(role, content.get("parts"), numbered)
        numbered += len(msg.calls)
        if msg.calls:
            pending = list(msg.calls)
        for result in msg.results:
            result.call_id = _answered(result.call_id, pending)
        found.append(msg)
    return found


def _answered(name: str, pending: list[WireCall]) -> str:
    """The id of the call a result of tool ``name`` answers (and that call off the list)."""
    for index, call in enumerate(pending):
        if call.name == name:
            return pending.pop(index).call_id
    return pending.pop(0).call_id if pending else name


def _message(role: str, parts: Any, numbered: int) -> Msg:
    msg = Msg(role)
    texts: list[str] = []
    thoughts: list[str] = []
    for part in objects(parts):
        if "functionCall" in part:
            call = obj(part.get("functionCall"))
            numbered += 1
            msg.calls.append(
                WireCall(CALL_ID.format(numbered), as_text(call.get("name")), call.get("args"))
            )
        elif "functionResponse" in part:
            answer = obj(part.get("functionResponse"))
            response = answer.get("response")
            msg.results.append(
                WireResult(
                    as_text(answer.get("name")),  # the call's id is found by the caller
                    _result_text(response),
                    isinstance(response, dict) and "error" in response,
                )
            )
        elif "text" in part:
            (thoughts if part.get("thought") is True else texts).append(as_text(part["text"]))
        elif part:
            texts.append(f"[{next(iter(part))}]")  # inlineData, fileData, executableCode...
    msg.text = "".join(texts)
    msg.reasoning = "".join(thoughts)
    return msg


def _result_text(response: Any) -> str:
    """A function's response: its ``output`` (or ``error``) text, else the object as JSON."""
    response = obj(response)
    for key in ("output", "error", "content", "result"):
        if isinstance(response.get(key), str):
            return response[key]
    return json.dumps(response, ensure_ascii=False) if response else ""


def reply(text: str) -> Reply:
    """The reply in a response body: one response object, a JSON array of stream chunks, an
    error object, or a raw SSE stream."""
    result = Reply()
    if is_sse(text):
        chunks = [obj(event.data) for event in sse_events(text, result.problems)]
    else:
        body = load_json(text)
        if isinstance(body, dict):
            chunks = [body]
        elif isinstance(body, list):
            chunks = objects(body)
        else:
            raise WireError("expected a JSON object or array")
    parts: list[dict] = []
    for chunk in chunks:
        if chunk.get("error"):
            result.error = result.error or error_text(chunk)
        result.model = as_text(chunk.get("modelVersion")) or result.model
        candidates = objects(chunk.get("candidates"))
        if candidates:
            candidate = candidates[0]
            result.stop = as_text(candidate.get("finishReason")) or result.stop
            parts += objects(obj(candidate.get("content")).get("parts"))
        _usage(result, obj(chunk.get("usageMetadata")))
    if parts:
        result.message = _message("assistant", parts, 0)
    return result


def number_reply(reply: Reply | None, request: list[Msg] | None) -> None:
    """Number a reply's calls after those its request holds (see the module doc)."""
    if reply is None or reply.message is None or request is None:
        return
    before = sum(len(m.calls) for m in request)
    for offset, call in enumerate(reply.message.calls, start=1):
        call.call_id = CALL_ID.format(before + offset)


def _usage(result: Reply, usage: dict) -> None:
    # The prompt count includes cached tokens; thinking is output.
    prompt = integer(usage.get("promptTokenCount"))
    if prompt is not None:
        result.tokens_in = prompt + (integer(usage.get("toolUsePromptTokenCount")) or 0)
    out = [integer(usage.get(k)) for k in ("candidatesTokenCount", "thoughtsTokenCount")]
    if any(n is not None for n in out):
        result.tokens_out = sum(n or 0 for n in out)
