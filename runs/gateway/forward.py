"""One request through the gateway: token, route, budgets, retries, the answer passed back
as it arrives, and its record. ``Call.run`` is called by the HTTP handler of server.py."""

from __future__ import annotations

import hmac
import http
import http.client
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import runs.gateway.gemini as gemini
import runs.gateway.wire as wire
from runs.gateway.config import UpstreamError
from runs.gateway.inbound import BadRequest, Request
from runs.gateway.ledger import Reservation, estimate
from runs.gateway.meter import EventAligner, Meter, error_event
from runs.gateway.record import Capture, body_left_out, headers_record
from runs.gateway.upstream import Exchange
from runs.llm_errors import is_permanent_status, retry_after_sec
from runs.pricing import price_record, unpriced

if TYPE_CHECKING:
    from runs.gateway.server import Gateway

# Never passed on, either way (RFC 9110 7.6.1), plus what the gateway sets itself.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
AUTH_HEADERS = ("authorization", "x-api-key", "api-key", "x-goog-api-key")
NOT_FORWARDED = HOP_BY_HOP | {"host", "content-length", "accept-encoding", "expect", *AUTH_HEADERS}
NOT_RETURNED = HOP_BY_HOP | {"content-length", "set-cookie"}
# Budget refusals: 400, which no client retries (a 429 would be retried, over and over).
BUDGET_STATUS = 400
# Bytes of an error answer read before retrying (error bodies are small).
ERROR_BODY_LIMIT = 1024 * 1024
# The APIs whose requests name a model: it must be the attempt's.
PINNED_APIS = wire.MODEL_CALL_APIS | {wire.COUNT_TOKENS, wire.GEMINI_COUNT_TOKENS}


class ClientGone(Exception):
    """The CLI closed its connection while we answered."""


@dataclass
class Failed:
    """No success from the upstream after retries (or a permanent error at once)."""

    kind: str  # "permanent" | "transient"
    message: str
    status: int  # what the CLI gets
    reason: str
    headers: list[tuple[str, str]]
    body: bytes
    from_upstream: bool  # False: the gateway's own error (no answer at all)


