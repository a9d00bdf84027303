"""A client's connection to the gateway, read with h11: request heads, targets and bodies.

h11 (a small, maintained, pure-Python HTTP/1.1 state machine) does the parsing the gateway
once did by hand: request lines, header syntax, Content-Length and chunked framing (no
negative, malformed or oversized chunk sizes, no conflicting lengths, no transfer coding but
chunked). On top of it: the target must be one of the route table's (runs/gateway/routes.py),
a body is read only up to ``max_request_bytes`` as it arrives (decoded bytes) and its framing
up to a quarter more (chunk extensions cannot make a small body endless), and the bytes of all
bodies held at once by one gateway stay under ``ByteBudget``. What h11 refuses, and what the
checks refuse, becomes a ``BadRequest`` the call answers (400, 405, 408, 413, 431, 501, 503,
505) and records without a body.

Each request gets a new h11 connection fed the bytes left after the previous one: the answer is
written by runs/gateway/forward.py itself (streamed as it arrives), so h11 reads requests only.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time

import h11

from runs.gateway.gemini import redact_target
from runs.gateway.routes import BadTarget, Match, match

# A request line with its headers (and a chunk header line, and trailers) is at most this long.
MAX_HEAD_BYTES = 64 * 1024
READ_SIZE = 65536
# Framing a chunked body may add on top of its data, as a share of the data limit.
FRAMING_SHARE = 4
# Bytes of an unread body read and dropped before closing, so the client reads the answer
# rather than a reset; and for how long.
DRAIN_BYTES = 256 * 1024
DRAIN_SEC = 1.0
# How long a body waits for room under the gateway's ByteBudget before it is refused (503).
BUSY_WAIT_SEC = 30.0
# A chunked body reserves room in steps of this much.
RESERVE_STEP = 1024 * 1024
METHODS = ("GET", "POST")


class BadRequest(Exception):
    """A request the gateway will not forward (malformed, too large, too many at once): the
    status and the API's error type to answer with, and the record's outcome."""

    def __init__(self, status: int, kind: str, message: str, outcome: str = "bad_request"):
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.outcome = outcome


def bad(message: str, status: int = 400) -> BadRequest:
    return BadRequest(status, "invalid_request_error", f"agentbench gateway: {message}")


class ByteBudget:
    """The request bytes one gateway holds in memory at once (bodies being read, then sent):
    20 parallel 32 MiB requests wait for each other instead of taking the worker's memory."""

    def __init__(self, limit: int):
        self.limit = limit
        self.used = 0
        self._room = threading.Condition()

    def take(self, size: int, wait: float) -> bool:
        """Reserve ``size`` bytes, waiting up to ``wait`` seconds for room; False if none."""
        with self._room:
            if not self._room.wait_for(lambda: self.used + size <= self.limit, wait):
                return False
            self.used += size
            return True

    def give(self, size: int) -> None:
        with self._room:
            self.used -= size
            self._room.notify_all()


class Client:
    """One client connection: its socket, and the bytes read past the last request."""

    def __init__(self, sock: socket.socket, budget: ByteBudget, idle_timeout: float):
        self.sock = sock
        self.budget = budget
        self.idle_timeout = idle_timeout
        self._left = b""
        self._eof = False
        sock.settimeout(idle_timeout)

    def write(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv(self) -> bytes:
        """The next bytes (b"" when the client closed); TimeoutError after the idle timeout."""
        if self._eof:
            return b""
        data = self.sock.recv(READ_SIZE)
        self._eof = not data
        return data

    def keep(self, left: bytes, eof: bool) -> None:
        """What was read past a request's end (the next request's first bytes)."""
        self._left = left
        self._eof = self._eof or eof

    def next_request(self) -> Request | None:
        """The next request, its head read (a malformed one carries its ``refusal``), or None
        when the client closed or stayed idle between requests."""
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)
        if self._left:
            conn.receive_data(self._left)
        if self._eof:
            conn.receive_data(b"")
        self._left = b""
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError as exc:
                return Request.refused(self, bad(f"a malformed request: {exc}", _status(exc)))
            if event is h11.NEED_DATA:
                try:
                    conn.receive_data(self.recv())
                except TimeoutError:
                    if not conn.trailing_data[0]:
                        return None  # idle between requests: the connection ends quietly
                    return Request.refused(self, bad("the request head stalled", 408))
                except OSError:
                    return None
                continue
            if isinstance(event, h11.Request):
                return Request(self, conn, event)
            return None  # ConnectionClosed

    def close(self, drain: bool) -> None:
        """Close; with ``drain``, first read (and drop) a little of what the client still
        sends, so that it reads the answer rather than a reset."""
        with contextlib.suppress(OSError):
            if drain and not self._eof:
                self.sock.shutdown(socket.SHUT_WR)
                self.sock.settimeout(DRAIN_SEC)
                deadline = time.monotonic() + DRAIN_SEC
                dropped = 0
                while dropped < DRAIN_BYTES and time.monotonic() < deadline:
                    data = self.sock.recv(READ_SIZE)
                    if not data:
                        break
                    dropped += len(data)
        with contextlib.suppress(OSError):
            self.sock.close()


def _status(exc: h11.RemoteProtocolError) -> int:
    return exc.error_status_hint if exc.error_status_hint in (400, 413, 431, 501) else 400


