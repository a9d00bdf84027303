"""The gateway of one attempt: two listeners (a Unix socket for the sandbox, a loopback TCP
port for agents on the worker), a thread per client connection, and the shared state each
request (runs/gateway/forward.py) works with."""

from __future__ import annotations

import contextlib
import logging
import secrets
import shutil
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from types import TracebackType
from typing import Any

from runs.gateway.config import GatewayConfig, GatewaySummary
from runs.gateway.forward import Call
from runs.gateway.ledger import Ledger
from runs.gateway.record import REDACTED, RecordWriter
from runs.gateway.upstream import Upstream
from runs.pricing import Price, PriceQuery, load_price_table, price_for
from sandbox.gateway_mount import (
    SOCKET_NAME,
    GatewayMount,
    forwarder_binary,
    make_socket_dir,
    share_socket,
)

log = logging.getLogger(__name__)

TOKEN_PREFIX = "abgw-"
# An idle kept-alive client connection is dropped after this long (its thread ends).
IDLE_TIMEOUT_SEC = 120.0
# How long close() waits for requests in flight to end (their upstream is cut first).
CLOSE_WAIT_SEC = 10.0


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # kept-alive connections: a CLI's calls share one
    timeout = IDLE_TIMEOUT_SEC
    server: _Listener  # type: ignore[assignment]

    def _call(self) -> None:
        with self.server.gateway.in_flight():
            Call(self.server.gateway, self, self.server.via).run()

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _call

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("gateway %s: " + format, self.server.via, *args)


class _Listener:
    """Accepts connections on one socket, each served by a thread of its own."""

    def __init__(self, sock: socket.socket, gateway: Gateway, via: str):
        self.sock = sock
        self.gateway = gateway
        self.via = via
        self._thread = threading.Thread(target=self._accept, daemon=True, name=f"gateway-{via}")
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, address = self.sock.accept()
            except OSError:
                return  # closed
            if conn.family == socket.AF_INET:
                # Headers and body go out in one write, but SSE events are small and many.
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(
                target=self._serve, args=(conn, address), daemon=True, name=f"gateway-{self.via}"
            ).start()

    def _serve(self, conn: socket.socket, address: Any) -> None:
        try:
            _Handler(conn, address or ("sandbox", 0), self)  # type: ignore[arg-type]
        except Exception:  # a client that vanished mid-request, say
            log.debug("gateway connection ended with an error", exc_info=True)
        finally:
            with contextlib.suppress(OSError):
                conn.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in accept()
        self.sock.close()
        self._thread.join(5)


class KeyScrubber:
    """Replaces the real key in a byte stream fed in pieces, holding back only a tail that
    could be the start of the key (never the end of an SSE event in practice)."""

    def __init__(self, secret: bytes):
        self.secret = secret
        self.tail = b""

    def feed(self, chunk: bytes) -> bytes:
        if not self.secret:
            return chunk
        data = (self.tail + chunk).replace(self.secret, REDACTED.encode())
        # The earliest place in the last len(key) - 1 bytes where a key could be starting.
        first = self.secret[:1]
        at = data.find(first, max(0, len(data) - len(self.secret) + 1))
        while at != -1 and not self.secret.startswith(data[at:]):
            at = data.find(first, at + 1)
        cut = len(data) if at == -1 else at
        self.tail = data[cut:]
        return data[:cut]

    def flush(self) -> bytes:
        out, self.tail = self.tail, b""
        return out


