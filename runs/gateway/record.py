"""``model_calls.jsonl``: one JSON object per request the gateway received, written when the
request ends (the format is described in runs/gateway/__init__.py and the README).

The file lives on the host, outside the sandbox's disk quota, and what fills it comes from the
sandbox: so a request the gateway does not forward keeps no body (its size only), and the file
has a byte budget (``record_max_bytes``). Past most of it a record is summarised (its metadata
without bodies or headers); at the budget records are only counted; the last line then says
how many were summarised or dropped.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from runs.gateway.redact import REDACTED, Redactor

FORMAT = "agentbench.model_call.v1"
# Request headers whose values are secrets: never written (the real key is never in a request
# from the CLI; the token is dead after the attempt, but it is not kept either).
SECRET_HEADERS = frozenset(
    {
        "authorization",
        "x-api-key",
        "api-key",
        "x-goog-api-key",
        "proxy-authorization",
        "cookie",
        "set-cookie",
    }
)
# The share of the byte budget kept for summaries once full records no longer fit (1/8: a
# summary is a few hundred bytes, so thousands of requests stay counted one by one), and the
# room kept for the last line.
SUMMARY_SHARE = 8
LAST_LINE_BYTES = 1024
# What a summary keeps of a text (an error message, a path).
SUMMARY_TEXT_CHARS = 500


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


def headers_record(
    headers: Iterable[tuple[str, str]], redactor: Redactor | None = None
) -> dict[str, str]:
    """Headers as a dict of lower-cased names (repeated ones joined by ", "), the values of
    credential headers replaced by ``[redacted]`` and any secret value in the others too."""
    found: dict[str, str] = {}
    for name, value in headers:
        key = name.lower()
        if key in SECRET_HEADERS:
            value = REDACTED
        elif redactor is not None:
            value = redactor.text(value)
        found[key] = f"{found[key]}, {value}" if key in found else value
    return found


def body_left_out(size: int, why: str) -> dict[str, Any]:
    """The body fields of a request the gateway did not forward: its size, no bytes (``why``:
    ``refused``, ``not_allowed``, ``budget``, ``bad_request``)."""
    return {
        "body": None,
        "body_encoding": None,
        "body_bytes": size,
        "body_kept_bytes": 0,
        "body_truncated": size > 0,
        "body_omitted": why,
    }


def _short(value: Any) -> Any:
    if isinstance(value, str) and len(value) > SUMMARY_TEXT_CHARS:
        return value[:SUMMARY_TEXT_CHARS] + "..."
    return value


def summarised(record: dict[str, Any]) -> dict[str, Any]:
    """A record's metadata without its bodies, headers or anything else of unbounded size."""
    out: dict[str, Any] = {
        key: _short(record.get(key))
        for key in (
            "seq",
            "started_at",
            "duration_ms",
            "via",
            "method",
            "path",
            "api",
            "model_call",
            "model",
            "stream",
            "outcome",
            "status",
            "retries",
            "cost_usd",
            "upstream_ms",
        )
        if key in record
    }
    error = record.get("error")
    if isinstance(error, dict):
        out["error"] = {
            k: _short(v) for k, v in error.items() if k in ("kind", "budget", "message")
        }
    usage = record.get("usage")
    if isinstance(usage, dict):
        out["usage"] = {k: usage.get(k) for k in ("input_tokens", "output_tokens")}
    for side in ("request", "response"):
        part = record.get(side)
        if isinstance(part, dict):
            kept = {k: part[k] for k in ("auth", "status", "body_bytes") if k in part}
            out[side] = {**kept, "body": None, "body_omitted": "record_budget"}
    out["summarised"] = True
    return out


class RecordWriter:
    """Appends records to the file, one line each, flushed at once (a crash loses none), the
    file kept within ``max_bytes`` (see the module's docstring) and free of secrets."""

    def __init__(self, path: Path | None, *, max_bytes: int = 64 * 1024 * 1024, redactor: Redactor):
        self.path = path
        self.max_bytes = max_bytes
        self.redactor = redactor
        self._lock = threading.Lock()
        self._file: IO[bytes] | None = None
        self._seq = 0
        self._written = 0
        self.summarised = 0  # records written without their bodies
        self.dropped = 0  # records not written at all
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = path.open("ab")
            self._written = self._file.tell()

    def next_seq(self) -> int:
        with self._lock:
            self._seq += 1
            return self._seq

    def _line(self, record: dict[str, Any]) -> bytes:
        text = json.dumps({"format": FORMAT, **record}, ensure_ascii=False)
        return (self.redactor.text(text) + "\n").encode()

    def write(self, record: dict[str, Any]) -> None:
        if self._file is None:
            return
        line = self._line(record)
        full_room = self.max_bytes - self.max_bytes // SUMMARY_SHARE
        with self._lock:
            if self._file is None:
                return
            if self._written + len(line) > full_room:
                line = self._line(summarised(record))
                if self._written + len(line) > self.max_bytes - LAST_LINE_BYTES:
                    self.dropped += 1
                    return
                self.summarised += 1
            self._file.write(line)
            self._file.flush()
            self._written += len(line)

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                if self.summarised or self.dropped:
                    self._file.write(self._line(self._budget_line()))
                self._file.close()
                self._file = None

    def _budget_line(self) -> dict[str, Any]:
        """The last line when the byte budget was reached: no request of its own."""
        return {
            "record": "record_budget",
            "model_call": False,
            "record_max_bytes": self.max_bytes,
            "summarised": self.summarised,
            "dropped": self.dropped,
        }
