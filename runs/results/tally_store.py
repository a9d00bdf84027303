"""Each run's aggregates stored in the database (``runs.models.RunTally``): the second tier of
``runs.results.run_tallies``, which a new web process, another gunicorn worker or an ``ab``
call finds instead of reading every attempt again.

A row holds one kind of aggregate of one run under the stamp the run had when its attempts were
read (``runs.data_version``); a reader uses it only when that is the stamp it read itself before
anything else, so it is exact in the same way as the process's own tier. The payload is the
numbers' bytes, behind a header naming their layout and a checksum over the run, the stamp and
the bytes: a row of another layout (the counts changed), a truncated or altered one is ignored
and the run read from its attempts, never shown.

Writing happens while a page is being read, so it is best effort: it waits a moment at most for
a busy writer (SQLite's lock, a PostgreSQL row lock) and otherwise skips, logged at debug. The
caller keeps it out of a PostgreSQL transaction (``run_tallies.enabled``).
"""

from __future__ import annotations

import abc
import dataclasses
import logging
import struct
import zlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

import numpy as np
from django.db import DatabaseError, connections, transaction

from runs.models import RunTally

logger = logging.getLogger(__name__)

V = TypeVar("V")

# How long a write waits for another writer before it gives up (a page is being served).
WRITE_WAIT_MS = 100

_HEADER = struct.Struct("<II")  # layout tag, checksum


def _crc(text: str) -> int:
    return zlib.crc32(text.encode())


class Codec(abc.ABC, Generic[V]):
    """How one kind of aggregate becomes bytes and back. ``layout`` names everything the bytes
    depend on: a row written under another layout is not read."""

    def __init__(self, layout: str) -> None:
        self.tag = _crc(layout)

    @abc.abstractmethod
    def body(self, value: V) -> bytes:
        """The value's bytes."""

    @abc.abstractmethod
    def value(self, body: bytes) -> V:
        """Raises ValueError when ``body`` cannot be this layout's."""

    def pack(self, run: int, stamp: int, value: V) -> bytes:
        body = self.body(value)
        return _HEADER.pack(self.tag, _checksum(run, stamp, body)) + body

    def unpack(self, run: int, stamp: int, payload: bytes) -> V:
        if len(payload) < _HEADER.size:
            raise ValueError("shorter than its header")
        tag, checksum = _HEADER.unpack_from(payload)
        body = payload[_HEADER.size :]
        if tag != self.tag:
            raise ValueError("another layout")
        if checksum != _checksum(run, stamp, body):
            raise ValueError("checksum")
        return self.value(body)


def _checksum(run: int, stamp: int, body: bytes) -> int:
    return zlib.crc32(body, zlib.crc32(struct.pack("<qq", run, stamp)))


class ArraysCodec(Codec[V]):
    """An (ids, counts) pair of int64 arrays, ``columns`` counts a row: ``make(ids, counts)``
    builds the value, ``parts(value)`` takes it apart."""

    def __init__(self, columns: tuple[str, ...], make: Any, parts: Any) -> None:
        super().__init__("arrays:int64:" + ",".join(columns))
        self.width = len(columns)
        self.make = make
        self.parts = parts

    def body(self, value: V) -> bytes:
        ids, counts = self.parts(value)
        return (
            np.ascontiguousarray(ids, dtype="<i8").tobytes()
            + np.ascontiguousarray(counts, dtype="<i8").tobytes()
        )

    def value(self, body: bytes) -> V:
        row = 8 * (1 + self.width)
        if len(body) % row:
            raise ValueError(f"{len(body)} bytes is no whole number of rows")
        n = len(body) // row
        ids = np.frombuffer(body, dtype="<i8", count=n).astype(np.int64)
        counts = np.frombuffer(body, dtype="<i8", offset=8 * n).astype(np.int64)
        return self.make(ids, counts.reshape(n, self.width))


