"""Synthetic ``model_calls.jsonl`` recordings in the three wire APIs, written from their
published formats: Anthropic Messages (the ``message_start`` / ``content_block_*`` /
``message_delta`` stream), OpenAI Responses (``response.output_item.*``,
``response.output_text.delta``, ``response.function_call_arguments.delta``,
``response.completed``) and chat completions (``choices[0].delta`` chunks, ``[DONE]``).

``conversation(api, stream)`` is one agent run in that API: a system prompt and a task, a reply
that thinks, says something and reads a file, a reply that edits it, and a last answer. Each
request re-sends the whole history, as every CLI does.
"""

from __future__ import annotations

import json
from typing import Any

SYSTEM = "You are a coding agent."
TASK = "Fix mean() in src/toy/calc.py"
THOUGHT = "The division is probably integer division."
READ_ARGS = {"path": "src/toy/calc.py"}
READ_OUTPUT = "def mean(v):\n    return sum(v) // len(v)\n"
EDIT_ARGS = {"path": "src/toy/calc.py", "old": "//", "new": "/"}
EDIT_OUTPUT = "edited src/toy/calc.py"
DONE = "Done: mean() divides with / now."
USAGE = [(120, 30), (300, 40), (420, 12)]  # (in, out) per call
COSTS = [0.0012, 0.0021, 0.0009]


def sse(events: list[tuple[str, Any]]) -> str:
    """Raw SSE text as the gateway keeps it: ``event:`` (when named) and ``data:`` lines."""
    chunks = []
    for name, data in events:
        payload = data if isinstance(data, str) else json.dumps(data)
        chunks.append((f"event: {name}\n" if name else "") + f"data: {payload}\n\n")
    return "".join(chunks)


API = {"anthropic": "anthropic-messages", "responses": "openai-responses", "chat": "openai-chat"}
PATHS = {"anthropic": "/v1/messages", "responses": "/v1/responses", "chat": "/v1/chat/completions"}


def body(text: str, *, truncated: bool = False, status: int | None = None) -> dict:
    """A request or response as the gateway records it (``agentbench.model_call.v1``)."""
    data = text.encode()
    kept = {
        "body": text,
        "body_encoding": "utf-8",
        "body_bytes": len(data),
        "body_kept_bytes": len(data),
        "body_truncated": truncated,
    }
    return kept | ({"status": status} if status is not None else {})


def record(n: int, api: str, request: dict, response: str, **extra: Any) -> dict:
    """One line of ``model_calls.jsonl`` in the gateway's format (runs/gateway)."""
    line = {
        "format": "agentbench.model_call.v1",
        "seq": n,
        "started_at": "2026-01-05T10:00:00+00:00",
        "duration_ms": 120,
        "via": "sandbox",
        "method": "POST",
        "path": PATHS[api],
        "api": API[api],
        "model_call": True,
        "model": request.get("model", ""),
        "stream": bool(request.get("stream")),
        "outcome": "ok",
        "status": 200,
        "retries": 0,
        "attempts": [],
        "error": None,
        "usage": None,
        "cost_usd": None,
        "request": body(json.dumps(request)) | {"auth": "attempt-token"},
        "response": body(response, status=200),
    }
    return line | extra


def with_response(line: dict, text: str, *, status: int = 200, **extra: Any) -> dict:
    """``line`` with another answer (an error, a cut stream)."""
    truncated = extra.pop("truncated", False)
    return (
        line
        | {"status": status, "response": body(text, truncated=truncated, status=status)}
        | extra
    )


def jsonl(records: list[dict]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


# --- Anthropic Messages ----------------------------------------------------------------------


def anthropic_blocks(step: int) -> list[dict]:
    if step == 0:
        return [
            {"type": "thinking", "thinking": THOUGHT, "signature": "sig-1"},
            {"type": "text", "text": "Reading the file."},
            {"type": "tool_use", "id": "toolu_01", "name": "Read", "input": READ_ARGS},
        ]
    if step == 1:
        return [{"type": "tool_use", "id": "toolu_02", "name": "Edit", "input": EDIT_ARGS}]
    return [{"type": "text", "text": DONE}]


def anthropic_stream(blocks: list[dict], usage: tuple[int, int], model: str) -> str:
    events: list[tuple[str, Any]] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "usage": {
                        "input_tokens": usage[0] - 20,
                        "cache_read_input_tokens": 20,
                        "output_tokens": 1,
                    },
                },
            },
        ),
        ("ping", {"type": "ping"}),
    ]
    for i, b in enumerate(blocks):
        if b["type"] == "thinking":
            start, deltas = (
                {"type": "thinking", "thinking": ""},
                [
                    {"type": "thinking_delta", "thinking": b["thinking"][:10]},
                    {"type": "thinking_delta", "thinking": b["thinking"][10:]},
                    {"type": "signature_delta", "signature": b["signature"]},
                ],
            )
        elif b["type"] == "text":
            start, deltas = (
                {"type": "text", "text": ""},
                [
                    {"type": "text_delta", "text": b["text"][:5]},
                    {"type": "text_delta", "text": b["text"][5:]},
                ],
            )
        else:
            raw = json.dumps(b["input"])
            start = {"type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}
            deltas = [
                {"type": "input_json_delta", "partial_json": raw[j : j + 7]}
                for j in range(0, len(raw), 7)
            ]
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": i, "content_block": start},
            )
        )
        events += [
            ("content_block_delta", {"type": "content_block_delta", "index": i, "delta": d})
            for d in deltas
        ]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop},
                "usage": {"output_tokens": usage[1]},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return sse(events)


