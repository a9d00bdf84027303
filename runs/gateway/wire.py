"""The four wire APIs the gateway speaks (Gemini's particulars in gemini.py): their names (the
route table, routes.py, says which request is which), the error bodies it answers in each
API's shape, and the usage and errors read from answers (JSON or SSE)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import runs.gateway.gemini as gemini
from runs.pricing import TokenClasses

CHAT = "openai-chat"  # POST .../chat/completions
RESPONSES = "openai-responses"  # POST .../responses
MESSAGES = "anthropic-messages"  # POST .../messages
COUNT_TOKENS = "anthropic-count-tokens"  # POST .../messages/count_tokens
MODELS = "models"  # GET .../models, .../models/{id}
GEMINI = "gemini"  # POST .../models/{model}:generateContent, :streamGenerateContent
GEMINI_COUNT_TOKENS = "gemini-count-tokens"  # POST .../models/{model}:countTokens
MODEL_CALL_APIS = frozenset({CHAT, RESPONSES, MESSAGES, GEMINI})
# The APIs whose requests name their model in the path (routes.Match.model), not the body.
MODEL_IN_PATH_APIS = frozenset({GEMINI, GEMINI_COUNT_TOKENS})
# Usage fields that count as input (Anthropic reports cached input apart; OpenAI includes it).
INPUT_FIELDS = (
    "prompt_tokens",
    "input_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)
OUTPUT_FIELDS = ("completion_tokens", "output_tokens")
# Words an SSE event must hold to report usage or an error.
_WORTH_PARSING = (b"usage", b"error", b"response.failed")


def error_shape(api: str | None, headers: dict[str, str]) -> str:
    """The shape to answer errors in: ``gemini`` (a request of its API, or from a Google
    client), ``anthropic`` (likewise), else ``openai``."""
    if api in MODEL_IN_PATH_APIS or (api is None and "x-goog-api-key" in headers):
        return "gemini"
    if api in (MESSAGES, COUNT_TOKENS) or "anthropic-version" in headers:
        return "anthropic"
    return "openai"


def error_body(
    shape: str, *, kind: str, message: str, code: str | None = None, status: int = 400
) -> bytes:
    """An error in the API's own shape. ``kind`` is Anthropic's error type
    (``authentication_error``, ``invalid_request_error``, ``api_error``...), also used as
    OpenAI's ``type``; Gemini's shape has the HTTP ``status`` and its canonical name."""
    if shape == "gemini":
        return gemini.error_body(status, message)
    if shape == "anthropic":
        doc: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": message}}
    else:
        doc = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return json.dumps(doc).encode()


def error_message(body: bytes) -> str:
    """``type: message`` from an API error body (either shape), else its first characters."""
    try:
        doc = json.loads(body)
    except ValueError:
        doc = None
    if isinstance(doc, dict):
        err = doc.get("error")
        if isinstance(err, dict):
            # Gemini: {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": ...}
            kind = err.get("type") or err.get("status") or err.get("code") or ""
            message = err.get("message") or ""
            return f"{kind}: {message}" if kind else str(message)
        if isinstance(err, str):
            return err
    return " ".join(body.decode("utf-8", errors="replace").split())[:300]


def json_doc(body: bytes) -> Any:
    """A JSON body parsed, or None when it is not JSON."""
    try:
        return json.loads(body)
    except ValueError:
        return None


def request_facts(body: bytes) -> tuple[str, bool, dict[str, Any] | None]:
    """The model and the stream flag a JSON request asks for, and the parsed body."""
    doc = json_doc(body)
    if not isinstance(doc, dict):
        return "", False, None
    model = doc.get("model")
    return (model if isinstance(model, str) else ""), doc.get("stream") is True, doc


def with_stream_usage(doc: dict[str, Any]) -> bytes | None:
    """A chat-completions stream request that asks for the usage chunk, or None when it does
    already."""
    options = doc.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage") is True:
        return None
    rewritten = dict(doc)
    rewritten["stream_options"] = {
        **(options if isinstance(options, dict) else {}),
        "include_usage": True,
    }
    return json.dumps(rewritten).encode()


@dataclass
class Usage:
    """Token usage as an answer reports it: the latest value of each usage field seen (an
    Anthropic stream reports input in ``message_start`` and the running output total in each
    ``message_delta``; OpenAI streams report it once, at the end). A nested object's fields
    are kept under dotted names (``prompt_tokens_details.cached_tokens``)."""

    fields: dict[str, int] = field(default_factory=dict)

    def merge(self, usage: Any, prefix: str = "") -> None:
        if not isinstance(usage, dict):
            return
        for key, value in usage.items():
            if isinstance(value, int) and not isinstance(value, bool):
                self.fields[prefix + str(key)] = value
            elif isinstance(value, dict) and not prefix:  # one level: the *_details objects
                self.merge(value, f"{key}.")

    @property
    def found(self) -> bool:
        fields = self.fields
        return any(k in fields for k in INPUT_FIELDS + OUTPUT_FIELDS) or gemini.reported(fields)

    def classes(self) -> TokenClasses:
        """The four billed classes. Anthropic counts cached input apart from
        ``input_tokens``; OpenAI's ``cached_tokens`` (chat: ``prompt_tokens_details``,
        Responses: ``input_tokens_details``) are reads within its input count, and it reports
        no cache write; Gemini's ``usageMetadata`` likewise (gemini.classes)."""
        f = self.fields
        if gemini.reported(f):
            return gemini.classes(f)
        output = f.get("completion_tokens", f.get("output_tokens", 0))
        if "cache_creation_input_tokens" in f or "cache_read_input_tokens" in f:
            write = f.get("cache_creation_input_tokens", 0)
            write_1h = min(f.get("cache_creation.ephemeral_1h_input_tokens", 0), write)
            return TokenClasses(
                input=f.get("input_tokens", 0),
                cache_write=write,
                cache_read=f.get("cache_read_input_tokens", 0),
                output=output,
                cache_write_1h=write_1h,
            )
        prompt = f.get("prompt_tokens", f.get("input_tokens", 0))
        cached = f.get(
            "prompt_tokens_details.cached_tokens", f.get("input_tokens_details.cached_tokens", 0)
        )
        cached = min(max(cached, 0), prompt)
        return TokenClasses(input=prompt - cached, cache_read=cached, output=output)

    @property
    def input_tokens(self) -> int:
        """Every input token, cached or not."""
        return self.classes().input_total

    @property
    def output_tokens(self) -> int:
        return self.classes().output

    def read(self, doc: Any) -> None:
        """Take the usage a JSON answer or one streamed event carries (a Gemini stream sent
        without ``alt=sse`` is one JSON array of its chunks, each with its running usage)."""
        if isinstance(doc, list):
            for item in doc:
                self.read(item)
            return
        if not isinstance(doc, dict):
            return
        self.merge(doc.get("usage"))
        self.merge(doc.get("usageMetadata"))
        for holder in ("message", "response"):  # Anthropic's message_start, Responses' end
            inner = doc.get(holder)
            if isinstance(inner, dict):
                self.merge(inner.get("usage"))


