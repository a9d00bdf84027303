"""The embedded broker (kombu's SQL transport on a SQLite file, benchsite/sqlite_broker.py)
when several processes share the file."""

from __future__ import annotations

import sqlite3

from kombu import Connection
from sqlalchemy import event

from benchsite import sqlite_broker


def test_a_queue_another_process_declares_at_the_same_moment_is_used_not_fatal(tmp_path):
    # `ab serve` once lost its worker this way: the worker found no row for its queue, the web
    # process inserted it, and the worker's own insert failed on the UNIQUE name.
    sqlite_broker.register()
    path = tmp_path / "broker.sqlite3"
    with Connection(f"sqla+sqlite:///{path}") as connection:
        session = connection.default_channel.session
        inserted = []

        def another_process_declares(*_):
            if not inserted:
                inserted.append(True)
                with sqlite3.connect(path) as other:
                    other.execute("INSERT INTO kombu_queue (name) VALUES ('ab-q')")

        event.listen(session, "before_flush", another_process_declares)
        queue = connection.SimpleQueue("ab-q")
        queue.put({"n": 1})
        message = queue.get(timeout=5)
        message.ack()
        queue.close()
    assert inserted, "the other process's insert did not happen before ours"
    assert message.payload == {"n": 1}
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM kombu_queue WHERE name = 'ab-q'").fetchone() == (1,)
