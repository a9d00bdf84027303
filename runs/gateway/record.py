"""``model_calls.jsonl``: one JSON object per request the gateway received, written when the
request ends (the format is described in runs/gateway/__init__.py and the README)."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

FORMAT = "agentbench.model_call.v1"
# Request headers whose values are secrets: never written (the real key is never in a request
# from the CLI; the token is dead after the attempt, but it is not kept either).
SECRET_HEADERS = frozenset(
    {"authorization", "x-api-key", "api-key", "proxy-authorization", "cookie", "set-cookie"}
)
REDACTED = "[redacted]"


class Capture:
    """A body as it passes: the first ``cap`` bytes kept, every byte counted."""

    def __init__(self, cap: int):
        self.cap = cap
        self.kept = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self.cap - len(self.kept)
        if room > 0:
            self.kept += data[:room]

    def as_record(self) -> dict[str, Any]:
        """``body`` (UTF-8 text, or base64 when the bytes are not UTF-8), ``body_encoding``,
        ``body_bytes`` (the full size), ``body_kept_bytes`` and ``body_truncated``. A cut inside
        a UTF-8 character keeps the bytes before it, so the text is still those bytes exactly."""
        kept = bytes(self.kept)
        text = None
        for trim in range(4 if self.total > len(kept) else 1):
            try:
                text = kept[: len(kept) - trim].decode("utf-8")
            except UnicodeDecodeError:
                continue
            kept = kept[: len(kept) - trim]
            break
        return {
            "body": text if text is not None else base64.b64encode(kept).decode(),
            "body_encoding": "utf-8" if text is not None else "base64",
            "body_bytes": self.total,
            "body_kept_bytes": len(kept),
            "body_truncated": self.total > len(kept),
        }


def headers_record(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Headers as a dict of lower-cased names (repeated ones joined by ", "), secrets
    replaced by ``[redacted]``."""
    found: dict[str, str] = {}
    for name, value in headers:
        key = name.lower()
        value = REDACTED if key in SECRET_HEADERS else value
        found[key] = f"{found[key]}, {value}" if key in found else value
    return found


class RecordWriter:
    """Appends records to the file, one line each, flushed at once (a crash loses none)."""

    def __init__(self, path: Path | None):
        self.path = path
        self._lock = threading.Lock()
        self._file: IO[str] | None = None
        self._seq = 0
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = path.open("a", encoding="utf-8")

    def next_seq(self) -> int:
        with self._lock:
            self._seq += 1
            return self._seq

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps({"format": FORMAT, **record}, ensure_ascii=False)
        with self._lock:
            if self._file is not None:
                self._file.write(line + "\n")
                self._file.flush()

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
