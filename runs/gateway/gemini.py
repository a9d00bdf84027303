"""Google's Gemini API as the gateway's fourth wire API: what differs from the other three.

A Gemini request names its model in the path, not the body
(``POST /v1beta/models/{model}:generateContent``, ``:streamGenerateContent?alt=sse``,
``:countTokens``), may carry the key in ``?key=`` as well as in ``x-goog-api-key``, reports
its usage in ``usageMetadata`` (``promptTokenCount`` with the cached tokens inside it,
``cachedContentTokenCount``, ``candidatesTokenCount``, ``thoughtsTokenCount`` billed as
output, ``toolUsePromptTokenCount`` billed as input), bounds its output with
``generationConfig.maxOutputTokens``, and answers errors as
``{"error": {"code": 400, "message": ..., "status": "INVALID_ARGUMENT"}}``, in a stream as
well (the ``@google/genai`` client raises on a chunk holding ``error``).

The route table (routes.py) reads the path; this module holds the shapes. The key in a
``?key=`` never reaches the upstream's URL (the real key goes in ``x-goog-api-key``) nor a
record or a log (``redact_target``).
"""

from __future__ import annotations

import json
import re
from typing import Any

from runs.pricing import TokenClasses

# The methods a model's path may end with, and whether each is a model call / a stream.
GENERATE = "generateContent"
STREAM = "streamGenerateContent"
COUNT_TOKENS = "countTokens"
# A model id in a path: a plain name (gemini-2.5-pro, gemini-2.5-flash-preview-05-20).
MODEL_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
# The query parameter a Google API key may come in (the gateway's token, never forwarded).
KEY_PARAM = "key"
_KEY_IN_QUERY = re.compile(r"([?&]key=)[^&#]*", re.IGNORECASE)
REDACTED = "[redacted]"
# Google's canonical codes for the statuses the gateway answers with itself.
STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    405: "INVALID_ARGUMENT",
    408: "DEADLINE_EXCEEDED",
    413: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    431: "INVALID_ARGUMENT",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
    505: "INVALID_ARGUMENT",
}
# usageMetadata's fields that say a Gemini answer reported its usage.
USAGE_FIELDS = ("promptTokenCount", "candidatesTokenCount", "totalTokenCount")


def redact_target(target: str) -> str:
    """A request target with the value of any ``key`` query parameter replaced (what records,
    logs and error messages show: a foreign key smuggled on any path is not kept either)."""
    return _KEY_IN_QUERY.sub(rf"\g<1>{REDACTED}", target)


def error_body(status: int, message: str) -> bytes:
    """An error in Google's shape, for a request of the Gemini API."""
    name = STATUS_NAMES.get(status, "UNKNOWN")
    return json.dumps({"error": {"code": status, "message": message, "status": name}}).encode()


def error_event(message: str) -> bytes:
    """The SSE event that ends a cut Gemini stream (the client raises on it)."""
    return b"data: " + error_body(400, message) + b"\n\n"


def output_limit(doc: dict[str, Any] | None) -> int | None:
    """``generationConfig.maxOutputTokens``, when the request sets one."""
    config = (doc or {}).get("generationConfig")
    value = config.get("maxOutputTokens") if isinstance(config, dict) else None
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def reported(fields: dict[str, int]) -> bool:
    return any(name in fields for name in USAGE_FIELDS)


def classes(fields: dict[str, int]) -> TokenClasses:
    """The billed classes of ``usageMetadata``: the prompt includes the cached tokens (reads),
    thinking is billed as output, a tool-use prompt as input; Gemini reports no cache write
    (an explicit cache is created by its own call, not by a generation)."""
    prompt = max(fields.get("promptTokenCount", 0), 0)
    cached = min(max(fields.get("cachedContentTokenCount", 0), 0), prompt)
    tool_prompt = max(fields.get("toolUsePromptTokenCount", 0), 0)
    output = max(fields.get("candidatesTokenCount", 0), 0) + max(
        fields.get("thoughtsTokenCount", 0), 0
    )
    return TokenClasses(input=prompt - cached + tool_prompt, cache_read=cached, output=output)
