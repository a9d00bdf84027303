"""A streamed answer measured as it passes: its bytes and running usage against what its call
may use, the point where it is cut, and the error event that ends a cut stream in its API's
own shape (so the CLI reads an error, not a broken connection).

A stream is otherwise unbounded: an upstream (or anything answering in its place) can send
hundreds of megabytes and millions of tokens in one answer, whatever ``max_tokens`` said.
"""

from __future__ import annotations

import json

import runs.gateway.gemini as gemini
import runs.gateway.wire as wire
from runs.gateway.ledger import Ledger, Reservation
from runs.pricing import Price, TokenClasses

# A stream's output tokens are at least its bytes over this (a streamed token takes 100 to
# 400 bytes of SSE in the three APIs), so a stream that reports its usage only at its end is
# still counted as it goes.
STREAM_BYTES_PER_TOKEN = 1024
# An SSE event is passed on whole (so that a cut can end the stream with a well-formed error
# event); a longer one than this is passed on in pieces.
MAX_HELD_EVENT_BYTES = 1024 * 1024
BUDGET_CODE = "budget_exceeded"


class Meter:
    """The running size of one answer, checked against the call's reservation (which grows
    into what is still free of the budgets before the stream is cut) and the byte limit."""

    def __init__(
        self, ledger: Ledger, held: Reservation | None, price: Price | None, max_bytes: int
    ):
        self.ledger = ledger
        self.held = held
        self.price = price
        self.max_bytes = max_bytes
        self.bytes = 0

    def classes(self, usage: wire.Usage) -> TokenClasses:
        """The token classes so far: the upstream's counts, output the bytes' when more."""
        reported = usage.classes()
        return TokenClasses(
            reported.input,
            reported.cache_write,
            reported.cache_read,
            max(reported.output, self.bytes // STREAM_BYTES_PER_TOKEN),
            reported.cache_write_1h,
        )

    def over(self, usage: wire.Usage, more_bytes: int) -> tuple[str, str] | None:
        """``(budget, why)`` when the answer with ``more_bytes`` more would pass what it may
        use (``response_bytes`` for the byte limit), else None and the bytes are counted."""
        if self.bytes + more_bytes > self.max_bytes:
            return "response_bytes", f"the upstream's answer is over {self.max_bytes} bytes"
        self.bytes += more_bytes
        held = self.held
        if held is None:
            return None
        classes = self.classes(usage)
        tokens = classes.input_total + classes.output
        cost = self.price.budget_cost(classes) if self.price is not None else 0.0
        need_tokens = held.tokens is not None and tokens > held.tokens
        need_cost = held.cost is not None and cost > held.cost
        if not (need_tokens or need_cost) or self.ledger.grow(held, tokens, cost):
            return None
        self.bytes -= more_bytes
        if need_tokens:
            return "tokens", f"the answer passed the {held.tokens} tokens left for it"
        return "cost", f"the answer passed the ${held.cost:.6f} left for it"


def error_event(api: str | None, message: str, *, kind: str = "invalid_request_error") -> bytes:
    """The SSE event that ends a cut stream: Anthropic's ``error`` event, a Responses
    ``error`` event, or a chat-completions chunk holding ``error`` (each client raises on
    it). The Responses event carries ``error`` as well, which the ``openai`` client needs."""
    detail = {"message": message, "type": kind, "param": None, "code": BUDGET_CODE}
    if api == wire.GEMINI:
        return gemini.error_event(message)
    if api == wire.MESSAGES:
        doc: dict = {"type": "error", "error": {"type": kind, "message": message}}
        return b"event: error\ndata: " + json.dumps(doc).encode() + b"\n\n"
    if api == wire.RESPONSES:
        doc = {
            "type": "error",
            "code": BUDGET_CODE,
            "message": message,
            "param": None,
            "error": detail,
        }
        return b"event: error\ndata: " + json.dumps(doc).encode() + b"\n\n"
    return b"data: " + json.dumps({"error": detail}).encode() + b"\n\n"


class EventAligner:
    """Passes SSE bytes on up to the end of the last whole event, holding the rest."""

    def __init__(self) -> None:
        self.held = b""

    def feed(self, data: bytes, *, final: bool = False) -> bytes:
        data = self.held + data
        if final or len(data) > MAX_HELD_EVENT_BYTES:
            self.held = b""
            return data
        lf, crlf = data.rfind(b"\n\n"), data.rfind(b"\r\n\r\n")
        end = max(lf + 2 if lf >= 0 else 0, crlf + 4 if crlf >= 0 else 0)
        self.held = data[end:]
        return data[:end]
