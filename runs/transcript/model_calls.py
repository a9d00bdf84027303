"""A CLI agent's run, rebuilt from the model calls the gateway recorded (``model_calls.jsonl``).

One JSON object a line, one line per request the CLI made (the gateway's format,
``agentbench.model_call.v1``, documented in ``runs/gateway``: ``seq`` the order of arrival,
``api``, ``model_call``, ``outcome``, ``status``, ``error``, ``usage``, ``cost_usd``, and
``request`` / ``response`` with ``body`` kept byte for byte up to the gateway's cap, as text or
base64, ``body_truncated`` when cut; a stream's body is its raw SSE text). Requests that are no
model call (token counts, model lists) are counted in a note, not shown.
Every call re-sends the whole conversation, so each message is shown once: a call's request
is matched against the conversation so far (tool-call ids, else the text) and only what is new
becomes turns, then its reply. Tool results are attached to the calls they answer, as the CLI
sent them in the next request. Calls that belong to another conversation (a CLI's side
requests: a title, a sub-agent) are one folded "side call" turn each. Refused calls, budgets
and upstream errors are error turns. A cut body or a line that is not JSON is a note naming
the line and the call; the rest is still shown. A request the gateway did not forward keeps no
body (``body_omitted``), nor does one recorded past the file's byte budget (``summarised``;
the last line, ``"record": "record_budget"``, counts them): each is a note too.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import runs.transcript.wire_anthropic as wire_anthropic
import runs.transcript.wire_chat as wire_chat
import runs.transcript.wire_gemini as wire_gemini
import runs.transcript.wire_responses as wire_responses
from runs.transcript.messages import looks_failed
from runs.transcript.mini_swe_agent import mini_swe_agent_command, without_command
from runs.transcript.ours import ending_turns
from runs.transcript.shapes import (
    MAX_FILE_BYTES,
    ToolCall,
    Transcript,
    as_text,
    block,
    integer,
    iso_seconds,
    number,
    obj,
)
from runs.transcript.wire import Msg, Reply, WireCall, WireError, error_text, is_sse, load_json

FILE = "model_calls.jsonl"
ANTHROPIC, RESPONSES, CHAT = "anthropic-messages", "openai-responses", "openai-chat"
GEMINI = "gemini"
_WIRES: dict[str, Any] = {
    ANTHROPIC: wire_anthropic,
    RESPONSES: wire_responses,
    CHAT: wire_chat,
    GEMINI: wire_gemini,
}


@dataclass
class Call:
    """One recorded call as this reader needs it."""

    line: int
    n: int
    api: str
    status: int | None
    request: str | None
    request_cut: bool
    response: str | None
    response_cut: bool
    tokens_in: int | None
    tokens_out: int | None
    cost_usd: float | None
    error: str
    error_kind: str
    model: str
    retries: int = 0
    started: float | None = None  # seconds since the epoch, from ``started_at``
    ended: float | None = None  # ``started_at`` + ``duration_ms``
    messages: list[Msg] | None = None  # None: the request could not be read
    continues: bool = False  # its request only holds what is new (previous_response_id)
    reply: Reply | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{FILE} line {self.line} (call {self.n})"


def api_of(record: dict, body: Any = None) -> str:
    """Which wire API a call spoke: the gateway's ``api`` field, else its path."""
    named = as_text(record.get("api") or record.get("wire_api")).lower()
    path = as_text(record.get("path") or record.get("url")).lower()
    if "gemini" in named or "generatecontent" in path.split("?")[0]:
        return GEMINI
    if "anthropic" in named or named == "messages" or path.endswith("/messages"):
        return ANTHROPIC
    if "responses" in named or path.endswith("/responses"):
        return RESPONSES
    if "chat" in named or path.endswith("/chat/completions"):
        return CHAT
    body = obj(body)
    if "contents" in body:
        return GEMINI
    if "input" in body or "instructions" in body:
        return RESPONSES
    return ANTHROPIC if "system" in body or ("max_tokens" in body and "messages" in body) else CHAT


