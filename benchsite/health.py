"""``/healthz``: whether this web process can reach the database and the broker.

For load balancers and orchestrators: 200 when both answer, 503 otherwise, with a JSON body
naming each check, its time and, on failure, the error. No login, no session, no template.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET


def _database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()


def _broker() -> None:
    """Open (or reuse) a broker connection and make one round trip to the server: PING on
    Redis (an empty queue does not exist there, so a passive declare would fail), a passive
    declare of the attempt queue elsewhere (AMQP, the SQL transport)."""
    from benchsite.celery import app

    with app.connection_for_write() as conn:
        # The ignore: kombu takes seconds as a float here; its stubs say int.
        conn.ensure_connection(max_retries=1, interval_start=0.2, timeout=3)  # type: ignore[arg-type]
        # The transport's own channel: kombu's StdChannel type declares neither method used.
        channel: Any = conn.default_channel
        if conn.transport.driver_type == "redis":
            channel.client.ping()
        else:
            channel.queue_declare(queue=app.conf.task_default_queue, passive=True)


CHECKS: dict[str, Callable[[], None]] = {"database": _database, "broker": _broker}


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """Run every check; 200 if all pass, else 503."""
    results: dict[str, dict[str, object]] = {}
    for name, check in CHECKS.items():
        started = time.perf_counter()
        try:
            check()
        except Exception as exc:  # any failure is the answer, not a server error
            results[name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:500]}
        else:
            results[name] = {"ok": True}
        results[name]["ms"] = round((time.perf_counter() - started) * 1000, 1)
    ok = all(r["ok"] for r in results.values())
    return JsonResponse(
        {"status": "ok" if ok else "unavailable", **results}, status=200 if ok else 503
    )
