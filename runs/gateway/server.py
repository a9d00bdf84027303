"""The gateway of one attempt: two listeners (a Unix socket for the sandbox, a loopback TCP
port for agents on the worker), a thread per client connection (at most ``max_connections``),
its requests read by runs/gateway/inbound.py (h11) and served by runs/gateway/forward.py one
after the other (at most ``max_calls_in_flight`` at once), and the state they share."""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import secrets
import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

from runs.gateway.config import GatewayConfig, GatewayConfigError, GatewaySummary
from runs.gateway.forward import Call
from runs.gateway.inbound import BadRequest, ByteBudget, Client, Request
from runs.gateway.ledger import Ledger
from runs.gateway.record import RecordWriter
from runs.gateway.redact import KeyScrubber, RedactingFilter, Redactor
from runs.gateway.upstream import Upstream
from runs.pricing import LIST_PRICES, Price, PriceQuery, price_for, read_price_file, table_on
from sandbox.gateway_mount import (
    SOCKET_NAME,
    GatewayMount,
    forwarder_binary,
    make_socket_dir,
    share_socket,
)

log = logging.getLogger(__name__)
# Where the gateway logs: each gateway's secrets are taken out of their records.
_LOGGERS = (__name__, "runs.gateway.forward", "runs.gateway.upstream")

TOKEN_PREFIX = "abgw-"
# An idle kept-alive client connection is dropped after this long (its thread ends).
IDLE_TIMEOUT_SEC = 120.0
# How long close() waits for requests in flight to end (their upstream is cut first).
CLOSE_WAIT_SEC = 10.0
# How long a refused connection's answer may take to write (the listener's own thread).
REFUSE_TIMEOUT_SEC = 1.0


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
                conn, _ = self.sock.accept()
            except OSError:
                return  # closed
            if conn.family == socket.AF_INET:
                # Headers and body go out in one write, but SSE events are small and many.
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if not self.gateway.connections.acquire(blocking=False):
                self._refuse(conn)
                continue
            try:
                threading.Thread(
                    target=self._serve, args=(conn,), daemon=True, name=f"gateway-{self.via}"
                ).start()
            except RuntimeError:  # no thread to be had: this connection is refused
                self.gateway.connections.release()
                self._refuse(conn)

    def _refuse(self, conn: socket.socket) -> None:
        """A connection over the limit: a 503 at once, recorded, and closed (no thread)."""
        gw = self.gateway
        client = Client(conn, gw.request_bytes, REFUSE_TIMEOUT_SEC)
        refusal = BadRequest(
            503,
            "overloaded_error",
            f"agentbench gateway: {gw.config.max_connections} connections are open already "
            "(the limit per attempt); close one and try again",
            outcome="busy",
        )
        try:
            Call(gw, Request.refused(client, refusal), self.via).run()
        except Exception:
            log.debug("gateway refusal ended with an error", exc_info=True)
        finally:
            client.close(drain=False)

    def _serve(self, conn: socket.socket) -> None:
        """The connection's requests, one after the other, until it closes."""
        gw = self.gateway
        client = Client(conn, gw.request_bytes, IDLE_TIMEOUT_SEC)
        drain = False
        try:
            while (request := client.next_request()) is not None:
                with gw.in_flight(), gw.call_slot(request):
                    try:
                        Call(gw, request, self.via).run()
                    finally:
                        request.finish()
                if request.close_connection:
                    drain = not request.body_read
                    break
        except Exception:  # a client that vanished mid-request, say
            log.debug("gateway connection ended with an error", exc_info=True)
        finally:
            client.close(drain)
            gw.connections.release()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in accept()
        self.sock.close()
        self._thread.join(5)