def _body(record: dict, side: str) -> tuple[str | None, bool]:
    """(the body as text, whether the gateway cut it) for ``side`` "request" or "response"."""
    value = record.get(side)
    cut = bool(record.get(f"{side}_truncated"))
    if isinstance(value, dict) and ("body" in value or "body_truncated" in value):
        cut = cut or bool(value.get("body_truncated") or value.get("truncated"))
        if value.get("body_encoding") == "base64" and isinstance(value.get("body"), str):
            try:
                return base64.b64decode(value["body"]).decode("utf-8", "replace"), cut
            except (binascii.Error, ValueError):
                return None, cut
        value = value.get("body")
    if value is None:
        value = record.get(f"{side}_body")
    if value is None:
        return None, cut
    return (value if isinstance(value, str) else json.dumps(value)), cut


def read_calls(data: bytes, notes: list[str]) -> list[Call]:
    cut_file = len(data) > MAX_FILE_BYTES
    lines = data[:MAX_FILE_BYTES].decode("utf-8", errors="replace").splitlines()
    calls: list[Call] = []
    other = 0
    for number_, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if cut_file and number_ == len(lines):
            notes.append(
                f"{FILE} is larger than {MAX_FILE_BYTES // (1024 * 1024)} MB: the calls from "
                f"line {number_} on are not shown (the file is a download)."
            )
            break
        try:
            record = json.loads(line)
        except ValueError as exc:
            notes.append(f"{FILE} line {number_}: not valid JSON ({exc}); skipped.")
            continue
        if not isinstance(record, dict):
            notes.append(f"{FILE} line {number_}: not a JSON object; skipped.")
            continue
        if record.get("record") == "record_budget":
            notes.append(
                f"{FILE} reached its byte budget ({integer(record.get('record_max_bytes'))} "
                f"bytes): {integer(record.get('summarised')) or 0} later request(s) were "
                f"recorded without their bodies, {integer(record.get('dropped')) or 0} not at all."
            )
            continue
        if record.get("model_call") is False:
            other += 1
            continue
        calls.append(_call(record, number_, len(calls) + 1))
    if other:
        notes.append(
            f"{other} request(s) that were no model call (token counts, model lists, paths not "
            "forwarded) are not shown."
        )
    # Lines are written as requests end; the conversation goes in the order they came.
    calls.sort(key=lambda c: c.n)
    return calls


def _call(record: dict, line: int, position: int) -> Call:
    request, request_cut = _body(record, "request")
    response, response_cut = _body(record, "response")
    usage = obj(record.get("usage"))
    error = record.get("error")
    kind = as_text(record.get("error_kind") or record.get("outcome"))
    if kind == "ok":
        kind = ""
    if isinstance(error, dict):
        kind = kind or as_text(error.get("kind") or error.get("type"))
        error = error.get("message") or error.get("detail") or json.dumps(error)
    tokens_in = integer(usage.get("input_tokens", usage.get("prompt_tokens")))
    tokens_out = integer(usage.get("output_tokens", usage.get("completion_tokens")))
    call = Call(
        line=line,
        n=integer(record.get("seq")) or integer(record.get("n")) or position,
        api="",
        status=integer(record.get("status")),
        request=request,
        request_cut=request_cut,
        response=response,
        response_cut=response_cut,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        cost_usd=number(record.get("cost_usd")),
        error=as_text(error),
        error_kind=kind,
        model=as_text(record.get("model")),
        retries=integer(record.get("retries")) or 0,
    )
    call.started = iso_seconds(record.get("started_at"))
    duration = number(record.get("duration_ms"))
    if call.started is not None and duration is not None and duration >= 0:
        call.ended = call.started + duration / 1000
    body = _read_request(call, as_text(obj(record.get("request")).get("body_omitted")))
    call.api = api_of(record, body)
    wire = _WIRES[call.api]
    if isinstance(body, dict):
        call.messages = wire.request_messages(body)
        call.continues = bool(body.get("previous_response_id"))
        call.model = call.model or as_text(body.get("model"))
    if call.response is not None and call.response.strip():
        _read_reply(call, wire)
    if call.api == GEMINI:
        wire_gemini.number_reply(call.reply, call.messages)
    return call


def _read_request(call: Call, omitted: str = "") -> Any:
    if call.request is None:
        if omitted == "record_budget":
            call.problems.append("its bodies were not kept: the record reached its byte budget")
        elif omitted:
            call.problems.append(f"the gateway did not forward it ({omitted}): no body kept")
        else:
            call.problems.append("no request body was recorded")
        return None
    if call.request_cut:
        call.problems.append(
            f"the request body was cut at the gateway's cap ({len(call.request.encode())} "
            "bytes kept): its new messages are not shown"
        )
        return None
    try:
        body = load_json(call.request)
    except WireError as exc:
        call.problems.append(f"the request body is {exc}")
        return None
    if not isinstance(body, dict):
        call.problems.append("the request body is not a JSON object")
        return None
    return body