class Gateway:
    """Serving from construction until ``close()`` (or the end of the ``with`` block)."""

    def __init__(self, config: GatewayConfig):
        self.config = config
        self.token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        self._price_table = load_price_table(config.price_table_path)
        self._prices: dict[str, Price | None] = {}
        self.upstream = Upstream(config.upstream_base_url, config.upstream_timeout_sec)
        self.ledger = Ledger(config.budgets)
        self.writer = RecordWriter(config.record_path)
        self._closed = threading.Event()
        self._key = config.upstream_api_key.encode()
        self._mount: GatewayMount | None = None
        self._listeners: list[_Listener] = []
        self._inflight = 0
        self._idle = threading.Condition()
        self._dir = make_socket_dir(config.owner)
        try:
            unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            unix.bind(str(self._dir / SOCKET_NAME))
            share_socket(self._dir / SOCKET_NAME)
            unix.listen(64)
            self._listeners.append(_Listener(unix, self, "sandbox"))
            tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            tcp.bind(("127.0.0.1", 0))
            tcp.listen(64)
            self._listeners.append(_Listener(tcp, self, "host"))
        except BaseException:
            self.close()
            raise
        self.host_base_url = f"http://127.0.0.1:{tcp.getsockname()[1]}"

    # -- what the agent side uses -----------------------------------------------------------

    @property
    def sandbox_mount(self) -> GatewayMount:
        """For ``SandboxConfig(gateway=...)``. Builds the forwarder on first use (cached)."""
        if self._mount is None:
            self._mount = GatewayMount(
                host_dir=self._dir, forwarder=forwarder_binary(), port=self.config.sandbox_port
            )
        return self._mount

    @property
    def sandbox_base_url(self) -> str:
        """The gateway's URL for a command in the sandbox (the forwarder's port)."""
        return f"http://127.0.0.1:{self.config.sandbox_port}"

    @property
    def socket_path(self) -> Path:
        """The Unix socket on the host."""
        return self._dir / SOCKET_NAME

    @property
    def summary(self) -> GatewaySummary:
        return self.ledger.summary()

    def start_clock(self) -> None:
        """Start the wall-time budget now, when the agent starts: a gateway opens before its
        sandbox (the sandbox mounts its socket), so a clock started at opening would count
        the sandbox's start, the setup and the baseline as the agent's time. Until this is
        called the clock runs from the opening (a gateway used on its own)."""
        self.ledger.start_clock()

    # -- shared with the requests -----------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    @contextlib.contextmanager
    def in_flight(self) -> Iterator[None]:
        """Held by each request while it runs: close() waits for them to write their record."""
        with self._idle:
            self._inflight += 1
        try:
            yield
        finally:
            with self._idle:
                self._inflight -= 1
                self._idle.notify_all()

    def wait_closed(self, seconds: float) -> bool:
        """Sleep (a retry's backoff), cut short by close(); True when closed."""
        return self._closed.wait(seconds)

    def price(self, model: str) -> Price | None:
        """The price of a call: the configuration's prices, else the table's for the model the
        request named, else for the configured model."""
        if model not in self._prices:
            cfg = self.config
            found = None
            for name in (model, cfg.model_name):
                query = PriceQuery(name, cfg.price_input_per_mtok, cfg.price_output_per_mtok)
                if name and (found := price_for(query, self._price_table)) is not None:
                    break
            self._prices[model] = found
        return self._prices[model]

    def scrubber(self) -> KeyScrubber:
        return KeyScrubber(self._key)

    def scrub(self, data: bytes) -> bytes:
        return data.replace(self._key, REDACTED.encode()) if self._key else data

    def scrub_text(self, text: str) -> str:
        key = self.config.upstream_api_key
        return text.replace(key, REDACTED) if key else text

    # -- lifecycle --------------------------------------------------------------------------

    def close(self) -> None:
        """Stop: the token dies (a request on a connection still open gets 401), the socket
        goes, calls in flight are cut, the record is closed. Safe to call twice."""
        if self._closed.is_set():
            return
        self._closed.set()
        self.ledger.end()
        for listener in self._listeners:
            listener.close()
        shutil.rmtree(self._dir, ignore_errors=True)
        self.upstream.close()
        with self._idle:
            self._idle.wait_for(lambda: self._inflight == 0, CLOSE_WAIT_SEC)
        self.writer.close()

    def __enter__(self) -> Gateway:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def open_gateway(config: GatewayConfig) -> Gateway:
    """Start a gateway for one attempt (serving at once; ``with`` it to close it)."""
    return Gateway(config)