def stream_error(doc: Any) -> str | None:
    """The error an SSE event reports (Anthropic's ``error`` event, a Responses ``error`` or
    ``response.failed``, a chat chunk with ``error``), else None."""
    if not isinstance(doc, dict):
        return None
    if doc.get("type") == "response.failed":
        response = doc.get("response")
        err = response.get("error") if isinstance(response, dict) else None
        return error_message(json.dumps({"error": err or "response.failed"}).encode())
    err = doc.get("error")
    if err is None and doc.get("type") == "error":  # a Responses error event
        err = {"type": doc.get("code"), "message": doc.get("message")}
    if err is None:
        return None
    return error_message(json.dumps({"error": err}).encode())


class SSEScanner:
    """Reads a server-sent-events stream as it passes (``feed`` each chunk) for the usage and
    any error it reports; keeps only the unfinished event."""

    def __init__(self) -> None:
        self.usage = Usage()
        self.error: str | None = None
        self.events = 0
        self._tail = b""

    def feed(self, chunk: bytes) -> None:
        data = (self._tail + chunk).replace(b"\r\n", b"\n")
        *events, self._tail = data.split(b"\n\n")
        for event in events:
            self._event(event)

    def close(self) -> None:
        if self._tail.strip():
            self._event(self._tail)
        self._tail = b""

    def _event(self, raw: bytes) -> None:
        self.events += 1
        # Only events that can carry usage or an error are parsed (most are text deltas).
        if not any(word in raw for word in _WORTH_PARSING):
            return
        lines = raw.decode("utf-8", errors="replace").split("\n")
        data = "\n".join(line[5:].removeprefix(" ") for line in lines if line.startswith("data:"))
        if not data or data.strip() == "[DONE]":
            return
        try:
            doc = json.loads(data)
        except ValueError:
            return
        self.usage.read(doc)
        error = stream_error(doc)
        if error is not None and self.error is None:
            self.error = error