def anthropic_json(blocks: list[dict], usage: tuple[int, int], model: str) -> str:
    return json.dumps(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": blocks,
            "stop_reason": "end_turn",
            "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
        }
    )


def anthropic_conversation(stream: bool, model: str = "claude-sonnet-4-5") -> list[dict]:
    messages: list[dict] = [{"role": "user", "content": [{"type": "text", "text": TASK}]}]
    records = []
    for step in range(3):
        request = {
            "model": model,
            "max_tokens": 8000,
            "stream": stream,
            "system": [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
            "messages": json.loads(json.dumps(messages)),
        }
        blocks = anthropic_blocks(step)
        body = (anthropic_stream if stream else anthropic_json)(blocks, USAGE[step], model)
        records.append(
            record(
                step + 1,
                "anthropic",
                request,
                body,
                usage={"input_tokens": USAGE[step][0], "output_tokens": USAGE[step][1]},
                cost_usd=COSTS[step],
            )
        )
        messages.append({"role": "assistant", "content": blocks})
        if step < 2:
            output = READ_OUTPUT if step == 0 else EDIT_OUTPUT
            messages.append(
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": blocks[-1]["id"], "content": output}
                    ],
                }
            )
    return records


# --- OpenAI Responses ------------------------------------------------------------------------


def responses_items(step: int) -> list[dict]:
    if step == 0:
        return [
            {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [{"type": "summary_text", "text": THOUGHT}],
                "encrypted_content": "gAAAA",
            },
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [
                    {"type": "output_text", "text": "Reading the file.", "annotations": []}
                ],
            },
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_read",
                "name": "read_file",
                "arguments": json.dumps(READ_ARGS),
                "status": "completed",
            },
        ]
    if step == 1:
        return [
            {
                "type": "function_call",
                "id": "fc_2",
                "call_id": "call_edit",
                "name": "edit_file",
                "arguments": json.dumps(EDIT_ARGS),
                "status": "completed",
            }
        ]
    return [
        {
            "type": "message",
            "id": "msg_3",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": DONE, "annotations": []}],
        }
    ]


def responses_stream(items: list[dict], usage: tuple[int, int], model: str) -> str:
    response = {
        "id": "resp_1",
        "object": "response",
        "status": "in_progress",
        "model": model,
        "output": [],
    }
    events: list[tuple[str, Any]] = [
        ("response.created", {"type": "response.created", "response": response}),
    ]
    for i, item in enumerate(items):
        empty = dict(item)
        if item["type"] == "message":
            empty["content"] = []
        if item["type"] == "function_call":
            empty["arguments"] = ""
        if item["type"] == "reasoning":
            empty["summary"] = []
        events.append(
            (
                "response.output_item.added",
                {"type": "response.output_item.added", "output_index": i, "item": empty},
            )
        )
        if item["type"] == "message":
            text = item["content"][0]["text"]
            for piece in (text[:4], text[4:]):
                events.append(
                    (
                        "response.output_text.delta",
                        {
                            "type": "response.output_text.delta",
                            "item_id": item["id"],
                            "output_index": i,
                            "content_index": 0,
                            "delta": piece,
                        },
                    )
                )
        if item["type"] == "function_call":
            args = item["arguments"]
            for j in range(0, len(args), 9):
                events.append(
                    (
                        "response.function_call_arguments.delta",
                        {
                            "type": "response.function_call_arguments.delta",
                            "item_id": item["id"],
                            "output_index": i,
                            "delta": args[j : j + 9],
                        },
                    )
                )
            events.append(
                (
                    "response.function_call_arguments.done",
                    {
                        "type": "response.function_call_arguments.done",
                        "item_id": item["id"],
                        "output_index": i,
                        "arguments": args,
                    },
                )
            )
        if item["type"] == "reasoning":
            events.append(
                (
                    "response.reasoning_summary_text.delta",
                    {
                        "type": "response.reasoning_summary_text.delta",
                        "item_id": item["id"],
                        "output_index": i,
                        "summary_index": 0,
                        "delta": THOUGHT,
                    },
                )
            )
        events.append(
            (
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": i, "item": item},
            )
        )
    done = response | {
        "status": "completed",
        "output": items,
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1], "total_tokens": sum(usage)},
    }
    events.append(("response.completed", {"type": "response.completed", "response": done}))
    return sse(events)


