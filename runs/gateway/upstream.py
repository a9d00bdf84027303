"""The upstream provider: kept-alive HTTP(S) connections and one request-response at a time.

The standard library's ``http.client``: it hands the answer over as it arrives (``read1``),
with chunked transfer decoded, which is all the gateway needs to pass a stream through.
"""

from __future__ import annotations

import contextlib
import http.client
import select
import socket
import ssl
import threading
import urllib.parse

# Idle connections kept for the next call (CLIs seldom run more than a few calls at once).
MAX_IDLE = 8
READ_SIZE = 65536
_STALE = (BrokenPipeError, ConnectionResetError)


def _closed_by_server(conn: http.client.HTTPConnection) -> bool:
    """An idle connection with something to read has been closed by the server (an idle one
    has nothing to say): not to be used again."""
    if conn.sock is None:
        return True
    try:
        return bool(select.select([conn.sock], [], [], 0)[0])
    except (OSError, ValueError):
        return True


class Upstream:
    def __init__(self, base_url: str, timeout: float):
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"upstream_base_url {base_url!r}: expected http(s)://host[:port]/path")
        self.https = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port
        # The Host header of every request: the configured upstream's, whatever the client sent.
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.host_header = host if self.port is None else f"{host}:{self.port}"
        self.base_path = parts.path.rstrip("/")
        self.timeout = timeout
        self._context = ssl.create_default_context() if self.https else None
        self._lock = threading.Lock()
        self._idle: list[http.client.HTTPConnection] = []
        self._active: set[http.client.HTTPConnection] = set()
        self._closed = False

    def _connection(self, fresh: bool) -> tuple[http.client.HTTPConnection, bool]:
        with self._lock:
            if self._closed:
                raise ConnectionAbortedError("the gateway is closed")
            conn = None
            while not fresh and self._idle and conn is None:
                conn = self._idle.pop()
                if _closed_by_server(conn):
                    conn.close()
                    conn = None
            reused = conn is not None
            if conn is None:
                if self._context is not None:
                    conn = http.client.HTTPSConnection(
                        self.host, self.port, timeout=self.timeout, context=self._context
                    )
                else:
                    conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            self._active.add(conn)
            return conn, reused

    def send(self, method: str, path: str, headers: list[tuple[str, str]], body: bytes) -> Exchange:
        """Send one request to the base URL's path + ``path`` (a route's, runs/gateway/routes.py);
        the answer's status and headers are in, its body is to be read. Raises OSError or
        http.client.HTTPException when there is no answer."""
        if not path.startswith("/") or any(bad in path for bad in ("..", "//", "#", "%", "\\")):
            raise ValueError(f"not a route's path: {path!r}")  # never a client's raw target
        fresh = False
        while True:
            conn, reused = self._connection(fresh)
            try:
                # Headers one by one (repeated ones kept); Host the configured upstream's.
                conn.putrequest(
                    method, self.base_path + path, skip_host=True, skip_accept_encoding=True
                )
                conn.putheader("Host", self.host_header)
                for name, value in headers:
                    conn.putheader(name, value)
                if body or method in ("POST", "PUT", "PATCH"):
                    conn.putheader("Content-Length", str(len(body)))
                conn.endheaders(body or None)
            except _STALE:
                # A kept-alive connection closed by the server as we sent: it never had the
                # request, which goes once more on a new connection.
                self._discard(conn)
                if not reused:
                    raise
                fresh = True
                continue
            except BaseException:
                self._discard(conn)
                raise
            try:
                return Exchange(self, conn, conn.getresponse())
            except BaseException:
                self._discard(conn)
                raise

    def _discard(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            self._active.discard(conn)
        conn.close()

    def _release(self, conn: http.client.HTTPConnection, reusable: bool) -> None:
        with self._lock:
            self._active.discard(conn)
            if reusable and not self._closed and len(self._idle) < MAX_IDLE:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        """Close every connection, cutting answers still being read (the attempt is over)."""
        with self._lock:
            self._closed = True
            conns = [*self._idle, *self._active]
            self._idle.clear()
        for conn in conns:
            if conn.sock is not None:
                # Wakes a thread blocked reading from it (close alone may not).
                with contextlib.suppress(OSError):
                    conn.sock.shutdown(socket.SHUT_RDWR)
            conn.close()


class Exchange:
    """One answer being read. ``finish`` returns the connection for reuse once it is fully
    read; ``abort`` drops it."""

    def __init__(
        self,
        upstream: Upstream,
        conn: http.client.HTTPConnection,
        response: http.client.HTTPResponse,
    ):
        self.upstream = upstream
        self.conn = conn
        self.response = response
        self.status = response.status
        self.reason = response.reason
        self.headers = response.getheaders()
        self._done = False

    def header(self, name: str) -> str:
        return self.response.getheader(name) or ""

    def read1(self) -> bytes:
        """The next bytes as they arrive (b"" at the end)."""
        return self.response.read1(READ_SIZE)

    def read_all(self, limit: int) -> bytes:
        """The whole body; ValueError past ``limit`` bytes."""
        data = bytearray()
        while chunk := self.read1():
            data += chunk
            if len(data) > limit:
                raise ValueError(f"the upstream's answer is over {limit} bytes")
        return bytes(data)

    def finish(self) -> None:
        if not self._done:
            self._done = True
            reusable = self.response.isclosed() and not self.response.will_close
            self.upstream._release(self.conn, reusable)

    def abort(self) -> None:
        if not self._done:
            self._done = True
            self.upstream._discard(self.conn)
