"""The agent stage's structured logs: ``events.jsonl`` and the optional ``llm_messages.jsonl``.

One JSON object per line, appended and flushed as it happens, so a crashed or killed attempt
still leaves everything up to the last event.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

EVENTS_FILE = "events.jsonl"
LLM_MESSAGES_FILE = "llm_messages.jsonl"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class EventLog:
    """Appends events to ``<artifacts_dir>/events.jsonl``."""

    def __init__(self, artifacts_dir: Path):
        artifacts_dir.mkdir(parents=True, exist_ok=True)
        self.path = artifacts_dir / EVENTS_FILE
        self._started = time.monotonic()

    def emit(self, event: str, **fields: Any) -> None:
        record = {"ts": _now(), "t": round(time.monotonic() - self._started, 3), "event": event}
        record.update(fields)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, default=str) + "\n")


class MessageLog:
    """Appends LLM requests and replies to ``llm_messages.jsonl`` until ``max_chars`` is used.

    Past the cap one final ``{"truncated": true}`` line says that the log is incomplete.
    """

    def __init__(self, artifacts_dir: Path, *, enabled: bool, max_chars: int):
        self.path = artifacts_dir / LLM_MESSAGES_FILE
        self.enabled = enabled
        self.max_chars = max_chars
        self.written = 0
        self.truncated = False

    def write(self, kind: str, payload: Any) -> None:
        if not self.enabled or self.truncated:
            return
        line = json.dumps({"ts": _now(), "kind": kind, "payload": payload}, default=str) + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as handle:
            if self.written + len(line) > self.max_chars:
                handle.write(json.dumps({"ts": _now(), "truncated": True}) + "\n")
                self.truncated = True
                return
            handle.write(line)
        self.written += len(line)