class NumbersCodec(Codec[V | None]):
    """A dataclass of ints and floats (its fields' defaults say which), or None (no bytes)."""

    def __init__(self, cls: type[V]) -> None:
        fields = dataclasses.fields(cls)  # type: ignore[arg-type]
        self.cls = cls
        self.names = [f.name for f in fields]
        self.struct = struct.Struct(
            "<" + "".join("d" if isinstance(f.default, float) else "q" for f in fields)
        )
        super().__init__(f"numbers:{cls.__name__}:{','.join(self.names)}:{self.struct.format}")

    def body(self, value: V | None) -> bytes:
        if value is None:
            return b""
        return self.struct.pack(*(getattr(value, name) for name in self.names))

    def value(self, body: bytes) -> V | None:
        if not body:
            return None
        if len(body) != self.struct.size:
            raise ValueError(f"{len(body)} bytes, not {self.struct.size}")
        return self.cls(*self.struct.unpack(body))


def load(
    codecs: Mapping[str, Codec[Any]], *, using: str, stamps: Mapping[int, int]
) -> dict[str, dict[int, Any]]:
    """Each kind of ``codecs`` stored for the runs of ``stamps`` (run id -> the stamp the caller
    read), where the row was written under that very stamp and decodes; one query."""
    out: dict[str, dict[int, Any]] = {kind: {} for kind in codecs}
    if not stamps:
        return out
    try:
        rows = list(
            RunTally.objects.using(using)
            .filter(kind__in=list(codecs), run_id__in=list(stamps))
            .values_list("kind", "run_id", "stamp", "payload")
        )
    except DatabaseError as error:  # the table not there yet (code ahead of its migration)
        logger.debug("stored aggregates not read: %s", error)
        return out
    for kind, run, stamp, payload in rows:
        if stamp != stamps[run]:
            continue  # written before the run's last write
        try:
            out[kind][run] = codecs[kind].unpack(run, stamp, bytes(payload))
        except ValueError as error:
            logger.debug("stored %s of run %s ignored: %s", kind, run, error)
    return out


def save(
    values: Mapping[str, tuple[Codec[Any], Mapping[int, tuple[int, Any]]]], *, using: str
) -> bool:
    """Store each kind's value of each run (kind -> (its codec, run id -> (stamp read before
    the attempts, value))), replacing what was there; one statement. Best effort: False (and
    nothing stored) when another writer holds the database longer than ``WRITE_WAIT_MS`` or
    the write fails otherwise (a run deleted since)."""
    rows = [
        RunTally(run_id=run, kind=kind, stamp=stamp, payload=codec.pack(run, stamp, value))
        for kind, (codec, of_runs) in sorted(values.items(), key=lambda item: item[0])
        for run, (stamp, value) in sorted(of_runs.items())  # one order: no deadlock between two
    ]
    if not rows:
        return True
    try:
        with _short_wait(using), transaction.atomic(using=using):
            if connections[using].vendor == "postgresql":
                with connections[using].cursor() as cursor:  # until the end of this transaction
                    cursor.execute(f"SET LOCAL lock_timeout = '{WRITE_WAIT_MS}ms'")
            RunTally.objects.using(using).bulk_create(
                rows,
                update_conflicts=True,
                unique_fields=["run", "kind"],
                update_fields=["stamp", "payload"],
            )
    except DatabaseError as error:
        logger.debug("aggregates of %d runs not stored: %s", len(rows), error)
        return False
    return True


@contextmanager
def _short_wait(using: str) -> Iterator[None]:
    """SQLite: wait at most ``WRITE_WAIT_MS`` for the write lock (the connection's busy
    timeout, set back after: the connection is kept between requests). PostgreSQL's lock
    timeout is set for the write's transaction only (``save``)."""
    connection = connections[using]
    if connection.vendor != "sqlite":
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA busy_timeout")
        before = int(cursor.fetchone()[0])
        cursor.execute(f"PRAGMA busy_timeout = {WRITE_WAIT_MS}")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"PRAGMA busy_timeout = {before}")


def clear(using: str = "default") -> int:
    """Delete every stored row (the bench's "nothing stored" figures: a first read after a
    migration); returns how many."""
    return RunTally.objects.using(using).all().delete()[0]
