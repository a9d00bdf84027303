"""Plans for the real agent CLIs, answered by the tests' one fake provider
(tests/support/fake_provider.py): it speaks the wire APIs they use and replays a plan (look at
a file, run a command, apply the fix, finish).

- Anthropic Messages (``POST /v1/messages``, Claude Code): ``tool_use`` blocks for Claude Code's
  own tools (``Read``, ``Bash``, ``Edit``), streamed as SSE when the request asks for it;
- OpenAI Responses (``POST /v1/responses``, Codex CLI): ``function_call`` items for Codex's
  ``exec_command`` tool (the fix goes through Codex's own ``apply_patch`` command), as SSE;
- OpenAI chat completions (``POST /v1/chat/completions``, mini-swe-agent): assistant messages
  with one fenced bash block, mini-swe-agent's text action format;
- OpenAI chat completions with tools (Qwen Code): ``tool_calls`` for the CLI's own tools
  (``read_file``, ``run_shell_command``, ``edit``), streamed as SSE;
- Google's Gemini API (``POST /v1beta/models/{model}:streamGenerateContent?alt=sse`` or
  ``:generateContent``, Gemini CLI): ``functionCall`` parts for Gemini CLI's tools
  (``read_file``, ``run_shell_command``, ``replace``), streamed as the path asks
  (tests/support/fake_provider_gemini.py builds the answers).
- OpenAI chat completions with tools, OpenCode's own (``read``, ``bash``, ``edit``).

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
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from tests.support import fake_provider_gemini as gemini
from tests.support.fake_provider import FakeProvider, Reply, Request, sse

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


def plan_provider(
    plan: list[Step],
    *,
    fail_status: int | None = None,
    usage: tuple[int, int] = (1200, 80),
    delay_sec: float = 0.0,
    decorate: Callable[[Request, Reply], Reply] | None = None,
) -> FakeProvider:
    """``with plan_provider(plan) as up:`` serves the plan on ``up.url()`` (no ``/v1``).

    ``fail_status`` answers every model request with that HTTP error in the API's own shape
    (401: a bad key). ``usage`` is what each answer reports (input, output tokens);
    ``delay_sec`` a wait before every answer (a slow provider; the provider's ``delay_sec``
    may be changed while it runs); ``decorate`` may change each answer before it is sent (a
    test's hostile provider)."""

    def respond(request: Request) -> Reply:
        reply = plan_reply(request, plan, fail_status=fail_status, usage=usage)
        return decorate(request, reply) if decorate else reply

    return FakeProvider(respond=respond, delay_sec=delay_sec)


def plan_reply(
    request: Request, plan: list[Step], *, fail_status: int | None, usage: tuple[int, int]
) -> Reply:
    """The answer to one request: which step of the plan it gets is read from the conversation
    it carries."""
    try:
        body = json.loads(request.body or b"{}")
    except ValueError:
        body = {}
    path = request.path.split("?")[0]
    if request.method != "POST":
        return _json(404, {"error": {"message": f"no such endpoint: {request.path}"}})
    if path.endswith("/messages"):
        api = "anthropic"
    elif path.endswith("/responses"):
        api = "responses"
    elif path.endswith("/chat/completions"):
        api = "chat"
    elif path.endswith((":generateContent", ":streamGenerateContent")):
        api = "gemini"
    else:
        return _json(404, {"error": {"message": f"no such endpoint: {request.path}"}})
    if fail_status is not None:
        return _error(api, fail_status)
    if api == "gemini":
        return _gemini(body, plan, usage, request.path)
    answer = {"anthropic": _anthropic, "responses": _responses, "chat": _chat}[api]
    return answer(body, plan, usage)


def _step_for(plan: list[Step], done: int) -> Step:
    return plan[done] if done < len(plan) else Step.finish()


# -- plumbing ----------------------------------------------------------------------------------


def _json(status: int, obj: Any) -> Reply:
    headers = {"Content-Type": "application/json"}
    if status >= 400:
        headers["Connection"] = "close"
    return Reply(status=status, body=json.dumps(obj).encode(), headers=headers)


def _sse(events: list[tuple[str | None, dict[str, Any]]], *, done: bool = False) -> Reply:
    chunks = [sse(data, name) for name, data in events]
    if done:
        chunks.append(sse("[DONE]"))
    return Reply(events=chunks, headers={"Content-Type": "text/event-stream"})


def _error(api: str, status: int) -> Reply:
    message = {401: "invalid x-api-key", 403: "permission denied"}.get(status, "error")
    if api == "gemini":  # Google's words for a bad key
        text = {401: "API key not valid. Please pass a valid API key."}.get(status, message)
        return gemini.gemini_error(status, text, headers={"Connection": "close"})
    if api == "anthropic":
        kind = {401: "authentication_error", 403: "permission_error"}.get(status, "api_error")
        return _json(status, {"type": "error", "error": {"type": kind, "message": message}})
    code = {401: "invalid_api_key"}.get(status, "server_error")
    return _json(
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


# -- Anthropic Messages (Claude Code) ----------------------------------------------------------


def _anthropic(body: dict[str, Any], plan: list[Step], usage: tuple[int, int]) -> Reply:
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
        step = _step_for(plan, done)
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
    tokens_in, tokens_out = usage
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
        return _json(200, message)
    start = dict(message, content=[], stop_reason=None)
    start["usage"] = {"input_tokens": tokens_in, "output_tokens": 1}
    if block["type"] == "text":
        opened = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": block["text"]}
    else:
        opened = dict(block, input={})
        delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
    return _sse(
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


# -- OpenAI Responses (Codex CLI) --------------------------------------------------------------


def _responses(body: dict[str, Any], plan: list[Step], usage: tuple[int, int]) -> Reply:
    items = body.get("input") or []
    tools = {t.get("name") for t in body.get("tools") or []}
    done = sum(1 for i in items if isinstance(i, dict) and i.get("type") == "function_call")
    step = _step_for(plan, done) if "exec_command" in tools else Step.finish("ok")
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
    tokens_in, tokens_out = usage
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
        return _json(200, response)
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
    return _sse(events)


# -- OpenAI chat completions (mini-swe-agent) --------------------------------------------------


def _chat(body: dict[str, Any], plan: list[Step], usage: tuple[int, int]) -> Reply:
    # A CLI with tools of its own (Qwen Code, OpenCode), not text actions, or its side request.
    if body.get("tools") or _side_request(body):
        return _chat_tools(body, plan, usage)
    messages = body.get("messages") or []
    done = sum(1 for m in messages if m.get("role") == "assistant")
    step = _step_for(plan, done)
    command = _shell_command(step)
    content = f"THOUGHT: step {done + 1} of the plan.\n\n```mswea_bash_command\n{command}\n```"
    tokens_in, tokens_out = usage
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
        return _json(200, completion)
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
    return _sse([(None, first), (None, last), (None, tail)], done=True)


# -- OpenAI chat completions with tool calls (Qwen Code) -------------------------------------

# Per CLI: the tool that marks its requests, then each step kind's tool and arguments.
CHAT_TOOLS: dict[str, dict[str, Callable[[Step], tuple[str, dict[str, Any]]]]] = {
    "run_shell_command": {  # Qwen Code
        "read": lambda s: ("read_file", {"file_path": s.path}),
        "bash": lambda s: ("run_shell_command", {"command": s.command, "description": "tests"}),
        "edit": lambda s: (
            "edit",
            {"file_path": s.path, "old_string": s.old, "new_string": s.new},
        ),
    },
    "bash": {  # OpenCode
        "read": lambda s: ("read", {"filePath": s.path}),
        "bash": lambda s: ("bash", {"command": s.command, "description": "Run the tests"}),
        "edit": lambda s: ("edit", {"filePath": s.path, "oldString": s.old, "newString": s.new}),
    },
}
# Side requests that are not the agent's loop: OpenCode's session title (it offers no tools):
# a short text answer.
SIDE_PROMPTS = ("You are a title generator",)


def _side_request(body: dict[str, Any]) -> bool:
    messages = body.get("messages") or []
    system = " ".join(str(m.get("content")) for m in messages if m.get("role") == "system")
    return any(marker in system for marker in SIDE_PROMPTS)


def _chat_tools(body: dict[str, Any], plan: list[Step], usage: tuple[int, int]) -> Reply:
    messages = body.get("messages") or []
    tools = {(t.get("function") or {}).get("name") for t in body.get("tools") or []}
    done = sum(1 for m in messages if m.get("role") == "assistant" and m.get("tool_calls"))
    mapping = next((v for k, v in CHAT_TOOLS.items() if k in tools), None)
    side = mapping is None or _side_request(body)
    step = Step.finish("ok") if side else _step_for(plan, done)
    message: dict[str, Any] = {"role": "assistant", "content": None}
    if step.kind == "finish" or mapping is None:
        message["content"], finish = step.text or "Done.", "stop"
    else:
        name, args = mapping[step.kind](step)
        message["tool_calls"] = [
            {
                "id": f"call_{next(_ids):04d}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
        ]
        finish = "tool_calls"
    tokens_in, tokens_out = usage
    completion = {
        "id": f"chatcmpl-{next(_ids)}",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", "scripted"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": tokens_in,
            "completion_tokens": tokens_out,
            "total_tokens": tokens_in + tokens_out,
        },
    }
    if not body.get("stream"):
        return _json(200, completion)
    chunk = {k: v for k, v in completion.items() if k != "usage"}
    chunk["object"] = "chat.completion.chunk"
    delta: dict[str, Any] = {"role": "assistant"}
    if "tool_calls" in message:
        delta["tool_calls"] = [dict(c, index=0) for c in message["tool_calls"]]
    else:
        delta["content"] = message["content"]
    first = dict(chunk, choices=[{"index": 0, "delta": delta, "finish_reason": None}])
    last = dict(chunk, choices=[{"index": 0, "delta": {}, "finish_reason": finish}])
    tail = dict(chunk, choices=[], usage=completion["usage"])
    return _sse([(None, first), (None, last), (None, tail)], done=True)


# -- Google's Gemini API (Gemini CLI) ----------------------------------------------------------

# Gemini CLI's tools for the plan's steps (its tool names and parameters, 0.61.0).
GEMINI_TOOLS = {"read": "read_file", "bash": "run_shell_command", "edit": "replace"}


def _gemini(body: dict[str, Any], plan: list[Step], usage: tuple[int, int], target: str) -> Reply:
    """The plan's next step as a ``functionCall`` (or its last words as text). The step is
    the number of calls the model made so far in ``contents``. A request that offers none of
    the plan's tools is a side request: a short text (``{}`` when it asks for JSON)."""
    path, _, query = target.partition("?")
    model = path.rpartition("/")[2].partition(":")[0]
    stream = path.endswith(":streamGenerateContent")
    answer = partial(gemini.gemini, usage=usage, stream=stream, alt_sse="alt=sse" in query)
    offered = {
        d.get("name")
        for tool in body.get("tools") or []
        for d in (tool.get("functionDeclarations") or [] if isinstance(tool, dict) else [])
        if isinstance(d, dict)
    }
    if not set(GEMINI_TOOLS.values()) <= offered:
        config = body.get("generationConfig") or {}
        wants_json = config.get("responseMimeType") == "application/json"
        return answer("{}" if wants_json else "Fix the failing test", model=model)
    done = sum(
        1
        for content in body.get("contents") or []
        if isinstance(content, dict) and content.get("role") == "model"
        for part in content.get("parts") or []
        if isinstance(part, dict) and "functionCall" in part
    )
    step = _step_for(plan, done)
    if step.kind == "finish":
        return answer(step.text, model=model)
    args = {
        "read": {"file_path": step.path},
        "bash": {"command": step.command, "description": "Run the tests"},
        "edit": {
            "file_path": step.path,
            "instruction": "Apply the fix.",
            "old_string": step.old,
            "new_string": step.new,
        },
    }[step.kind]
    return answer(function_call=(GEMINI_TOOLS[step.kind], args), model=model)


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
    return shlex.quote(text)


# -- the CLIs against this upstream ---------------------------------------------------------------

# What each CLI's configuration uses as the upstream base URL (what it would call without us):
# Claude Code appends /v1/messages itself; the OpenAI clients take a base ending in /v1.
BASE_SUFFIX = {
    "claude-code": "",
    "codex": "/v1",
    "mini-swe-agent": "/v1",
    "qwen-code": "/v1",
    "gemini-cli": "",
    "opencode": "/v1",
}
MODEL = {
    "claude-code": "claude-sonnet-4-5",
    "codex": "gpt-5-codex",
    "mini-swe-agent": "gpt-4o",
    "qwen-code": "qwen3-coder-plus",
    "gemini-cli": "gemini-2.5-pro",
    "opencode": "gpt-4o",
}
WIRE_PATH = {
    "claude-code": "/messages",
    "codex": "/responses",
    "mini-swe-agent": "/completions",
    "qwen-code": "/completions",
    "gemini-cli": ":streamGenerateContent",
    "opencode": "/completions",
}
UPSTREAM_KEY_ENV = "AB_TEST_UPSTREAM_KEY"
# The real key the upstream expects; the CLI must only ever see the gateway's token.
REAL_KEY = "sk-ab-test-real-key-0123456789"


def cli_model_config(cli: str, upstream: FakeProvider, *, name: str = "", **fields: Any):
    """A model configuration of variant ``cli`` pointed at ``upstream`` (needs the database)."""
    from runs.pipeline.adhoc import model_config_for_variant

    values: dict[str, Any] = {
        "cli_agent": cli,
        "model_name": MODEL[cli],
        "base_url": upstream.url(BASE_SUFFIX[cli]),
        "api_key_env": UPSTREAM_KEY_ENV,
        "max_steps": 20,
        "max_time_sec": 300,
    } | fields
    return model_config_for_variant("cli", name=name or f"cli {cli} (test)", **values)


def keys_seen(upstream: FakeProvider) -> set[str]:
    """The credentials the upstream received (x-api-key, x-goog-api-key, ?key= or a bearer
    token)."""
    seen = set()
    for request in upstream.requests:
        headers = request.headers
        for name in ("x-api-key", "x-goog-api-key"):
            if name in headers:
                seen.add(headers[name])
        for param in request.path.partition("?")[2].split("&"):
            if param.startswith("key="):
                seen.add(param[4:])
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