def _read_reply(call: Call, wire: Any) -> None:
    assert call.response is not None
    if call.response_cut and not is_sse(call.response):
        call.problems.append("the response body was cut at the gateway's cap: not shown")
        return
    try:
        call.reply = wire.reply(call.response)
    except WireError as exc:
        call.problems.append(f"the response body is {exc}")
        return
    if call.response_cut:
        call.problems.append("the response stream was cut at the gateway's cap: shown to the cut")
    call.problems += call.reply.problems
    call.tokens_in = call.tokens_in if call.tokens_in is not None else call.reply.tokens_in
    call.tokens_out = call.tokens_out if call.tokens_out is not None else call.reply.tokens_out


def parse_model_calls(data: bytes, events: list[dict] | None = None) -> Transcript:
    """The conversation of a CLI run from its recorded calls; see the module doc."""
    transcript = Transcript(source="model-calls", file=FILE)
    calls = read_calls(data, transcript.notes)
    _Builder(transcript, calls).build()
    transcript.api_calls = len(calls)
    tokens = [c for c in calls if c.tokens_in is not None or c.tokens_out is not None]
    if tokens:
        transcript.tokens_in = sum(c.tokens_in or 0 for c in tokens)
        transcript.tokens_out = sum(c.tokens_out or 0 for c in tokens)
    costs = [c.cost_usd for c in calls if c.cost_usd is not None]
    transcript.cost_usd = round(sum(costs), 6) if costs else None
    models = Counter(c.model or (c.reply.model if c.reply else "") for c in calls)
    models.pop("", None)
    transcript.model = models.most_common(1)[0][0] if models else ""
    if events:
        transcript.turns += ending_turns(len(transcript.turns), events)
        for event in events:
            if event.get("event") == "agent_finish":
                transcript.exit_status = as_text(event.get("stop"))
    return transcript


