"""The tests' one stand-in for a model provider: OpenAI chat completions, OpenAI Responses,
Anthropic Messages and Google's Gemini API (its replies built by
tests/support/fake_provider_gemini.py), each answered as JSON or as a real server-sent-events
stream.

The real ``openai`` and ``anthropic`` clients (and the gateway) talk to it over real HTTP; only
the model is scripted. Each request is recorded (``server.requests``: method, path, headers,
raw body) and answered with the next ``Reply`` of the script; the bytes of every answer body
are kept (``server.sent``) so a test can compare them with what a client received. A stream is
written one event per chunk, flushed, and can stop halfway until the test releases it
(``hold_after``), or be cut (``drop_after``). With no reply left it answers 400 (a test that
scripted too few fails loudly); a reply for another API than the request's path answers 404.

Two ways to script it: a list of replies, one per request (``FakeProvider([chat("hi")])``), or
a ``respond`` function that answers each request from what it carries (the real agent CLIs'
plans, tests/support/fake_provider_plans.py). A HEAD request (Claude Code's connectivity probe) is
answered 200. Only the provider is a stand-in (no hosted model runs on this machine): the
clients, the gateway and the CLIs are the real ones.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_ids = itertools.count(1)
PATHS = {
    "chat": "/chat/completions",
    "responses": "/responses",
    "messages": "/messages",
    "gemini": ":generateContent",
    "gemini-stream": ":streamGenerateContent",
    "gemini-count-tokens": ":countTokens",
}


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""  # a whole body, sent with Content-Length
    events: list[bytes] | None = None  # SSE events, each one chunk (chunked transfer)
    headers: dict[str, str] = field(default_factory=dict)
    api: str | None = None  # a key of PATHS: the path it answers
    # Chat streams: the usage chunk, sent only when the request asked for it.
    usage_event: bytes | None = None
    hold_after: int | None = None  # events sent before waiting for ``release``
    release: threading.Event = field(default_factory=threading.Event)
    drop_after: int | None = None  # events sent before closing the connection mid-stream
    delay_sec: float = 0.0


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


def sse(data: Any, event: str | None = None) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {text}\n\n".encode()


def _pieces(text: str) -> list[str]:
    """The text in a few deltas, as a model streams it."""
    words = text.split(" ")
    return [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]


# -- OpenAI chat completions ----------------------------------------------------------------


def chat(
    text: str = "",
    *,
    usage: tuple[int, int] | None = (100, 20),
    stream: bool = False,
    tool_call: tuple[str, dict | str] | None = None,
    tool_calls: list[tuple[str, dict | str]] | None = None,
    model: str = "fake-model",
    cached: int | None = None,
) -> Reply:
    """An assistant message: ``text`` (none: a null content) and tool calls, whose arguments
    given as a str are sent verbatim (malformed JSON on purpose). ``usage`` None: no usage;
    ``cached``: the prompt tokens read from the cache (``prompt_tokens_details``)."""
    cid = f"chatcmpl-{next(_ids)}"
    named = ([tool_call] if tool_call is not None else []) + list(tool_calls or [])
    calls = [
        {
            "id": f"call_{next(_ids)}",
            "type": "function",
            "function": {
                "name": name,
                "arguments": args if isinstance(args, str) else json.dumps(args),
            },
        }
        for name, args in named
    ]
    call = calls[0] if calls else None
    finish = "tool_calls" if call else "stop"
    usage_doc = None
    if usage is not None:
        usage_doc = {
            "prompt_tokens": usage[0],
            "completion_tokens": usage[1],
            "total_tokens": sum(usage),
        }
        if cached is not None:
            usage_doc["prompt_tokens_details"] = {"cached_tokens": cached, "audio_tokens": 0}
    if not stream:
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            message["tool_calls"] = calls
        doc = {
            "id": cid,
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        }
        if usage_doc is not None:
            doc["usage"] = usage_doc
        return Reply(
            body=json.dumps(doc).encode(), api="chat", headers={"content-type": "application/json"}
        )

    def chunk(delta: dict, finish_reason: str | None = None, **extra: Any) -> bytes:
        doc = {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
            **extra,
        }
        return sse(doc)

    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": piece}) for piece in _pieces(text)] if text else []
    for index, each in enumerate(calls):
        events.append(chunk({"tool_calls": [{"index": index, **each}]}))
    events.append(chunk({}, finish))
    usage_event = None
    if usage_doc is not None:
        usage_event = sse(
            {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": 0,
                "model": model,
                "choices": [],
                "usage": usage_doc,
            }
        )
    return Reply(
        events=[*events],
        usage_event=usage_event,
        api="chat",
        headers={"content-type": "text/event-stream"},
    )


def tool_calls(*calls: tuple[str, dict | str], usage: tuple[int, int] | None = (100, 20)) -> Reply:
    """One chat answer with these tool calls (the agent's own loop,
    tests/runs/agents/test_agent_llm.py)."""
    return chat(tool_calls=list(calls), usage=usage)


def tool_call(name: str, args: dict | str, usage: tuple[int, int] | None = (100, 20)) -> Reply:
    return chat(tool_calls=[(name, args)], usage=usage)


def text(content: str, usage: tuple[int, int] | None = (100, 20)) -> Reply:
    return chat(content, usage=usage)


def empty(usage: tuple[int, int] | None = (0, 0)) -> Reply:
    """A chat answer whose content is the empty string (not null), with no tool call."""
    reply = chat(usage=usage)
    doc = json.loads(reply.body)
    doc["choices"][0]["message"]["content"] = ""
    reply.body = json.dumps(doc).encode()
    return reply


# -- OpenAI Responses -----------------------------------------------------------------------


def responses(
    text: str,
    *,
    usage: tuple[int, int] = (100, 20),
    stream: bool = False,
    model: str = "fake-model",
    cached: int = 0,
) -> Reply:
    rid, mid = f"resp_{next(_ids)}", f"msg_{next(_ids)}"
    part = {"type": "output_text", "text": text, "annotations": []}
    item = {
        "id": mid,
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [part],
    }
    usage_doc = {
        "input_tokens": usage[0],
        "output_tokens": usage[1],
        "total_tokens": sum(usage),
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens_details": {"reasoning_tokens": 0},
    }

    def response(status: str, output: list, usage_value: Any) -> dict:
        return {
            "id": rid,
            "object": "response",
            "created_at": 0,
            "status": status,
            "model": model,
            "output": output,
            "usage": usage_value,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "error": None,
            "incomplete_details": None,
        }

    if not stream:
        doc = response("completed", [item], usage_doc)
        return Reply(
            body=json.dumps(doc).encode(),
            api="responses",
            headers={"content-type": "application/json"},
        )
    seq = itertools.count()

    def event(kind: str, **fields: Any) -> bytes:
        return sse({"type": kind, "sequence_number": next(seq), **fields}, event=kind)

    empty_item = {**item, "status": "in_progress", "content": []}
    events = [
        event("response.created", response=response("in_progress", [], None)),
        event("response.output_item.added", output_index=0, item=empty_item),
        event(
            "response.content_part.added",
            item_id=mid,
            output_index=0,
            content_index=0,
            part={**part, "text": ""},
        ),
    ]
    for piece in _pieces(text):
        events.append(
            event(
                "response.output_text.delta",
                item_id=mid,
                output_index=0,
                content_index=0,
                delta=piece,
                logprobs=[],
            )
        )
    events += [
        event(
            "response.output_text.done",
            item_id=mid,
            output_index=0,
            content_index=0,
            text=text,
            logprobs=[],
        ),
        event(
            "response.content_part.done", item_id=mid, output_index=0, content_index=0, part=part
        ),
        event("response.output_item.done", output_index=0, item=item),
        event("response.completed", response=response("completed", [item], usage_doc)),
    ]
    return Reply(events=events, api="responses", headers={"content-type": "text/event-stream"})


# -- Anthropic Messages ---------------------------------------------------------------------


def messages(
    text: str = "",
    *,
    usage: tuple[int, int] = (100, 20),
    stream: bool = False,
    tool_use: tuple[str, dict] | None = None,
    cache_read: int = 0,
    cache_write: int = 0,
    cache_write_1h: int = 0,
    model: str = "claude-fake",
) -> Reply:
    mid = f"msg_{next(_ids)}"
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    if tool_use is not None:
        blocks.append(
            {
                "type": "tool_use",
                "id": f"toolu_{next(_ids)}",
                "name": tool_use[0],
                "input": tool_use[1],
            }
        )
    stop = "tool_use" if tool_use else "end_turn"
    usage_doc = {
        "input_tokens": usage[0],
        "output_tokens": usage[1],
        "cache_creation_input_tokens": cache_write,
        "cache_read_input_tokens": cache_read,
    }
    if cache_write:
        usage_doc["cache_creation"] = {
            "ephemeral_5m_input_tokens": cache_write - cache_write_1h,
            "ephemeral_1h_input_tokens": cache_write_1h,
        }
    message = {
        "id": mid,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage_doc,
    }
    if not stream:
        return Reply(
            body=json.dumps(message).encode(),
            api="messages",
            headers={"content-type": "application/json"},
        )
    start = {
        **message,
        "content": [],
        "stop_reason": None,
        "usage": {**usage_doc, "output_tokens": 1},
    }
    events = [
        sse({"type": "message_start", "message": start}, "message_start"),
        sse({"type": "ping"}, "ping"),
    ]
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            empty, deltas = (
                {"type": "text", "text": ""},
                [{"type": "text_delta", "text": piece} for piece in _pieces(block["text"])],
            )
        else:
            empty = {**block, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": json.dumps(block["input"])}]
        events.append(
            sse(
                {"type": "content_block_start", "index": index, "content_block": empty},
                "content_block_start",
            )
        )
        for delta in deltas:
            events.append(
                sse(
                    {"type": "content_block_delta", "index": index, "delta": delta},
                    "content_block_delta",
                )
            )
        events.append(sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
    events += [
        sse(
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": usage[1]},
            },
            "message_delta",
        ),
        sse({"type": "message_stop"}, "message_stop"),
    ]
    return Reply(events=events, api="messages", headers={"content-type": "text/event-stream"})


# -- errors ---------------------------------------------------------------------------------


def error(
    status: int,
    kind: str,
    message: str,
    *,
    anthropic: bool = False,
    headers: dict[str, str] | None = None,
) -> Reply:
    if anthropic:
        doc: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": message}}
    else:
        doc = {"error": {"message": message, "type": kind, "param": None, "code": kind}}
    return Reply(
        status=status,
        body=json.dumps(doc).encode(),
        headers={"content-type": "application/json", **(headers or {})},
    )


class FakeProvider:
    """``with FakeProvider([replies]) as upstream: ... upstream.url("/v1") ...``"""

    def __init__(
        self,
        replies: list[Reply] | None = None,
        *,
        respond: Callable[[Request], Reply] | None = None,
        keep: bool = True,
        delay_sec: float = 0.0,
    ):
        self.replies = list(replies or [])
        # Answers a request once the script is used up (a benchmark's endless supply).
        self.respond = respond
        # False: requests and sent bodies are not kept (a long benchmark).
        self.keep = keep
        # A wait before every answer, besides each reply's own (a slow provider); a test may
        # change it while the server runs (a hung call first, then answers at once).
        self.delay_sec = delay_sec
        self.requests: list[Request] = []
        self.sent: list[bytes] = []
        self._lock = threading.Lock()
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body are separate writes: with Nagle on, the body would wait for
            # the client's delayed ACK (40 ms), which no real provider's server makes it do.
            disable_nagle_algorithm = True

            def _handle(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                request = Request(
                    self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body
                )
                with provider._lock:
                    if provider.keep:
                        provider.requests.append(request)
                    reply = provider.replies.pop(0) if provider.replies else None
                if reply is None and provider.respond is not None:
                    reply = provider.respond(request)
                if reply is None:
                    reply = error(400, "invalid_request_error", "fake provider: no reply left")
                elif reply.api and not self.path.split("?")[0].endswith(PATHS[reply.api]):
                    reply = error(
                        404,
                        "not_found_error",
                        f"fake provider: {reply.api} reply scripted, request to {self.path}",
                    )
                time.sleep(reply.delay_sec + provider.delay_sec)
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self._answer(reply, request)

            do_GET = do_POST = _handle

            def do_HEAD(self) -> None:  # Claude Code's connectivity probe
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def _answer(self, reply: Reply, request: Request) -> None:
                self.send_response(reply.status)
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                if reply.events is None:
                    if provider.keep:
                        with provider._lock:
                            provider.sent.append(reply.body)
                    self.send_header("content-length", str(len(reply.body)))
                    self.end_headers()
                    self.wfile.write(reply.body)
                    return
                events = list(reply.events)
                wants_usage = False
                with contextlib.suppress(ValueError, AttributeError, TypeError, KeyError):
                    wants_usage = request.json["stream_options"]["include_usage"] is True
                if reply.usage_event is not None and wants_usage:
                    events.append(reply.usage_event)
                if reply.api == "chat":
                    events.append(sse("[DONE]"))
                self.send_header("transfer-encoding", "chunked")
                self.send_header("cache-control", "no-cache")
                self.end_headers()
                sent = bytearray()
                try:
                    for index, event in enumerate(events):
                        if index == reply.hold_after:
                            reply.release.wait(30)
                        if index == reply.drop_after:
                            self.close_connection = True
                            return  # no final chunk: a cut stream
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                        self.wfile.flush()
                        sent += event
                    self.wfile.write(b"0\r\n\r\n")
                finally:
                    if provider.keep:
                        with provider._lock:
                            provider.sent.append(bytes(sent))

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        # A client that drops its kept-alive connection is no error worth printing.
        self.httpd.handle_error = lambda request, address: None  # type: ignore[method-assign]
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def port(self) -> int:
        return self.httpd.server_address[1]

    def url(self, path: str = "") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def requests_to(self, path: str) -> list[Request]:
        """The requests whose path (query aside) ends with ``path``, e.g. ``/messages``."""
        return [r for r in self.requests if r.path.split("?")[0].endswith(path)]

    def add(self, *replies: Reply) -> None:
        with self._lock:
            self.replies.extend(replies)

    def __enter__(self) -> FakeProvider:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)
