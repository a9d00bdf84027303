"""A local HTTP server that speaks the OpenAI chat-completions protocol with scripted replies.

The real ``openai`` client talks to it over real HTTP; only the model is scripted. Each POST to
``/v1/chat/completions`` is recorded (``server.requests``) and answered with the next reply:
a tool call, text, an empty answer, or an HTTP error. With no reply left it answers 400, which
the agent treats as a permanent error, so a test that scripted too few replies fails loudly.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_ids = itertools.count(1)


@dataclass
class Reply:
    status: int = 200
    body: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    delay_sec: float = 0.0  # wait before answering (to trigger client timeouts)


def _completion(message: dict[str, Any], finish: str, usage: tuple[int, int] | None) -> dict:
    body: dict[str, Any] = {
        "id": f"chatcmpl-{next(_ids)}",
        "object": "chat.completion",
        "created": 0,
        "model": "fake-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    }
    if usage is not None:
        body["usage"] = {
            "prompt_tokens": usage[0],
            "completion_tokens": usage[1],
            "total_tokens": usage[0] + usage[1],
        }
    return body


def tool_calls(*calls: tuple[str, dict | str], usage: tuple[int, int] | None = (100, 20)) -> Reply:
    """One assistant message with these tool calls; a str as arguments is sent verbatim (so a
    test can send malformed JSON)."""
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"call_{next(_ids)}",
                "type": "function",
                "function": {
                    "name": name,
                    "arguments": args if isinstance(args, str) else json.dumps(args),
                },
            }
            for name, args in calls
        ],
    }
    return Reply(body=_completion(message, "tool_calls", usage))


def tool_call(name: str, args: dict | str, usage: tuple[int, int] | None = (100, 20)) -> Reply:
    return tool_calls((name, args), usage=usage)


def text(content: str, usage: tuple[int, int] | None = (100, 20)) -> Reply:
    return Reply(body=_completion({"role": "assistant", "content": content}, "stop", usage))


def empty(usage: tuple[int, int] | None = (0, 0)) -> Reply:
    return Reply(body=_completion({"role": "assistant", "content": ""}, "stop", usage))


def error(status: int, message: str, kind: str = "", headers: dict | None = None) -> Reply:
    body = {"error": {"message": message, "type": kind or "api_error", "code": None}}
    return Reply(status=status, body=body, headers=headers or {})


class FakeOpenAIServer:
    """``with FakeOpenAIServer([replies]) as server: ... server.base_url ...``"""

    def __init__(self, replies: list[Reply]):
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                payload = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    server.requests.append(payload)
                    server.headers.append({k.lower(): v for k, v in self.headers.items()})
                    reply = server.replies.pop(0) if server.replies else None
                if not self.path.endswith("/chat/completions"):
                    reply = error(404, f"unknown path {self.path}", "not_found_error")
                elif reply is None:
                    reply = error(400, "fake server: no scripted reply left", "invalid_request")
                time.sleep(reply.delay_sec)
                # The client may have stopped waiting (a timeout test).
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self._answer(reply)

            def _answer(self, reply: Reply) -> None:
                data = json.dumps(reply.body).encode()
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAIServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)