class Gateway:
    """Serving from construction until ``close()`` (or the end of the ``with`` block)."""

    def __init__(self, config: GatewayConfig):
        if config.upstream_policy is not None:  # before anything listens or holds the key
            config.upstream_policy.check(
                base_url=config.upstream_base_url, api_key_env=config.api_key_env
            )
        self.config = config
        self.token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        path = config.price_table_path
        self._price_file = read_price_file(path) if path else {}
        self._price_rows = LIST_PRICES if config.price_rows is None else config.price_rows
        self._prices: dict[tuple[str, dt.date], Price | None] = {}
        self.allowed_models = tuple(
            dict.fromkeys(m for m in (config.model_name, *config.allowed_models) if m)
        )
        self._check_prices()
        self.upstream = Upstream(config.upstream_base_url, config.upstream_timeout_sec)
        self.ledger = Ledger(config.budgets)
        # By value: the key, the token and the configured secrets (runs/gateway/redact.py).
        self.redactor = Redactor((config.upstream_api_key, self.token, *config.secrets))
        self._log_filter = RedactingFilter(self.redactor)
        for logger in _LOGGERS:
            logging.getLogger(logger).addFilter(self._log_filter)
        self.writer = RecordWriter(
            config.record_path, max_bytes=config.record_max_bytes, redactor=self.redactor
        )
        self._closed = threading.Event()
        self._mount: GatewayMount | None = None
        self._listeners: list[_Listener] = []
        self._inflight = 0
        self._idle = threading.Condition()
        self.connections = threading.BoundedSemaphore(config.max_connections)
        self._calls = threading.BoundedSemaphore(config.max_calls_in_flight)
        self.request_bytes = ByteBudget(
            max(config.max_request_bytes_in_flight, config.max_request_bytes)
        )
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

    @contextlib.contextmanager
    def call_slot(self, request: Request) -> Iterator[None]:
        """Held by each request while it runs; one over ``max_calls_in_flight`` is refused
        (429), its body unread."""
        admitted = self._calls.acquire(blocking=False)
        if not admitted and request.refusal is None:
            request.refuse(
                BadRequest(
                    429,
                    "rate_limit_error",
                    f"agentbench gateway: {self.config.max_calls_in_flight} calls of this attempt "
                    "are in flight already (the limit); try again when one has ended",
                    outcome="busy",
                )
            )
        try:
            yield
        finally:
            if admitted:
                self._calls.release()

    def wait_closed(self, seconds: float) -> bool:
        """Sleep (a retry's backoff), cut short by close(); True when closed."""
        return self._closed.wait(seconds)

    def model_allowed(self, model: str) -> bool:
        """Whether a request may name ``model``: the configuration's, or one it lists (a
        gateway configured with no model pins none)."""
        return not self.allowed_models or model in self.allowed_models

    def price(self, model: str, day: dt.date | None = None) -> Price | None:
        """The price of a call of ``model`` on ``day`` (UTC; today by default): the
        configuration's own prices for its model, else the price file's, else the price
        table's rows in effect that day. None: unpriced (its cost is unknown; refused with a
        cost budget when the gateway starts)."""
        day = day or dt.datetime.now(dt.UTC).date()
        key = (model, day)
        if key not in self._prices:
            cfg = self.config
            # The configuration's own prices are its model's only: another (allowed) model is
            # priced from the table.
            own = model == cfg.model_name
            query = PriceQuery(
                model,
                cfg.price_input_per_mtok if own else None,
                cfg.price_output_per_mtok if own else None,
            )
            table = {**table_on(self._price_rows, day), **self._price_file}
            found = price_for(query, table) if model else None
            if len(self._prices) >= 64:  # a gateway that pins no model: any name comes in
                return found
            self._prices[key] = found
        return self._prices[key]

    def _check_prices(self) -> None:
        """A cost budget needs a price for every model the attempt may call: an unpriced
        model would cost $0 and the budget never run out."""
        if self.config.budgets.max_cost_usd is None:
            return
        if not self.allowed_models:
            raise GatewayConfigError(
                "max_cost_usd: a cost budget needs the model's name (model_name) to price it"
            )
        for model in self.allowed_models:
            if self.price(model) is None:
                raise GatewayConfigError(
                    f"max_cost_usd: the model {model!r} has no price: set the configuration's "
                    "price_input_per_mtok and price_output_per_mtok, or add it to the price "
                    "table (admin: Prices)"
                )

    def scrubber(self) -> KeyScrubber:
        return self.redactor.stream()

    def scrub(self, data: bytes) -> bytes:
        return self.redactor.bytes(data)

    def scrub_text(self, text: str) -> str:
        return self.redactor.text(text)

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
        for logger in _LOGGERS:
            logging.getLogger(logger).removeFilter(self._log_filter)

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
