"""Structured logs: a JSON-lines formatter for every logger, and one line per HTTP request.

Each log record becomes one JSON object (``ts``, ``level``, ``logger``, ``msg``, ``pid`` and
the record's ``fields``), so a log collector can filter on fields instead of parsing text.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime

from django.http import HttpRequest, HttpResponse

log = logging.getLogger("agentbench.requests")


class JsonFormatter(logging.Formatter):
    """One JSON object per record; ``extra={"fields": {...}}`` adds keys to it."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
            "pid": record.process,
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            entry.update(fields)
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def request_log_middleware(
    get_response: Callable[[HttpRequest], HttpResponse],
) -> Callable[[HttpRequest], HttpResponse]:
    """Log every request once, after its response: method, path, status, time, size, user."""

    def middleware(request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = get_response(request)
        if log.isEnabledFor(logging.INFO):
            user = getattr(request, "user", None)
            size = None if response.streaming else len(response.content)
            log.info(
                "request",
                extra={
                    "fields": {
                        "method": request.method,
                        "path": request.path,
                        "query": request.META.get("QUERY_STRING", "")[:500],
                        "status": response.status_code,
                        "ms": round((time.perf_counter() - started) * 1000, 1),
                        "bytes": size,
                        "user": user.get_username() if user and user.is_authenticated else None,
                        "remote": request.META.get("REMOTE_ADDR"),
                    }
                },
            )
        return response

    return middleware
