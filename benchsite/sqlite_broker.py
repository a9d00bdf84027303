"""kombu's SQL transport, fitted for the embedded default (a SQLite file shared by processes).

kombu's ``sqla`` channel passes every transport option to ``sqlalchemy.create_engine``, so the
options the virtual transport itself reads (``polling_interval``) or that other brokers take
(``visibility_timeout``) make it fail with "Invalid argument(s)". This channel keeps only the
engine's own options, and opens SQLite with a busy timeout and WAL so several worker
processes and the web process can poll and publish at once without "database is locked".
It also declares a queue safely when another process declares it at the same moment: kombu
checks for the queue's row, then inserts it, under a lock that holds only within one process,
so the second process's insert failed with a UNIQUE-constraint error and its worker stopped.

``benchsite.celery`` registers it under the ``sqla`` / ``sqlalchemy`` URL prefixes.
"""

from __future__ import annotations

from typing import Any

from kombu.transport import sqlalchemy as kombu_sqla
from sqlalchemy import event
from sqlalchemy.exc import IntegrityError

# Options read by kombu or Celery (not the engine), which kombu's channel forwards by mistake.
_NOT_ENGINE_OPTIONS = (
    "polling_interval",
    "visibility_timeout",
    "sep",
    "fanout_prefix",
    "fanout_patterns",
    "global_keyprefix",
    "confirm_publish",
    "socket_timeout",
)
SQLITE_BUSY_TIMEOUT_SEC = 30


class Channel(kombu_sqla.Channel):
    def _engine_from_config(self):
        # Any: kombu's types make the client and its options optional; a channel has both.
        conninfo: Any = self.connection.client
        saved = conninfo.transport_options
        options = {k: v for k, v in saved.items() if k not in _NOT_ENGINE_OPTIONS}
        is_sqlite = conninfo.hostname.startswith("sqlite")
        if is_sqlite:
            options.setdefault("connect_args", {"timeout": SQLITE_BUSY_TIMEOUT_SEC})
        conninfo.transport_options = options
        try:
            engine = super()._engine_from_config()
        finally:
            conninfo.transport_options = saved
        if is_sqlite:
            event.listen(engine, "connect", _sqlite_pragmas)
        return engine

    def _get_or_create(self, queue):
        try:
            return super()._get_or_create(queue)  # type: ignore[misc]  # not in kombu's stubs
        except IntegrityError:
            # Another process inserted the queue's row between kombu's check and its insert.
            self.session.rollback()
            return self.session.query(self.queue_cls).filter(self.queue_cls.name == queue).one()


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


class Transport(kombu_sqla.Transport):
    Channel = Channel


def register() -> None:
    from kombu.transport import TRANSPORT_ALIASES

    for alias in ("sqla", "sqlalchemy"):
        TRANSPORT_ALIASES[alias] = "benchsite.sqlite_broker:Transport"