class Call:
    def __init__(self, gateway: Gateway, request: Request, via: str):
        self.gw = gateway
        self.h = request
        self.started = time.monotonic()
        self.when = datetime.now(UTC)  # a call is priced by the prices in effect on its day
        self.headers = request.headers
        self.hdict = {k.lower(): v for k, v in self.headers}
        self.api = request.match.api if request.match is not None else None
        self.shape = wire.error_shape(self.api, self.hdict)
        self.held: Reservation | None = None  # what an admitted model call holds
        self.body_size = 0
        self.record: dict[str, Any] = {
            "seq": gateway.writer.next_seq(),
            "started_at": self.when.isoformat(),
            "via": via,
            "method": request.command,
            "path": gemini.redact_target(request.path[:2048]),
            "api": self.api,
            "model_call": self.api in wire.MODEL_CALL_APIS,
            "model": "",
            "stream": False,
            "outcome": "",
            "status": None,
            "retries": 0,
            "attempts": [],
            "error": None,
            "usage": None,
            "cost_usd": None,
            "price": None,
            "body_cap_bytes": gateway.config.body_cap_bytes,
        }

    # -- the request ------------------------------------------------------------------------

    def run(self) -> None:
        self.gw.ledger.add(requests=1)
        if self.record["via"] == "sandbox":
            # One request per connection from a sandbox: the forwarder that relays it belongs
            # to one exec, and a kept-alive connection another exec's CLI left on it would
            # hold that exec open (sandbox/gateway_forward.c drains before it exits).
            self.h.close_connection = True
        try:
            self._run()
        except ClientGone:
            self.record["outcome"] = self.record["outcome"] or "client_gone"
            self.h.close_connection = True
        finally:
            if self.held is not None:  # no answer counted: what it held goes back
                self.gw.ledger.settle(self.held)
            self.record["duration_ms"] = round((time.monotonic() - self.started) * 1000, 3)
            self.gw.writer.write(self.record)

    def _run(self) -> None:
        cfg = self.gw.config
        auth = self._auth()
        self.record["request"] = {
            "headers": headers_record(self.headers, self.gw.redactor),
            "auth": auth,
        }
        if (refused := self.h.refusal) is not None:  # a malformed head or target: body unread
            self._refuse(refused.status, refused.kind, str(refused), outcome=refused.outcome)
            return
        try:
            body = self.h.read_body(cfg.max_request_bytes)
        except BadRequest as exc:
            self.h.close_connection = True  # the rest of the body is not read
            self._refuse(exc.status, exc.kind, str(exc), outcome=exc.outcome)
            return
        # A request refused below keeps only its size (the sandbox must not fill the host's
        # disk with bodies the gateway never forwards).
        self.body_size = len(body)
        if self.gw.closed or auth != "attempt-token":
            if not self.gw.closed:
                self.gw.ledger.add(refused=1)
            self.h.close_connection = self.h.close_connection or self.gw.closed
            message = "agentbench gateway: this request does not carry the attempt's token"
            if self.gw.closed:
                message = "agentbench gateway: the attempt is over; its token is no longer valid"
            self._refuse(
                401, "authentication_error", message, outcome="refused", code="invalid_api_key"
            )
            return
        if self.api is None:
            self._refuse(
                404,
                "not_found_error",
                f"agentbench gateway: {self.h.command} {self.h.path.split('?')[0]} "
                "is not a model API the gateway forwards",
                outcome="not_allowed",
            )
            return
        model, stream, doc = wire.request_facts(body)
        if self.api in wire.MODEL_IN_PATH_APIS and self.h.match is not None:
            model, stream = self._model_in_path(self.h.match.model, doc)
        self.record.update(model=model, stream=stream)
        if self.api in PINNED_APIS and not self.gw.model_allowed(model):
            allowed = ", ".join(repr(m) for m in self.gw.allowed_models)
            self._refuse(
                400,
                "invalid_request_error",
                f"agentbench gateway: the model {model!r} is not this attempt's; "
                f"its configuration allows {allowed}",
                outcome="not_allowed",
                code="model_not_allowed",
            )
            return
        if self.api in wire.MODEL_CALL_APIS:
            tokens_in, tokens_out = estimate(doc, len(body), cfg.default_output_reserve)
            price = self.gw.price(model, self.when.date())
            cost = price.cost(tokens_in, tokens_out) if price else 0.0
            admitted = self.gw.ledger.admit(tokens_in + tokens_out, cost)
            if isinstance(admitted, tuple):
                name, message = admitted
                self.record["error"] = {"kind": "budget", "budget": name, "message": message}
                self._refuse(
                    BUDGET_STATUS,
                    "invalid_request_error",
                    message,
                    outcome="budget",
                    code="budget_exceeded",
                )
                return
            self.held = admitted
        capture = Capture(cfg.body_cap_bytes)
        capture.feed(self.gw.scrub(body))
        self.record["request"].update(capture.as_record())
        if self.api == wire.CHAT and stream and cfg.stream_usage and doc is not None:
            rewritten = wire.with_stream_usage(doc)
            if rewritten is not None:
                body = rewritten
                self.record["request"]["rewritten"] = "stream_options.include_usage=true"
        result = self._forward(body)
        if isinstance(result, Failed):
            self._fail(result)
        else:
            self._relay(result, model)

    def _model_in_path(self, model: str, doc: dict[str, Any] | None) -> tuple[str, bool]:
        """A Gemini request's model (its path's) and stream flag (its route's). A
        ``countTokens`` body may name a model of its own (``generateContentRequest.model``):
        when it is not the path's, the request counts as naming it (and is refused)."""
        route = self.h.match.route if self.h.match is not None else None
        inner = (doc or {}).get("generateContentRequest")
        named = inner.get("model") if isinstance(inner, dict) else None
        if isinstance(named, str) and named.removeprefix("models/") != model:
            model = named
        return model, route is not None and route.stream

    def _auth(self) -> str:
        """``attempt-token`` when every credential the request carries is the token, ``none``
        when it carries none, else ``other``."""
        presented = []
        if self.h.match is not None and self.h.match.key is not None:
            presented.append(self.h.match.key)
        for name in AUTH_HEADERS:
            value = self.hdict.get(name, "").strip()
            if name == "authorization" and value.lower().startswith("bearer "):
                value = value[7:].strip()
            if value:
                presented.append(value)
        if not presented:
            return "none"
        token = self.gw.token
        ok = all(hmac.compare_digest(p.encode(), token.encode()) for p in presented)
        return "attempt-token" if ok else "other"

    # -- upstream ---------------------------------------------------------------------------

    def _upstream_headers(self) -> list[tuple[str, str]]:
        dropped = set(NOT_FORWARDED)
        for token in self.hdict.get("connection", "").split(","):
            dropped.add(token.strip().lower())
        out = [(k, v) for k, v in self.headers if k.lower() not in dropped]
        key = self.gw.config.upstream_api_key
        if key and self.api in wire.MODEL_IN_PATH_APIS:
            # Google's header, also for a token sent as ?key= (a key in a URL ends up in
            # logs), unless the CLI sent the token as a bearer token only.
            in_query = self.h.match is not None and self.h.match.key is not None
            google = "x-goog-api-key" in self.hdict or in_query
            if "authorization" in self.hdict and not google:
                out.append(("Authorization", f"Bearer {key}"))
            else:
                out.append(("x-goog-api-key", key))
        elif key:  # the key goes in the header the CLI put the token in
            if "x-api-key" in self.hdict:
                out.append(("x-api-key", key))
            if "api-key" in self.hdict:
                out.append(("api-key", key))
            if "authorization" in self.hdict or not (
                "x-api-key" in self.hdict or "api-key" in self.hdict
            ):
                out.append(("Authorization", f"Bearer {key}"))
        # Bodies as sent, so the record and the usage are readable text.
        out.append(("Accept-Encoding", "identity"))
        return out

    def _forward(self, body: bytes) -> Exchange | Failed:
        """Send the request; retry transient failures (429, 5xx, 529, no answer) with backoff
        honouring Retry-After, until it succeeds, fails permanently, or the retries (or the
        wall-time budget) run out."""
        gw, policy = self.gw, self.gw.config.retry
        headers = self._upstream_headers()
        deadline = gw.ledger.deadline
        attempt = 0
        while True:
            attempt += 1
            sent = time.monotonic()
            try:
                exchange = gw.upstream.send(self.h.command, self.h.upstream_path, headers, body)
            except (OSError, http.client.HTTPException) as exc:
                failure = self._no_answer(exc)
                retry_after = None
            else:
                self.record["upstream_ms"] = round((time.monotonic() - sent) * 1000, 3)
                if exchange.status < 400:
                    return exchange
                failure = self._error_answer(exchange)
                retry_after = retry_after_sec(
                    exchange.header("retry-after-ms"), exchange.header("retry-after")
                )
            if failure.kind == "permanent":
                return failure
            self._count(transient_failures=1)
            wait = policy.delay(attempt, retry_after)
            tried: dict[str, Any] = {
                "status": failure.status if failure.from_upstream else None,
                "error": failure.message,
                "retry_after_sec": retry_after,
            }
            out_of_time = deadline is not None and time.monotonic() + wait >= deadline
            if attempt >= policy.max_attempts or out_of_time or gw.closed:
                self.record["attempts"].append(tried)
                return failure
            tried["waited_sec"] = round(wait, 3)
            self.record["attempts"].append(tried)
            self.record["retries"] = attempt
            self._count(retries=1)
            if gw.wait_closed(wait):
                return failure

    def _error_answer(self, exchange: Exchange) -> Failed:
        try:
            body = exchange.read_all(ERROR_BODY_LIMIT)
            exchange.finish()
        except (OSError, ValueError, http.client.HTTPException):
            exchange.abort()
            body = b""
        body = self.gw.scrub(body)
        message = self.gw.scrub_text(wire.error_message(body))
        permanent = is_permanent_status(exchange.status, message)
        return Failed(
            kind="permanent" if permanent else "transient",
            message=message,
            status=exchange.status,
            reason=exchange.reason,
            headers=exchange.headers,
            body=body,
            from_upstream=True,
        )

    def _no_answer(self, exc: BaseException) -> Failed:
        timed_out = isinstance(exc, TimeoutError)
        message = self.gw.scrub_text(f"the upstream did not answer: {type(exc).__name__}: {exc}")
        status = 504 if timed_out else 502
        return Failed(
            kind="transient",  # connection refused, reset, timed out: worth another try
            message=message,
            status=status,
            reason=http.HTTPStatus(status).phrase,
            headers=[("Content-Type", "application/json")],
            body=wire.error_body(
                self.shape,
                kind="api_error",
                message=f"agentbench gateway: {message}",
                status=status,
            ),
            from_upstream=False,
        )

    # -- the summary ------------------------------------------------------------------------

    def _count(self, **counts: int) -> None:
        """Failures count for the model calls alone: a CLI's look-up of the model list that
        fails says nothing of the attempt's model calls."""
        if self.record["model_call"]:
            self.gw.ledger.add(**counts)

    def _permanent(self, message: str, status: int | None) -> None:
        """A permanent error of a model call, or a key refused on any path (401, 403)."""
        if self.record["model_call"] or status in (401, 403):
            self.gw.ledger.permanent(UpstreamError(self.gw.scrub_text(message), status))

    def _transient(self, message: str, status: int | None) -> None:
        """A model call's transient failure reached the CLI (retries ran out, or a stream
        broke once bytes went out)."""
        if self.record["model_call"]:
            self.gw.ledger.transient(UpstreamError(self.gw.scrub_text(message), status))

    @property
    def _where(self) -> str:
        return f"{self.h.command} {self.h.path.split('?')[0]}"

    # -- answers ----------------------------------------------------------------------------

    def _fail(self, failed: Failed) -> None:
        self.record["error"] = {"kind": failed.kind, "message": failed.message}
        if failed.kind == "permanent":
            self.record["outcome"] = "permanent_error"
            self._permanent(
                f"the upstream answered HTTP {failed.status} to {self._where}: {failed.message}",
                failed.status,
            )
        else:
            self.record["outcome"] = "transient_exhausted"
            if failed.from_upstream:
                said = f"the upstream answered HTTP {failed.status} to {self._where}"
                self._transient(f"{said}: {failed.message}", failed.status)
            else:  # its message says the upstream never answered
                self._transient(f"{self._where}: {failed.message}", None)
        headers = [(k, v) for k, v in failed.headers if k.lower() not in NOT_RETURNED]
        self._send_whole(failed.status, failed.reason, headers, failed.body)

    def _refuse(
        self, status: int, kind: str, message: str, *, outcome: str, code: str | None = None
    ) -> None:
        self.record["outcome"] = outcome
        if self.record["error"] is None:
            self.record["error"] = {"kind": outcome, "message": message}
        request = self.record.get("request")
        if request is not None and "body_bytes" not in request:
            request.update(body_left_out(self.body_size, outcome))
        body = wire.error_body(self.shape, kind=kind, message=message, code=code, status=status)
        self._send_whole(
            status, http.HTTPStatus(status).phrase, [("Content-Type", "application/json")], body
        )

    def _send_whole(
        self, status: int, reason: str, headers: list[tuple[str, str]], body: bytes
    ) -> None:
        self.record["status"] = status
        capture = Capture(self.gw.config.body_cap_bytes)
        capture.feed(body)
        self.record["response"] = {
            "status": status,
            "headers": headers_record(headers, self.gw.redactor),
            **capture.as_record(),
        }
        self._write(self._head(status, reason, headers, f"Content-Length: {len(body)}") + body)

    def _head(
        self, status: int, reason: str, headers: list[tuple[str, str]], framing: str
    ) -> bytes:
        lines = [f"HTTP/1.1 {status} {reason}"]
        lines += [f"{k}: {self.gw.scrub_text(v)}" for k, v in headers]
        lines.append(framing)
        if self.h.close_connection:
            lines.append("Connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", errors="replace")

    def _write(self, data: bytes) -> None:
        try:
            self.h.wfile.write(data)
        except OSError as exc:
            raise ClientGone(str(exc)) from exc

    def _relay(self, exchange: Exchange, model: str) -> None:
        """Pass the answer on: a body of known length whole, anything else (SSE streams) chunk
        by chunk as it arrives, each chunk written at once, measured as it goes (meter.py)."""
        cfg = self.gw.config
        headers = [(k, v) for k, v in exchange.headers if k.lower() not in NOT_RETURNED]
        sse = "text/event-stream" in exchange.header("content-type").lower()
        whole = None
        if exchange.header("content-length") and not sse:
            try:
                whole = self.gw.scrub(exchange.read_all(cfg.max_response_bytes))
            except (OSError, ValueError, http.client.HTTPException) as exc:
                exchange.abort()
                self._count(transient_failures=1)
                self._fail(self._no_answer(exc))
                return
            exchange.finish()
        capture = Capture(cfg.body_cap_bytes)
        usage = wire.Usage()
        meter = Meter(
            self.gw.ledger,
            self.held,
            self.gw.price(model, self.when.date()) if self.held is not None else None,
            cfg.max_response_bytes,
        )
        self.record["status"] = exchange.status
        self.record["outcome"] = "ok"
        error: str | None = None
        try:
            if whole is not None:
                capture.feed(whole)
                usage.read(wire.json_doc(whole))
                self._write(
                    self._head(
                        exchange.status, exchange.reason, headers, f"Content-Length: {len(whole)}"
                    )
                    + whole
                )
            else:
                error = self._stream(exchange, headers, capture, usage, meter, sse)
        except ClientGone:
            exchange.abort()
            self.record["outcome"] = "client_gone"
            raise
        finally:
            self._account(usage, meter, model, capture, headers, exchange.status, error)

    def _stream(
        self,
        exchange: Exchange,
        headers: list[tuple[str, str]],
        capture: Capture,
        usage: wire.Usage,
        meter: Meter,
        sse: bool,
    ) -> str | None:
        """Relay a body of unknown length; the error it reported or met, if any. Past what
        the call may use it is cut: an SSE stream ends with an error event, anything else
        without its last chunk."""
        scanner = wire.SSEScanner() if sse else None
        aligner = EventAligner() if sse else None
        whole = bytearray()  # a non-SSE body of unknown length, for its usage
        scrubber = self.gw.scrubber()
        self._write(
            self._head(exchange.status, exchange.reason, headers, "Transfer-Encoding: chunked")
        )
        error = None
        while True:
            try:
                chunk = exchange.read1()
            except (OSError, http.client.HTTPException) as exc:
                exchange.abort()
                error = f"the upstream stopped mid-answer: {type(exc).__name__}: {exc}"
                self.h.close_connection = True  # no final chunk: the CLI sees a cut answer
                break
            out = scrubber.feed(chunk) if chunk else scrubber.flush()
            if aligner is not None:
                out = aligner.feed(out, final=not chunk)
            if out:
                if scanner is not None:
                    scanner.feed(out)
                over = meter.over(scanner.usage if scanner else usage, len(out))
                if over is not None:
                    exchange.abort()
                    self._cut(over, capture, sse)
                    break
                capture.feed(out)
                if scanner is None and len(whole) < self.gw.config.max_response_bytes:
                    whole += out
                self._write(b"%x\r\n%s\r\n" % (len(out), out))
            if not chunk:
                exchange.finish()
                self._write(b"0\r\n\r\n")
                break
        if scanner is not None:
            scanner.close()
            usage.fields.update(scanner.usage.fields)
            if self.record["outcome"] != "budget":
                error = error or scanner.error
        else:
            usage.read(wire.json_doc(bytes(whole)))
        return error

    def _cut(self, over: tuple[str, str], capture: Capture, sse: bool) -> None:
        """End a stream that passed what its call may use (``over``: the budget, and why)."""
        name, why = over
        self.h.close_connection = True
        if name == "response_bytes":
            message = f"agentbench gateway: {why}; the answer was cut"
            self.record["outcome"] = "stream_error"
            self.record["error"] = {"kind": "transient", "message": message}
            self._count(transient_failures=1)
            self._transient(f"the upstream's answer to {self._where}: {why}", None)
        else:
            message = (
                f"agentbench gateway: the attempt's {name} budget is used up ({why}); "
                "the answer was cut"
            )
            self.record["outcome"] = "budget"
            self.record["error"] = {"kind": "budget", "budget": name, "message": message}
            self.gw.ledger.exceeded(name, message)
        if sse:
            event = error_event(self.api, message)
            capture.feed(event)
            self._write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(event), event))
        # Anything else ends without its last chunk: the CLI sees a cut answer.

    def _account(
        self,
        usage: wire.Usage,
        meter: Meter,
        model: str,
        capture: Capture,
        headers: list[tuple[str, str]],
        status: int,
        error: str | None,
    ) -> None:
        self.record["response"] = {
            "status": status,
            "headers": headers_record(headers, self.gw.redactor),
            **capture.as_record(),
        }
        if error is not None:
            kind = "permanent" if is_permanent_status(None, error) else "transient"
            self.record["outcome"] = "stream_error"
            self.record["error"] = {"kind": kind, "message": self.gw.scrub_text(error)}
            if kind == "permanent":
                self._permanent(f"the upstream's answer to {self._where} reported: {error}", status)
            else:
                self._count(transient_failures=1)
                self._transient(f"the upstream's answer to {self._where} reported: {error}", status)
        # What a stream sent counts even when it reported less (or nothing).
        classes = meter.classes(usage)
        if self.held is None or not (usage.found or classes.output):
            return
        price = self.gw.price(model, self.when.date())
        cost = price.breakdown(classes, model) if price else unpriced(model)
        self.record["usage"] = {
            "input_tokens": classes.input_total,
            "output_tokens": classes.output,
            # The billed classes: input read fresh, written to the cache, read from it.
            "classes": {
                "input": classes.input,
                "cache_write": classes.cache_write,
                "cache_write_1h": classes.cache_write_1h,
                "cache_read": classes.cache_read,
                "output": classes.output,
            },
            "reported": dict(usage.fields),
        }
        if classes.output != usage.output_tokens:
            self.record["usage"]["estimated_from_bytes"] = True
        self.record["cost_usd"] = None if cost.total is None else round(cost.total, 8)
        self.record["cost"] = cost.as_record()
        if price is not None:
            self.record["price"] = price_record(price)
        budget_cost = price.budget_cost(classes) if price else 0.0
        self.gw.ledger.settle(self.held, classes, cost, budget_cost)
