"""Secrets out of everything the gateway writes or passes on, by value.

A header's name says nothing of what an upstream (or a CLI) puts in its value: an upstream may
echo the key in ``x-echo``, an error text, a stream or a binary body, and an agent that prints
its environment sends the token in its next request. So every secret value (the real key, the
attempt's token, any secret the configuration names) is replaced by ``[redacted]`` wherever it
occurs: in the bytes of a body before it is recorded or relayed (a body kept as base64 is
encoded from the redacted bytes), in header values, in messages, and in the record's line
itself as a last pass.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

REDACTED = "[redacted]"
# Shorter values are placeholders (``EMPTY``, ``none`` for a local server), not secrets:
# replacing them would garble the record.
MIN_SECRET_CHARS = 8


class KeyScrubber:
    """Replaces the secrets in a byte stream fed in pieces, holding back only a tail that could
    be the start of one (never the end of an SSE event in practice)."""

    def __init__(self, *secrets: bytes):
        self.secrets = tuple(sorted({s for s in secrets if s}, key=len, reverse=True))
        self.tail = b""

    def feed(self, chunk: bytes) -> bytes:
        if not self.secrets:
            return chunk
        data = self.tail + chunk
        for secret in self.secrets:
            data = data.replace(secret, REDACTED.encode())
        # Hold back the longest end of the data that is the start of a secret.
        hold = 0
        for secret in self.secrets:
            for n in range(min(len(secret) - 1, len(data)), hold, -1):
                if data.endswith(secret[:n]):
                    hold = n
                    break
        cut = len(data) - hold
        self.tail = data[cut:]
        return data[:cut]

    def flush(self) -> bytes:
        out, self.tail = self.tail, b""
        return out


class Redactor:
    """The secret values of one gateway, and their replacement in bytes and text."""

    def __init__(self, secrets: Iterable[str]):
        values = {s for s in secrets if len(s) >= MIN_SECRET_CHARS}
        self.texts = tuple(sorted(values, key=len, reverse=True))
        self.raw = tuple(s.encode() for s in self.texts)

    def bytes(self, data: bytes) -> bytes:
        for secret in self.raw:
            if secret in data:
                data = data.replace(secret, REDACTED.encode())
        return data

    def text(self, text: str) -> str:
        for secret in self.texts:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text

    def stream(self) -> KeyScrubber:
        return KeyScrubber(*self.raw)


class RedactingFilter(logging.Filter):
    """A log record of the gateway with the secrets replaced (a request line may carry the
    token in its query, an upstream's error the key)."""

    def __init__(self, redactor: Redactor):
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = self.redactor.text(message)
        if clean != message:
            record.msg, record.args = clean, None
        return True
