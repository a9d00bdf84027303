"""Gemini API replies for the tests' one fake provider (tests/support/fake_provider.py):
``generateContent`` as JSON, ``streamGenerateContent`` as SSE (``?alt=sse``) or as the JSON
array Google sends without it, ``countTokens``, ``usageMetadata`` and Google's error shape.

The shapes are Google's (``candidates[].content.parts[]`` with ``text`` or ``functionCall``,
``usageMetadata`` with ``promptTokenCount`` including ``cachedContentTokenCount``,
``candidatesTokenCount``, ``thoughtsTokenCount``); the ``@google/genai`` client (Gemini CLI)
reads them. Kept apart from fake_provider.py so that module stays small; the server is the
same.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from tests.support.fake_provider import Reply, sse

_ids = itertools.count(1)
STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


def usage_metadata(
    usage: tuple[int, int], *, cached: int = 0, thoughts: int = 0, final: bool = True
) -> dict[str, Any]:
    """``usageMetadata`` as Gemini reports it: the prompt count includes the cached tokens;
    an early stream chunk reports the prompt alone."""
    prompt, candidates = usage
    doc: dict[str, Any] = {
        "promptTokenCount": prompt,
        "totalTokenCount": prompt + (candidates + thoughts if final else 0),
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt}],
    }
    if final:
        doc["candidatesTokenCount"] = candidates
        if thoughts:
            doc["thoughtsTokenCount"] = thoughts
    if cached:
        doc["cachedContentTokenCount"] = cached
    return doc


def response_doc(
    parts: list[dict[str, Any]],
    *,
    usage: dict[str, Any] | None,
    finish: str | None = "STOP",
    model: str = "gemini-2.5-pro",
    response_id: str = "",
) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    doc: dict[str, Any] = {
        "candidates": [candidate],
        "modelVersion": model,
        "responseId": response_id or f"resp-{next(_ids)}",
    }
    if usage is not None:
        doc["usageMetadata"] = usage
    return doc


def gemini(
    text: str = "",
    *,
    function_call: tuple[str, dict[str, Any]] | None = None,
    thought: str = "",
    usage: tuple[int, int] = (100, 20),
    cached: int = 0,
    thoughts: int = 0,
    stream: bool = False,
    alt_sse: bool = True,
    model: str = "gemini-2.5-pro",
) -> Reply:
    """A model turn: a ``thought`` summary, ``text`` and/or one ``functionCall``. ``stream``:
    the thought in a chunk of its own, then the text in several
    chunks, each with its running usage (the last one complete), as SSE or (``alt_sse``
    False) one JSON array sent in pieces."""
    call = (
        [{"functionCall": {"name": function_call[0], "args": function_call[1]}}]
        if function_call
        else []
    )
    thinking = [{"text": thought, "thought": True}] if thought else []
    final_usage = usage_metadata(usage, cached=cached, thoughts=thoughts)
    if not stream:
        doc = response_doc(
            thinking + ([{"text": text}] if text else []) + call, usage=final_usage, model=model
        )
        return Reply(
            body=json.dumps(doc).encode(),
            api="gemini",
            headers={"content-type": "application/json; charset=UTF-8"},
        )
    rid = f"resp-{next(_ids)}"
    words = text.split(" ") if text else []
    pieces = [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]
    early = usage_metadata(usage, cached=cached, final=False)
    chunks = [
        response_doc([part], usage=early, finish=None, model=model, response_id=rid)
        for part in thinking + [{"text": piece} for piece in pieces]
    ]
    chunks.append(
        response_doc(call or [{"text": ""}], usage=final_usage, model=model, response_id=rid)
    )
    if alt_sse:
        return Reply(
            events=[sse(chunk) for chunk in chunks],
            api="gemini-stream",
            headers={"content-type": "text/event-stream"},
        )
    # Without alt=sse Google streams one JSON array, an element at a time.
    texts = [json.dumps(chunk) for chunk in chunks]
    events = [("[" if i == 0 else ",\r\n") + t for i, t in enumerate(texts)]
    events[-1] += "]"
    return Reply(
        events=[e.encode() for e in events],
        api="gemini-stream",
        headers={"content-type": "application/json; charset=UTF-8"},
    )


def count_tokens(total: int) -> Reply:
    body = {
        "totalTokens": total,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": total}],
    }
    return Reply(
        body=json.dumps(body).encode(),
        api="gemini-count-tokens",
        headers={"content-type": "application/json; charset=UTF-8"},
    )


def error_doc(status: int, message: str, name: str | None = None) -> dict[str, Any]:
    return {
        "error": {
            "code": status,
            "message": message,
            "status": name or STATUS_NAMES.get(status, "UNKNOWN"),
        }
    }


def gemini_error(
    status: int,
    message: str,
    name: str | None = None,
    *,
    headers: dict[str, str] | None = None,
) -> Reply:
    """An error answer in Google's shape (``name``: its canonical status, by default the
    HTTP status's)."""
    return Reply(
        status=status,
        body=json.dumps(error_doc(status, message, name)).encode(),
        headers={"content-type": "application/json; charset=UTF-8", **(headers or {})},
    )


def stream_error(message: str, status: int = 500, name: str | None = None) -> bytes:
    """An SSE event holding an error (what Gemini sends when a stream fails midway)."""
    return sse(error_doc(status, message, name))
