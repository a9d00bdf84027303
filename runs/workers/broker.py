"""Dropping the unacknowledged messages of attempts taken back from a lost worker.

With ``acks_late``, the message of a running attempt stays unacknowledged until the attempt
ends. On Redis, kombu keeps such messages in the ``unacked`` hash (and ``unacked_index``
sorted set) and puts them back in the queue only after the visibility timeout (4 hours here,
longer than the longest attempt). When the reaper or a stopped worker hands an attempt back,
it sends a new message, so the old one is useless: this removes it at once instead of leaving
it for four hours. The SQL transport forgets such messages by itself; AMQP brokers redeliver
them when the connection closes. Either way a stray duplicate is harmless: the claim is a
compare-and-set.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterable
from typing import Any

log = logging.getLogger(__name__)

ATTEMPT_TASK = "runs.attempt_run"


def broker_forget_unacked(attempt_ids: Iterable[int]) -> int:
    """Remove the unacknowledged ``attempt_run`` messages of these attempts from the broker
    (Redis only; elsewhere 0). Returns how many were removed."""
    from benchsite.celery import app

    wanted = set(attempt_ids)
    if not wanted:
        return 0
    queue = app.conf.task_default_queue
    removed = 0
    try:
        with app.connection_for_write() as conn:
            if conn.transport.driver_type != "redis":
                return 0
            # Redis's own channel: kombu's StdChannel type declares none of its attributes.
            channel: Any = conn.default_channel
            client = channel.client
            for tag, raw in client.hscan_iter(channel.unacked_key):
                if _attempt_of(raw, queue) in wanted:
                    pipe = client.pipeline()
                    pipe.hdel(channel.unacked_key, tag)
                    pipe.zrem(channel.unacked_index_key, tag)
                    pipe.execute()
                    removed += 1
    except Exception:  # a broker hiccup: the duplicate is harmless, only late
        log.warning("could not drop unacknowledged messages", exc_info=True)
    return removed


def _attempt_of(raw: bytes | str, queue: str) -> int | None:
    """The attempt id of one stored unacked message of our queue, else None."""
    try:
        message, _exchange, routing_key = json.loads(raw)
        if routing_key != queue or message["headers"].get("task") != ATTEMPT_TASK:
            return None
        body = message["body"]
        if message["properties"].get("body_encoding") == "base64":
            body = base64.b64decode(body)
        args = json.loads(body)[0]  # Celery's message protocol 2: [args, kwargs, embed]
        return int(args[0])
    except (ValueError, KeyError, TypeError, IndexError):
        return None