class _Builder:
    def __init__(self, transcript: Transcript, calls: list[Call]):
        self.transcript = transcript
        self.calls = calls
        self.thread: list[tuple] = []  # keys of the main conversation's messages so far
        self.replies: set[tuple] = set()  # keys of replies shown (never shown twice)
        self.open: dict[str, ToolCall] = {}  # tool calls by id, for their results
        self.last_bash: ToolCall | None = None  # a chat reply's bash block awaiting output
        spine = max(
            (c for c in calls if c.messages),
            key=lambda c: (len(c.messages or []), c.line),
            default=None,
        )
        self.first_key = spine.messages[0].key() if spine and spine.messages else None

    def build(self) -> None:
        for call in self.calls:
            self._call(call)

    def _call(self, call: Call) -> None:
        messages = call.messages
        if messages is not None and not self._main(call):
            self._side(call)
            return
        if messages is not None:
            keys = [m.key() for m in messages]
            start = 0 if call.continues else _common(keys, self.thread)
            for msg in messages[start:]:
                self._message(msg, call)
            self.thread = self.thread + keys if call.continues else keys
        if call.problems:
            self.transcript.notes += [f"{call.where}: {p}." for p in call.problems]
        if self._failed(call):
            return
        if call.reply and call.reply.message:
            key = call.reply.message.key()
            self.thread.append(key)
            if key not in self.replies:
                self._message(call.reply.message, call, reply=True)

    def _main(self, call: Call) -> bool:
        """A call of the main conversation: its first message (the system prompt, or the
        task) is the longest request's first message; a call continuing a stored response
        (``previous_response_id``) sends only what is new and belongs to it too."""
        if call.continues or not call.messages:
            return True
        return call.messages[0].key() == self.first_key

    def _message(self, msg: Msg, call: Call, *, reply: bool = False) -> None:
        if msg.role == "assistant" and msg.key() in self.replies:
            return  # the CLI sending back a reply already shown
        for result in msg.results:
            found = self.open.get(result.call_id)
            if found is not None and found.result is None:
                found.result = block(result.text)
                found.is_error = result.is_error
            else:
                self.transcript.add(
                    "tool", result.text, title=result.call_id, is_error=result.is_error
                )
        if msg.role == "user" and self.last_bash is not None and msg.text and not msg.results:
            # A text agent's command output comes back as the next user message.
            self.last_bash.result = block(msg.text)
            self.last_bash.is_error = looks_failed(msg.text)
            self.last_bash = None
            return
        if msg.results and not msg.text and msg.role in ("user", "tool"):
            return
        if msg.role == "assistant":
            self._assistant(msg, call if reply else None)
            return
        self.transcript.add(msg.role, msg.text)

    def _assistant(self, msg: Msg, call: Call | None) -> None:
        self.replies.add(msg.key())
        turn = self.transcript.add("assistant", msg.text)
        if call is not None:
            turn.call_started, turn.call_ended = call.started, call.ended
        if msg.reasoning:
            turn.reasoning = block(msg.reasoning)
        for wire_call in msg.calls:
            tool = _tool_call(wire_call)
            turn.tool_calls.append(tool)
            if tool.call_id:
                self.open[tool.call_id] = tool
        self.last_bash = None
        command = None if msg.calls else mini_swe_agent_command(msg.text)
        if command is not None:
            turn.text = block(without_command(msg.text))
            self.last_bash = ToolCall(name="bash", arguments=block(command))
            turn.tool_calls.append(self.last_bash)
        if call is not None:
            turn.tokens_in, turn.tokens_out, turn.cost_usd = (
                call.tokens_in,
                call.tokens_out,
                call.cost_usd,
            )
            turn.title = call.model or (call.reply.model if call.reply else "")

    def _failed(self, call: Call) -> bool:
        """An error turn for a refused, over-budget or failed call; True when it failed."""
        reply_error = call.reply.error if call.reply else ""
        status = call.status or 0
        if not (call.error or reply_error or status >= 400):
            return False
        body_error = ""
        if call.response and not is_sse(call.response):
            try:
                body_error = error_text(load_json(call.response))
            except WireError:
                body_error = call.response[:500]
        kind = call.error_kind.lower()
        if "budget" in kind:
            title = "budget exceeded"
        elif kind in ("refused", "not_allowed", "bad_request") or "refus" in kind:
            title = "refused by the gateway"
        elif kind == "client_gone":
            title = "the CLI hung up"
        elif kind == "stream_error" or (reply_error and status < 400):
            title = "upstream error in the stream"
        elif status >= 400:
            title = f"upstream error {status}"
            if kind == "permanent_error":
                title += " (permanent)"
            elif kind == "transient_exhausted":
                title += f" (after {call.retries} retries)"
        else:
            title = "model error"
        detail = (
            "\n".join(dict.fromkeys(t for t in (call.error, reply_error, body_error) if t))
            or f"HTTP {status}"
        )
        self.transcript.add(
            "event",
            f"call {call.n}: {detail}",
            title=title,
            is_error=True,
            tokens_in=call.tokens_in,
            tokens_out=call.tokens_out,
            cost_usd=call.cost_usd,
        )
        return True

    def _side(self, call: Call) -> None:
        """A call of another conversation, folded into one turn: its last message and reply."""
        assert call.messages is not None
        last = call.messages[-1]
        asked = last.text or "\n".join(r.text for r in last.results)
        answer = ""
        if call.reply and call.reply.message:
            reply = call.reply.message
            answer = reply.text or ", ".join(c.name for c in reply.calls)
        text = f"asked: {asked}\n\nanswered: {answer}" if answer else f"asked: {asked}"
        self.transcript.add(
            "event",
            text,
            title=f"side call {call.n}" + (f" ({call.model})" if call.model else ""),
            tokens_in=call.tokens_in,
            tokens_out=call.tokens_out,
            cost_usd=call.cost_usd,
        )
        self._failed(call)


def _common(keys: list[tuple], thread: list[tuple]) -> int:
    n = 0
    for a, b in zip(keys, thread, strict=False):
        if a != b:
            break
        n += 1
    return n


def _tool_call(call: WireCall) -> ToolCall:
    arguments = call.arguments
    return ToolCall(
        name=call.name or "?",
        arguments=block(arguments),
        call_id=call.call_id,
        input=arguments if isinstance(arguments, dict) else None,
    )
