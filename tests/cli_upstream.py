"""A scripted model provider for the real agent CLIs: one local HTTP server that speaks the three
wire APIs they use and replays a plan (look at a file, run a command, apply the fix, finish).

- Anthropic Messages (``POST /v1/messages``, Claude Code): ``tool_use`` blocks for Claude Code's
  own tools (``Read``, ``Bash``, ``Edit``), streamed as SSE when the request asks for it;
- OpenAI Responses (``POST /v1/responses``, Codex CLI): ``function_call`` items for Codex's
  ``exec_command`` tool (the fix goes through Codex's own ``apply_patch`` command), as SSE;
- OpenAI chat completions (``POST /v1/chat/completions``, mini-swe-agent): assistant messages
  with one fenced bash block, mini-swe-agent's text action format.

Which step of the plan a request gets is read from the conversation it carries (the number of
tool calls the model has made so far), not from a counter: a CLI that retries a request, or
sends side requests (a title, a probe), gets the same answer for the same conversation. A
request that offers none of the plan's tools (a side request) gets a short text answer.

Only the provider is a stand-in here (a hosted model cannot run on this machine); the CLIs,
their HTTP clients and their tools are the real ones.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_ids = itertools.count(1)


@dataclass(frozen=True)
class Step:
    """One model turn of a plan. ``kind``: read | bash | edit | finish."""

    kind: str
    path: str = ""  # read/edit: an absolute path inside the sandbox
    command: str = ""  # bash
    old: str = ""  # edit: the exact text to replace ...
    new: str = ""  # ... and its replacement
    text: str = ""  # finish: the model's last words

    @staticmethod
    def read(path: str) -> Step:
        return Step("read", path=path)

    @staticmethod
    def bash(command: str) -> Step:
        return Step("bash", command=command)

    @staticmethod
    def edit(path: str, old: str, new: str) -> Step:
        return Step("edit", path=path, old=old, new=new)

    @staticmethod
    def finish(text: str = "The fix is applied and the tests pass.") -> Step:
        return Step("finish", text=text)


def fix_plan(*, workdir: str, path: str, old: str, new: str, test_command: str) -> list[Step]:
    """The plan every end-to-end test replays: read the file, run the tests, fix, finish."""
    full = f"{workdir.rstrip('/')}/{path}"
    return [
        Step.read(full),
        Step.bash(f"cd {workdir} && {test_command}"),
        Step.edit(full, old, new),
        Step.finish(),
    ]


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class ScriptedUpstream:
    """``with ScriptedUpstream(plan) as up:`` serves on ``up.base_url`` (no ``/v1``).

    ``fail_status`` answers every model request with that HTTP error in the API's own shape
    (401: a bad key). ``usage`` is what each answer reports (input, output tokens)."""

    plan: list[Step]
    fail_status: int | None = None
    usage: tuple[int, int] = (1200, 80)
    delay_sec: float = 0.0  # wait this long before every answer (a slow provider)
    requests: list[Recorded] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> ScriptedUpstream:
        upstream = self

        class Handler(_Handler):
            owner = upstream

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()

    def model_requests(self, path: str) -> list[Recorded]:
        return [r for r in self.requests if r.path.split("?")[0].endswith(path)]

    def step_for(self, done: int) -> Step:
        return self.plan[done] if done < len(self.plan) else Step.finish()


class _Handler(BaseHTTPRequestHandler):
    owner: ScriptedUpstream
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_HEAD(self) -> None:  # Claude Code's connectivity probe
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        self._json(404, {"error": {"message": f"no such endpoint: {self.path}"}})

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"_unparsed": raw.decode(errors="replace")}
        path = self.path.split("?")[0]
        self.owner.requests.append(Recorded(self.path, dict(self.headers), body))
        time.sleep(self.owner.delay_sec)
        if path.endswith("/messages"):
            api = "anthropic"
        elif path.endswith("/responses"):
            api = "responses"
        elif path.endswith("/chat/completions"):
            api = "chat"
        else:
            self._json(404, {"error": {"message": f"no such endpoint: {self.path}"}})
            return
        if self.owner.fail_status is not None:
            self._error(api, self.owner.fail_status)
            return
        {"anthropic": self._anthropic, "responses": self._responses, "chat": self._chat}[api](body)

    # -- plumbing ------------------------------------------------------------------------------

    def _json(self, status: int, obj: Any) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if status >= 400:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def _sse(self, events: list[tuple[str | None, dict[str, Any]]], *, done: bool = False) -> None:
        chunks = []
        for name, data in events:
            head = f"event: {name}\n" if name else ""
            chunks.append(f"{head}data: {json.dumps(data)}\n\n")
        if done:
            chunks.append("data: [DONE]\n\n")
        payload = "".join(chunks).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _error(self, api: str, status: int) -> None:
        message = {401: "invalid x-api-key", 403: "permission denied"}.get(status, "error")
        if api == "anthropic":
            kind = {401: "authentication_error", 403: "permission_error"}.get(status, "api_error")
            self._json(status, {"type": "error", "error": {"type": kind, "message": message}})
        else:
            code = {401: "invalid_api_key"}.get(status, "server_error")
            self._json(
                status,
                {
                    "error": {
                        "message": f"Incorrect API key provided ({status})",
                        "type": "invalid_request_error",
                        "param": None,
                        "code": code,
                    }
                },
            )

    # -- Anthropic Messages (Claude Code) --------------------------------------------------------

    def _anthropic(self, body: dict[str, Any]) -> None:
        tools = {t.get("name") for t in body.get("tools") or []}
        messages = body.get("messages") or []
        done = sum(
            1
            for m in messages
            if m.get("role") == "assistant"
            and any(isinstance(b, dict) and b.get("type") == "tool_use" for b in m["content"])
        )
        if not {"Bash", "Read", "Edit"} <= tools:
            block: dict[str, Any] = {"type": "text", "text": "Fix the failing test"}
            stop = "end_turn"
        else:
            step = self.owner.step_for(done)
            if step.kind == "finish":
                block, stop = {"type": "text", "text": step.text}, "end_turn"
            else:
                name, args = {
                    "read": ("Read", {"file_path": step.path}),
                    "bash": ("Bash", {"command": step.command, "description": "Run the tests"}),
                    "edit": (
                        "Edit",
                        {"file_path": step.path, "old_string": step.old, "new_string": step.new},
                    ),
                }[step.kind]
                block = {
                    "type": "tool_use",
                    "id": f"toolu_{next(_ids):04d}",
                    "name": name,
                    "input": args,
                }
                stop = "tool_use"
        tokens_in, tokens_out = self.owner.usage
        message = {
            "id": f"msg_{next(_ids):04d}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "scripted"),
            "content": [block],
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out},
        }
        if not body.get("stream"):
            self._json(200, message)
            return
        start = dict(message, content=[], stop_reason=None)
        start["usage"] = {"input_tokens": tokens_in, "output_tokens": 1}
        if block["type"] == "text":
            opened = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            opened = dict(block, input={})
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        self._sse(
            [
                ("message_start", {"type": "message_start", "message": start}),
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": 0, "content_block": opened},
                ),
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": 0, "delta": delta},
                ),
                ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                (
                    "message_delta",
                    {
                        "type": "message_delta",
                        "delta": {"stop_reason": stop, "stop_sequence": None},
                        "usage": {"output_tokens": tokens_out},
                    },
                ),
                ("message_stop", {"type": "message_stop"}),
            ]
        )

    # -- OpenAI Responses (Codex CLI) ------------------------------------------------------------

    def _responses(self, body: dict[str, Any]) -> None:
        items = body.get("input") or []
        tools = {t.get("name") for t in body.get("tools") or []}
        done = sum(1 for i in items if isinstance(i, dict) and i.get("type") == "function_call")
        step = self.owner.step_for(done) if "exec_command" in tools else Step.finish("ok")
        if step.kind == "finish":
            item: dict[str, Any] = {
                "type": "message",
                "id": f"msg_{next(_ids):04d}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": step.text, "annotations": []}],
            }
        else:
            item = {
                "type": "function_call",
                "id": f"fc_{next(_ids):04d}",
                "call_id": f"call_{next(_ids):04d}",
                "status": "completed",
                "name": "exec_command",
                "arguments": json.dumps({"cmd": _codex_command(step)}),
            }
        tokens_in, tokens_out = self.owner.usage
        response = {
            "id": f"resp_{next(_ids):04d}",
            "object": "response",
            "created_at": 0,
            "status": "completed",
            "model": body.get("model", "scripted"),
            "output": [item],
            "usage": {
                "input_tokens": tokens_in,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": tokens_out,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": tokens_in + tokens_out,
            },
        }
        if not body.get("stream"):
            self._json(200, response)
            return
        created = dict(response, status="in_progress", output=[], usage=None)
        events: list[tuple[str | None, dict[str, Any]]] = [
            ("response.created", {"type": "response.created", "response": created}),
            (
                "response.output_item.added",
                {
                    "type": "response.output_item.added",
                    "output_index": 0,
                    "item": dict(item, status="in_progress"),
                },
            ),
        ]
        if item["type"] == "message":
            events.append(
                (
                    "response.output_text.delta",
                    {
                        "type": "response.output_text.delta",
                        "item_id": item["id"],
                        "output_index": 0,
                        "content_index": 0,
                        "delta": step.text,
                    },
                )
            )
        else:
            events.append(
                (
                    "response.function_call_arguments.delta",
                    {
                        "type": "response.function_call_arguments.delta",
                        "item_id": item["id"],
                        "output_index": 0,
                        "delta": item["arguments"],
                    },
                )
            )
        events += [
            (
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": 0, "item": item},
            ),
            ("response.completed", {"type": "response.completed", "response": response}),
        ]
        for seq, (_, data) in enumerate(events):
            data["sequence_number"] = seq
        self._sse(events)

    # -- OpenAI chat completions (mini-swe-agent) ------------------------------------------------

    def _chat(self, body: dict[str, Any]) -> None:
        messages = body.get("messages") or []
        done = sum(1 for m in messages if m.get("role") == "assistant")
        step = self.owner.step_for(done)
        command = _shell_command(step)
        content = f"THOUGHT: step {done + 1} of the plan.\n\n```mswea_bash_command\n{command}\n```"
        tokens_in, tokens_out = self.owner.usage
        completion = {
            "id": f"chatcmpl-{next(_ids)}",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "scripted"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": tokens_in,
                "completion_tokens": tokens_out,
                "total_tokens": tokens_in + tokens_out,
            },
        }
        if not body.get("stream"):
            self._json(200, completion)
            return
        chunk = {k: v for k, v in completion.items() if k != "usage"}
        chunk["object"] = "chat.completion.chunk"
        first = dict(
            chunk,
            choices=[
                {
                    "index": 0,
                    "delta": {"role": "assistant", "content": content},
                    "finish_reason": None,
                }
            ],
        )
        last = dict(chunk, choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}])
        tail = dict(chunk, choices=[], usage=completion["usage"])
        self._sse([(None, first), (None, last), (None, tail)], done=True)


def _codex_command(step: Step) -> str:
    if step.kind == "edit":
        # Codex intercepts ``apply_patch`` in a command and applies it with its own code.
        old = "\n".join(f"-{line}" for line in step.old.splitlines())
        new = "\n".join(f"+{line}" for line in step.new.splitlines())
        return (
            f"apply_patch <<'PATCH'\n*** Begin Patch\n*** Update File: {step.path}\n@@\n"
            f"{old}\n{new}\n*** End Patch\nPATCH"
        )
    return _shell_command(step)


def _shell_command(step: Step) -> str:
    """The step as one shell command (Codex's ``exec_command``, mini-swe-agent's bash block)."""
    if step.kind == "read":
        return f"cat {step.path}"
    if step.kind == "bash":
        return step.command
    if step.kind == "edit":
        script = (
            "import pathlib, sys; p = pathlib.Path(sys.argv[1]); "
            "p.write_text(p.read_text().replace(sys.argv[2], sys.argv[3], 1))"
        )
        return (
            f"python3 -c {_quote(script)} {_quote(step.path)} {_quote(step.old)} {_quote(step.new)}"
        )
    return "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


def _quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


# -- the three CLIs against this upstream ---------------------------------------------------------

# What each CLI's configuration uses as the upstream base URL (what it would call without us):
# Claude Code appends /v1/messages itself; the OpenAI clients take a base ending in /v1.
BASE_SUFFIX = {"claude-code": "", "codex": "/v1", "mini-swe-agent": "/v1"}
MODEL = {"claude-code": "claude-sonnet-4-5", "codex": "gpt-5-codex", "mini-swe-agent": "gpt-4o"}
WIRE_PATH = {"claude-code": "/messages", "codex": "/responses", "mini-swe-agent": "/completions"}
UPSTREAM_KEY_ENV = "AB_TEST_UPSTREAM_KEY"
# The real key the upstream expects; the CLI must only ever see the gateway's token.
REAL_KEY = "sk-ab-test-real-key-0123456789"


def cli_model_config(cli: str, upstream: ScriptedUpstream, *, name: str = "", **fields: Any):
    """A model configuration of variant ``cli`` pointed at ``upstream`` (needs the database)."""
    from runs.pipeline.adhoc import model_config_for_variant

    values: dict[str, Any] = {
        "cli_agent": cli,
        "model_name": MODEL[cli],
        "base_url": upstream.base_url + BASE_SUFFIX[cli],
        "api_key_env": UPSTREAM_KEY_ENV,
        "max_steps": 20,
        "max_time_sec": 300,
    } | fields
    return model_config_for_variant("cli", name=name or f"cli {cli} (test)", **values)


def keys_seen(upstream: ScriptedUpstream) -> set[str]:
    """The credentials the upstream received (x-api-key or a bearer token)."""
    seen = set()
    for request in upstream.requests:
        headers = {k.lower(): v for k, v in request.headers.items()}
        if "x-api-key" in headers:
            seen.add(headers["x-api-key"])
        if "authorization" in headers:
            seen.add(headers["authorization"].removeprefix("Bearer ").strip())
    return seen


# -- recordings for tests/data/model_calls -----------------------------------------------------

_SCRUB = [
    (re.compile(r"127\.0\.0\.1:\d+"), "127.0.0.1:PORT"),
    (re.compile(r"[0-9a-f]{64}"), "0" * 64),  # device ids, hashes of this machine
    (re.compile(r"Linux \d+\.\d+\.\d+[\w.+-]*"), "Linux KERNEL"),
    (re.compile(r"/tmp/[\w./-]+"), "/tmp/PATH"),
    (
        re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?"),
        "2026-01-01T00:00:00Z",
    ),
]


def scrubbed_recording(text: str, *, token: str = "") -> str:
    """A ``model_calls.jsonl`` with what is machine-specific replaced (ports, paths, the
    kernel, device ids, times, the attempt's token): what tests/data/model_calls keeps."""
    if token:
        text = text.replace(token, "ab-gw-TOKEN")
    for pattern, replacement in _SCRUB:
        text = pattern.sub(replacement, text)
    return text