class Request:
    """One request: ``command``, ``path`` (the target as sent), ``headers`` (names as sent),
    ``match`` (its route), ``refusal`` (set: answer it with that, its body unread), the body
    read on demand under the caps (``read_body``), ``wfile`` and ``close_connection`` for the
    answer (what forward.Call uses)."""

    def __init__(self, client: Client, conn: h11.Connection | None, event: h11.Request | None):
        self.client = client
        self.wfile = client
        self._conn = conn
        self.command = event.method.decode("ascii") if event else ""
        self.path = event.target.decode("ascii") if event else ""
        self.headers = (
            [(k.decode("latin-1"), v.decode("latin-1")) for k, v in event.headers.raw_items()]
            if event
            else []
        )
        self.refusal: BadRequest | None = None
        self.match: Match | None = None
        self.close_connection = event is None
        self._reserved = 0
        self._done = False
        self._length: int | None = None
        if event is None:
            return
        # h11 checked it is digits and merged repeats of one value (conflicting ones: 400).
        self._length = next((int(v) for k, v in event.headers if k == b"content-length"), None)
        tokens = {t.strip().lower() for t in self._header("connection").split(",")}
        self.close_connection = event.http_version == b"1.0" or "close" in tokens
        if event.http_version not in (b"1.0", b"1.1"):  # h11 reads any d.d
            self.refuse(bad(f"HTTP/{event.http_version.decode()} is not HTTP/1.1", 505))
            return
        if self.command not in METHODS:
            self.refuse(bad(f"the method {self.command} is not one the gateway forwards", 405))
            return
        try:
            self.match = match(self.command, self.path)
        except BadTarget as exc:
            target = redact_target(self.path[:200])  # a ?key= is a credential
            self.refuse(bad(f"{self.command} {target!r}: {exc}"))
            return
        if self._header("transfer-encoding") and self._header("content-length"):
            self.refuse(bad("a request with both Transfer-Encoding and Content-Length"))

    @classmethod
    def refused(cls, client: Client, refusal: BadRequest) -> Request:
        request = cls(client, None, None)
        request.refusal = refusal
        return request

    def refuse(self, refusal: BadRequest) -> None:
        """Answer with ``refusal`` and close: the body, if any, is never read."""
        self.refusal = refusal
        self.close_connection = True

    def _header(self, name: str) -> str:
        return ", ".join(v for k, v in self.headers if k.lower() == name)

    @property
    def upstream_path(self) -> str:
        """The path the upstream gets (relative to its base URL), from the route table."""
        assert self.match is not None and self.match.route is not None
        return self.match.upstream_path

    def read_body(self, limit: int) -> bytes:
        """The whole body, read as it arrives: 413 once it passes ``limit`` bytes (or its
        declared length does, before any of it is read), 400 for malformed framing, 408 for a
        client that stops sending, 503 when the gateway's budget of bytes held has no room."""
        conn = self._conn
        assert conn is not None and self.refusal is None
        too_large = BadRequest(
            413, "request_too_large", f"agentbench gateway: a request body is over {limit} bytes"
        )
        if self._length is not None and self._length > limit:
            raise too_large
        self._reserve(self._length or 0)
        if conn.they_are_waiting_for_100_continue:
            self._send(
                conn.send(
                    h11.InformationalResponse(status_code=100, headers=[], reason=b"Continue")
                )
            )
        wire_limit = limit + limit // FRAMING_SHARE + MAX_HEAD_BYTES
        received = len(conn.trailing_data[0])
        parts: list[bytes] = []
        size = 0
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError as exc:
                raise bad(f"a malformed request body: {exc}", _status(exc)) from exc
            if event is h11.NEED_DATA:
                if received > wire_limit:
                    raise too_large
                try:
                    data = self.client.recv()
                except TimeoutError as exc:
                    raise bad("the client stopped sending its body", 408) from exc
                except OSError as exc:
                    raise bad(f"the connection failed mid-body: {exc}") from exc
                received += len(data)
                conn.receive_data(data)
            elif isinstance(event, h11.Data):
                size += len(event.data)
                if size > limit:
                    raise too_large
                if size > self._reserved:  # a chunked body: room in steps as it grows
                    self._reserve(min(size + RESERVE_STEP, limit))
                parts.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                break
            else:  # ConnectionClosed (h11 raises first for a cut body)
                raise bad("the client closed the connection before the end of the body")
        self._done = True
        self.client.keep(*conn.trailing_data)
        return b"".join(parts)

    def _reserve(self, size: int) -> None:
        """Hold room for ``size`` bytes of body in all under the gateway's budget."""
        step = size - self._reserved
        if step <= 0:
            return
        budget = self.client.budget
        if not budget.take(step, BUSY_WAIT_SEC):
            raise BadRequest(
                503,
                "overloaded_error",
                f"agentbench gateway: {budget.used} bytes of requests are being read or sent "
                f"already (the limit is {budget.limit}); try again",
                outcome="busy",
            )
        self._reserved += step

    def _send(self, data: bytes | None) -> None:
        if data:
            self.client.write(data)

    @property
    def body_read(self) -> bool:
        return self._done

    def finish(self) -> None:
        """The request is answered: its room under the budget is free; a body left unread
        closes the connection."""
        self.client.budget.give(self._reserved)
        self._reserved = 0
        if not self._done:
            self.close_connection = True