def responses_json(items: list[dict], usage: tuple[int, int], model: str) -> str:
    return json.dumps(
        {
            "id": "resp_1",
            "object": "response",
            "status": "completed",
            "model": model,
            "output": items,
            "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
        }
    )


def responses_conversation(stream: bool, model: str = "gpt-5-codex") -> list[dict]:
    history: list[dict] = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": TASK}]}
    ]
    records = []
    for step in range(3):
        request = {
            "model": model,
            "instructions": SYSTEM,
            "input": json.loads(json.dumps(history)),
            "stream": stream,
            "store": False,
            "tools": [],
        }
        items = responses_items(step)
        body = (responses_stream if stream else responses_json)(items, USAGE[step], model)
        records.append(record(step + 1, "responses", request, body, cost_usd=COSTS[step]))
        history += [{k: v for k, v in i.items() if k != "status"} for i in items]
        if step < 2:
            history.append(
                {
                    "type": "function_call_output",
                    "call_id": items[-1]["call_id"],
                    "output": READ_OUTPUT if step == 0 else EDIT_OUTPUT,
                }
            )
    return records


# --- chat completions ------------------------------------------------------------------------


def chat_message(step: int) -> dict:
    if step == 0:
        return {
            "role": "assistant",
            "content": "Reading the file.",
            "reasoning_content": THOUGHT,
            "tool_calls": [
                {
                    "id": "call_read",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": json.dumps(READ_ARGS)},
                }
            ],
        }
    if step == 1:
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_edit",
                    "type": "function",
                    "function": {"name": "edit_file", "arguments": json.dumps(EDIT_ARGS)},
                }
            ],
        }
    return {"role": "assistant", "content": DONE}


def chat_stream(message: dict, usage: tuple[int, int], model: str) -> str:
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": model}
    chunks: list[tuple[str, Any]] = [
        ("", base | {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
    ]
    if message.get("reasoning_content"):
        chunks.append(
            (
                "",
                base
                | {
                    "choices": [
                        {"index": 0, "delta": {"reasoning_content": message["reasoning_content"]}}
                    ]
                },
            )
        )
    text = message.get("content") or ""
    for piece in (text[:6], text[6:]):
        if piece:
            chunks.append(("", base | {"choices": [{"index": 0, "delta": {"content": piece}}]}))
    for k, call in enumerate(message.get("tool_calls") or []):
        args = call["function"]["arguments"]
        chunks.append(
            (
                "",
                base
                | {
                    "choices": [
                        {
                            "index": 0,
                            "delta": {
                                "tool_calls": [
                                    {
                                        "index": k,
                                        "id": call["id"],
                                        "type": "function",
                                        "function": {
                                            "name": call["function"]["name"],
                                            "arguments": "",
                                        },
                                    }
                                ]
                            },
                        }
                    ]
                },
            )
        )
        for j in range(0, len(args), 5):
            chunks.append(
                (
                    "",
                    base
                    | {
                        "choices": [
                            {
                                "index": 0,
                                "delta": {
                                    "tool_calls": [
                                        {"index": k, "function": {"arguments": args[j : j + 5]}}
                                    ]
                                },
                            }
                        ]
                    },
                )
            )
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    chunks.append(("", base | {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}))
    chunks.append(
        (
            "",
            base
            | {"choices": [], "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1]}},
        )
    )
    chunks.append(("", "[DONE]"))
    return sse(chunks)


def chat_json(message: dict, usage: tuple[int, int], model: str) -> str:
    return json.dumps(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1]},
        }
    )


def chat_conversation(stream: bool, model: str = "gpt-4o-mini") -> list[dict]:
    messages: list[dict] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": TASK},
    ]
    records = []
    for step in range(3):
        request = {"model": model, "messages": json.loads(json.dumps(messages)), "stream": stream}
        message = chat_message(step)
        body = (chat_stream if stream else chat_json)(message, USAGE[step], model)
        records.append(record(step + 1, "chat", request, body, cost_usd=COSTS[step]))
        messages.append({k: v for k, v in message.items() if k != "reasoning_content"})
        if step < 2:
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": message["tool_calls"][0]["id"],
                    "content": READ_OUTPUT if step == 0 else EDIT_OUTPUT,
                }
            )
    return records


CONVERSATIONS = {
    "anthropic": anthropic_conversation,
    "responses": responses_conversation,
    "chat": chat_conversation,
}
