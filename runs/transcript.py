"""An attempt's conversation with its model, read from the files in its artifact folder.

Pure (no Django): ``load(read)`` takes a function that returns a file of the attempt's folder
as bytes (or None when absent) and returns a ``Transcript``, whatever agent wrote it:

==========================  ===================================================================
file                        written by
==========================  ===================================================================
``trajectory.traj.json``    mini-swe-agent ("mini-swe-agent-1"), stored unchanged by the import
``trajectory.traj``         SWE-agent's ``.traj`` (``history``, ``trajectory``, ``info``)
``trajectory.inspect.json`` one Inspect AI eval-log sample (``messages``, ``events``, ``scores``)
``llm_messages.jsonl``      our LLM agent (``runs/agents/llm.py``), with ``events.jsonl``
``events.jsonl``            any of our agents (tool calls and test runs only)
==========================  ===================================================================

The first file present wins, in that order. Every agent becomes the same shape: turns
(system, user, assistant, or a harness ``event``), an assistant turn carrying its tool calls
with each call's result attached (not a turn of its own), token counts where the file has them,
and the patch an ``apply_patch`` call applied. Text is kept as text: escaping is the
template's job. A file that cannot be read gives a transcript with ``error`` set, never an
exception, so the attempt page still opens.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

# A 2 MB trajectory exists in the SWE-bench sample; past this the page would be unreadable
# anyway, and the whole file stays a download.
MAX_FILE_BYTES = 16 * 1024 * 1024
# One text block (a tool result, a message) is cut past this; the page says how much is left.
MAX_BLOCK_CHARS = 50_000
# Blocks longer than this many lines are folded behind "show all" on the page.
FOLD_LINES = 25
FOLD_CHARS = 3_000

TRAJ_JSON = "trajectory.traj.json"
SWE_AGENT_TRAJ = "trajectory.traj"
INSPECT_SAMPLE = "trajectory.inspect.json"
LLM_MESSAGES = "llm_messages.jsonl"
EVENTS = "events.jsonl"
# In the order ``load`` tries them.
FILES = (TRAJ_JSON, SWE_AGENT_TRAJ, INSPECT_SAMPLE, LLM_MESSAGES, EVENTS)

Reader = Callable[[str], bytes | None]


@dataclass
class Block:
    """A piece of text as shown: cut at MAX_BLOCK_CHARS, folded when long."""

    text: str
    total_chars: int
    lines: int

    @property
    def cut(self) -> int:
        """How many characters were left out."""
        return self.total_chars - len(self.text)

    @property
    def folded(self) -> bool:
        return self.lines > FOLD_LINES or len(self.text) > FOLD_CHARS

    def __bool__(self) -> bool:
        return bool(self.text)


def block(value: Any) -> Block:
    text = _as_text(value)
    shown = text[:MAX_BLOCK_CHARS]
    return Block(text=shown, total_chars=len(text), lines=shown.count("\n") + 1 if shown else 0)


@dataclass
class ToolCall:
    name: str
    arguments: Block
    call_id: str = ""
    result: Block | None = None  # None: no result recorded
    is_error: bool = False
    patch: str = ""  # the diff an apply_patch call applied (as stored in diffs/)
    patch_file: str = ""  # that diff's file in the attempt folder
    artifact: str = ""  # the call's full output in the attempt folder


@dataclass
class Turn:
    index: int
    role: str  # "system" | "user" | "assistant" | "tool" | "event"
    text: Block
    reasoning: Block | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    title: str = ""  # an event's name, a model's name
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None
    is_error: bool = False


@dataclass
class Transcript:
    source: str  # "mini-swe-agent" | "swe-agent" | "inspect" | "llm" | "events"
    file: str  # the file it came from, relative to the attempt folder
    turns: list[Turn] = field(default_factory=list)
    submission: str = ""
    exit_status: str = ""
    model: str = ""
    cost_usd: float | None = None
    api_calls: int | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    scores: list[tuple[str, str]] = field(default_factory=list)  # Inspect's (scorer, value)
    notes: list[str] = field(default_factory=list)  # what could not be read, what was cut
    error: str = ""  # the file could not be read at all

    @property
    def tool_call_count(self) -> int:
        return sum(len(t.tool_calls) for t in self.turns)


SOURCE_TITLES = {
    "mini-swe-agent": "mini-swe-agent trajectory",
    "swe-agent": "SWE-agent trajectory",
    "inspect": "Inspect AI sample",
    "llm": "LLM conversation",
    "events": "agent events",
}


def load(read: Reader) -> Transcript | None:
    """The attempt's transcript from the first of ``FILES`` that ``read`` finds, else None."""
    parsers: tuple[tuple[str, Callable[[Any], Transcript]], ...] = (
        (TRAJ_JSON, parse_mini_swe_agent),
        (SWE_AGENT_TRAJ, parse_swe_agent),
        (INSPECT_SAMPLE, parse_inspect_sample),
    )
    for name, parse in parsers:
        data = read(name)
        if data is not None:
            try:
                return parse(_json(data, name))
            except TranscriptError as exc:
                return Transcript(source="", file=name, error=f"{name}: {exc}")
    messages = read(LLM_MESSAGES)
    events_data = read(EVENTS)
    events = _jsonl(events_data) if events_data is not None else None
    if messages is not None:
        return parse_llm_messages(_jsonl(messages), events, read=read)
    if events is not None:
        return parse_events(events, read=read)
    return None


class TranscriptError(ValueError):
    """A trajectory file that is not what its name says."""


# --- mini-swe-agent --------------------------------------------------------------------------

_BASH_BLOCK = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)  # mini-swe-agent's action_regex


def mini_swe_agent_command(content: Any) -> str | None:
    """The command a mini-swe-agent assistant message ran: its one bash block. None for zero
    or several blocks: mini-swe-agent runs nothing then and answers with a format error."""
    commands = _BASH_BLOCK.findall(content if isinstance(content, str) else _content_text(content))
    return commands[0] if len(commands) == 1 else None


def parse_mini_swe_agent(data: Any, file: str = TRAJ_JSON) -> Transcript:
    """mini-swe-agent's ``.traj.json``: ``info`` (exit status, submission, model stats) and
    ``messages``, where an assistant message holds a THOUGHT and one bash block and the user
    message after it holds that command's output."""
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        raise TranscriptError("expected an object with a 'messages' list (mini-swe-agent-1)")
    info = _obj(data.get("info"))
    stats = _obj(info.get("model_stats"))
    transcript = Transcript(
        source="mini-swe-agent",
        file=file,
        submission=_as_text(info.get("submission")),
        exit_status=_as_text(info.get("exit_status")),
        cost_usd=_number(stats.get("instance_cost")),
        api_calls=_int(stats.get("api_calls")),
    )
    config = _obj(info.get("config"))
    model = _obj(config.get("model"))
    transcript.model = _as_text(model.get("model_name"))
    _paired_observations(transcript, _messages(data["messages"]), _mini_swe_turn)
    _sum_tokens(transcript)
    return transcript


def _mini_swe_turn(index: int, message: dict) -> Turn:
    role = str(message.get("role") or "user")
    content = _content_text(message.get("content"))
    turn = Turn(index=index, role=role, text=block(content))
    extra = _obj(message.get("extra"))
    response = _obj(extra.get("response"))
    usage = response.get("usage") if isinstance(response.get("usage"), dict) else None
    if usage:
        turn.tokens_in = _int(usage.get("prompt_tokens"))
        turn.tokens_out = _int(usage.get("completion_tokens"))
        turn.cost_usd = _number(usage.get("cost"))
    if role == "assistant":
        choices = response.get("choices") if isinstance(response.get("choices"), list) else []
        first = choices[0] if choices and isinstance(choices[0], dict) else {}
        reply = _obj(first.get("message"))
        if reply.get("reasoning"):
            turn.reasoning = block(reply.get("reasoning"))
        command = mini_swe_agent_command(content)
        if command is not None:
            # The command is shown as the tool call; the text keeps the THOUGHT.
            turn.text = block(_BASH_BLOCK.sub("", content, count=1).rstrip())
            turn.tool_calls.append(ToolCall(name="bash", arguments=block(command)))
    return turn


def _paired_observations(
    transcript: Transcript, messages: list[dict], make: Callable[[int, dict], Turn]
) -> None:
    """Append turns; the message right after an assistant turn with one tool call and no
    result is that call's result (mini-swe-agent and SWE-agent without function calling)."""
    pending: ToolCall | None = None
    for message in messages:
        role = str(message.get("role") or "")
        if pending is not None and role in ("user", "tool"):
            pending.result = block(_content_text(message.get("content")))
            pending.is_error = _looks_failed(pending.result.text)
            pending = None
            continue
        turn = make(len(transcript.turns), message)
        transcript.turns.append(turn)
        pending = None
        if turn.role == "assistant" and len(turn.tool_calls) == 1 and not turn.tool_calls[0].result:
            pending = turn.tool_calls[0]


_RETURNCODE = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")


def _looks_failed(output: str) -> bool:
    match = _RETURNCODE.search(output[:200])
    return bool(match and match.group(1) != "0")


# --- SWE-agent -------------------------------------------------------------------------------


def parse_swe_agent(data: Any, file: str = SWE_AGENT_TRAJ) -> Transcript:
    """SWE-agent's ``.traj``: the ``history`` of messages (an assistant message's ``action``
    is its command, the next message its observation), or, without a history, the
    ``trajectory`` steps (``thought``, ``action``, ``observation``); ``info`` has the
    submission, the exit status and ``model_stats``."""
    if not isinstance(data, dict) or not (
        isinstance(data.get("history"), list) or isinstance(data.get("trajectory"), list)
    ):
        raise TranscriptError("expected an object with a 'history' or 'trajectory' list")
    info = _obj(data.get("info"))
    stats = _obj(info.get("model_stats"))
    transcript = Transcript(
        source="swe-agent",
        file=file,
        submission=_as_text(info.get("submission")),
        exit_status=_as_text(info.get("exit_status")),
        cost_usd=_number(stats.get("instance_cost")),
        api_calls=_int(stats.get("api_calls")),
        tokens_in=_int(stats.get("tokens_sent")),
        tokens_out=_int(stats.get("tokens_received")),
    )
    history = _messages(data.get("history") or [])
    steps = _messages(data.get("trajectory") or [])
    history_actions = sum(
        1
        for m in history
        if m.get("role") == "assistant" and (m.get("action") or m.get("tool_calls"))
    )
    step_actions = sum(1 for s in steps if s.get("action"))
    if history and history_actions >= step_actions:
        if any(m.get("tool_calls") for m in history):
            _openai_turns(transcript, history, _swe_agent_arguments)
        else:
            # Observations come back as "user" or, in SWE-agent 1.x, "tool" messages.
            _paired_observations(transcript, history, _swe_agent_turn)
    else:
        # A history cut short (or none): the steps hold every action and observation; the
        # history's opening prompts still come first.
        if history:
            transcript.notes.append(
                f"The history holds {history_actions} of the {step_actions} actions; "
                "shown from the trajectory's steps."
            )
        for message in history:
            if message.get("role") == "assistant":
                break
            transcript.turns.append(_swe_agent_turn(len(transcript.turns), message))
        for step in steps:
            turn = Turn(
                index=len(transcript.turns),
                role="assistant",
                text=block(step.get("thought") or step.get("response")),
            )
            if step.get("action"):
                turn.tool_calls.append(
                    ToolCall(
                        name="bash",
                        arguments=block(step.get("action")),
                        result=block(step.get("observation")),
                    )
                )
            transcript.turns.append(turn)
    return transcript


def _swe_agent_turn(index: int, message: dict) -> Turn:
    role = str(message.get("role") or "user")
    content = _content_text(message.get("content"))
    turn = Turn(index=index, role=role, text=block(content))
    if role == "assistant" and message.get("action"):
        # ``thought`` is the content without the command block.
        turn.text = block(message.get("thought") if "thought" in message else content)
        turn.tool_calls.append(
            ToolCall(name="bash", arguments=block(str(message["action"]).rstrip()))
        )
    return turn


def _swe_agent_arguments(arguments: Any) -> str:
    # SWE-agent's function calls carry the command as {"command": "..."}.
    if isinstance(arguments, dict) and set(arguments) == {"command"}:
        return _as_text(arguments["command"])
    return _as_text(arguments)


# --- Inspect AI ------------------------------------------------------------------------------


def parse_inspect_sample(data: Any, file: str = INSPECT_SAMPLE) -> Transcript:
    """One sample of an Inspect AI eval log: ``messages`` (content a string or a list of
    parts; assistant ``tool_calls`` with ``arguments`` as an object; ``tool`` messages with
    ``tool_call_id`` and ``error``), per-call usage from ``model`` events, ``scores``."""
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        raise TranscriptError("expected an Inspect sample with a 'messages' list")
    transcript = Transcript(source="inspect", file=file)
    _openai_turns(transcript, _messages(data["messages"]), _as_text)
    # Token counts per model call, in the order of the assistant turns.
    usages = [
        event.get("output", {}).get("usage")
        for event in _messages(data.get("events") or [])
        if event.get("event") == "model" and isinstance(event.get("output"), dict)
    ]
    assistants = [t for t in transcript.turns if t.role == "assistant"]
    if len(usages) == len(assistants):
        for turn, usage in zip(assistants, usages, strict=True):
            if isinstance(usage, dict):
                turn.tokens_in = _int(usage.get("input_tokens"))
                turn.tokens_out = _int(usage.get("output_tokens"))
    _sum_tokens(transcript)
    usage_by_model = data.get("model_usage")
    if transcript.tokens_in is None and isinstance(usage_by_model, dict):
        totals = [u for u in usage_by_model.values() if isinstance(u, dict)]
        transcript.tokens_in = sum(_int(u.get("input_tokens")) or 0 for u in totals)
        transcript.tokens_out = sum(_int(u.get("output_tokens")) or 0 for u in totals)
    output = _obj(data.get("output"))
    transcript.model = _as_text(output.get("model"))
    scores = _obj(data.get("scores"))
    for name, score in scores.items():
        value = score.get("value") if isinstance(score, dict) else score
        transcript.scores.append((str(name), _as_text(value)))
    return transcript


# --- OpenAI-style messages (ours, Inspect's, SWE-agent's function calling) -------------------


def _openai_turns(
    transcript: Transcript, messages: list[dict], arguments_text: Callable[[Any], str]
) -> dict[str, ToolCall]:
    """Append turns; each ``tool`` message becomes the result of the call it answers."""
    calls: dict[str, ToolCall] = {}
    for message in messages:
        role = str(message.get("role") or "user")
        if role == "tool":
            ids = message.get("tool_call_ids") or [message.get("tool_call_id")]
            call = calls.get(str(ids[0])) if ids else None
            if call is not None and call.result is None:
                call.result = block(_content_text(message.get("content")))
                error = message.get("error")
                if error:
                    call.is_error = True
                    detail = error.get("message") if isinstance(error, dict) else error
                    if detail and not call.result:
                        call.result = block(detail)
                continue
        turn = Turn(index=len(transcript.turns), role=role, text=block(""))
        text, reasoning = _content_parts(message.get("content"))
        turn.text = block(text)
        if reasoning:
            turn.reasoning = block(reasoning)
        if role == "assistant" and message.get("model"):
            turn.title = _as_text(message.get("model"))
        for raw in message.get("tool_calls") or []:
            if not isinstance(raw, dict):
                continue
            function = raw.get("function")
            if isinstance(function, dict):  # OpenAI: {"function": {"name", "arguments": str}}
                name, arguments = function.get("name"), function.get("arguments")
            else:  # Inspect: {"function": name, "arguments": {...}}
                name, arguments = function, raw.get("arguments")
            call = ToolCall(
                name=_as_text(name) or "?",
                arguments=block(arguments_text(_decoded(arguments))),
                call_id=_as_text(raw.get("id")),
            )
            turn.tool_calls.append(call)
            if call.call_id:
                calls[call.call_id] = call
        transcript.turns.append(turn)
    return calls


# --- our agents ------------------------------------------------------------------------------


def parse_llm_messages(
    lines: list[dict], events: list[dict] | None, *, read: Reader | None = None
) -> Transcript:
    """Our LLM agent: ``llm_messages.jsonl`` holds each request's new messages and each reply.

    The replies are the assistant turns (with the tokens of their ``llm_response`` event);
    a request's new messages give the rest (the prompts, tool results), its assistant
    messages being copies of replies already shown. Tool calls get their step's patch and
    output file from ``events.jsonl``.
    """
    transcript = Transcript(source="llm", file=LLM_MESSAGES)
    usage = {e.get("n"): e for e in events or [] if e.get("event") == "llm_response"}
    messages: list[dict] = []
    for line in lines:
        if line.get("truncated"):
            transcript.notes.append(
                "The conversation log reached AGENTBENCH_LLM_LOG_MAX_CHARS; the rest is not kept."
            )
            continue
        payload = _obj(line.get("payload"))
        if line.get("kind") == "request":
            messages += [
                m for m in _messages(payload.get("messages") or []) if m.get("role") != "assistant"
            ]
        elif line.get("kind") == "response" and isinstance(payload.get("message"), dict):
            messages.append({**payload["message"], "_n": payload.get("n")})
    _openai_turns(transcript, messages, _as_text)
    replies = iter(m for m in messages if m.get("role") == "assistant")
    for turn in transcript.turns:
        if turn.role != "assistant":
            continue
        event = usage.get(next(replies).get("_n"), {})
        turn.tokens_in = _int(event.get("tokens_in"))
        turn.tokens_out = _int(event.get("tokens_out"))
        turn.cost_usd = _number(event.get("cost_usd"))
    _attach_steps(transcript, events or [], read)
    _append_ending(transcript, events or [])
    _finish_from_events(transcript, events or [])
    _sum_tokens(transcript)
    return transcript


# After the model's last reply: what the model never saw (the last tests, how it stopped).
_ENDING_EVENTS = ("tests_finish", "agent_finish", "agent_error", "llm_error")


def _append_ending(transcript: Transcript, events: list[dict]) -> None:
    last = max((i for i, e in enumerate(events) if e.get("event") == "llm_response"), default=-1)
    for event in events[last + 1 :]:
        kind = str(event.get("event") or "")
        if kind in _ENDING_EVENTS:
            transcript.turns.append(_event_turn(len(transcript.turns), kind, event))


def parse_events(events: list[dict], *, read: Reader | None = None) -> Transcript:
    """An agent without a conversation (scripted, oracle, external, or messages not logged):
    each tool call is an assistant turn with its result, test runs and the rest are events."""
    transcript = Transcript(source="events", file=EVENTS)
    open_calls: dict[Any, ToolCall] = {}
    for event in events:
        kind = str(event.get("event") or event.get("type") or "")
        if kind == "tool_start":
            call = ToolCall(
                name=_as_text(event.get("tool")) or "?",
                arguments=block(_decoded(event.get("arguments", event.get("input")))),
            )
            open_calls[event.get("step", len(open_calls))] = call
            transcript.turns.append(
                Turn(index=len(transcript.turns), role="assistant", text=block(""),
                     tool_calls=[call])
            )  # fmt: skip
        elif kind == "tool_finish":
            step = event.get("step")
            found = open_calls.pop(step) if step in open_calls else _last_open(open_calls)
            if found is None:
                found = ToolCall(name=_as_text(event.get("tool")) or "?", arguments=block(""))
                transcript.turns.append(
                    Turn(index=len(transcript.turns), role="assistant", text=block(""),
                         tool_calls=[found])
                )  # fmt: skip
            _finish_call(found, event, read)
        elif kind in ("llm_request", "llm_response", "tool_start"):
            continue
        else:
            transcript.turns.append(_event_turn(len(transcript.turns), kind, event))
    _finish_from_events(transcript, events)
    return transcript


def _last_open(open_calls: dict[Any, ToolCall]) -> ToolCall | None:
    if not open_calls:
        return None
    return open_calls.pop(next(reversed(open_calls)))


def _attach_steps(transcript: Transcript, events: list[dict], read: Reader | None) -> None:
    """Give each tool call the ``tool_finish`` event of its step (tools run in call order)."""
    finishes = iter(e for e in events if e.get("event") == "tool_finish")
    for turn in transcript.turns:
        for call in turn.tool_calls:
            event = next(finishes, None)
            if event is None:
                return
            _finish_call(call, event, read)


def _finish_call(call: ToolCall, event: dict, read: Reader | None) -> None:
    if call.result is None and ("output" in event or "error" in event):
        call.result = block(event.get("output") or event.get("error"))
    call.is_error = call.is_error or event.get("ok") is False or bool(event.get("error"))
    artifact = _safe_relative(event.get("artifact"))
    if artifact.startswith("diffs/") and artifact.endswith(".patch"):
        call.patch_file = artifact
        data = read(artifact) if read else None
        if data is not None:
            call.patch = data.decode("utf-8", errors="replace")[:MAX_BLOCK_CHARS]
    elif artifact:
        call.artifact = artifact


_EVENT_SKIP = {"ts", "t", "event", "type", "output", "artifact"}


def _event_turn(index: int, kind: str, event: dict) -> Turn:
    fields = ", ".join(
        f"{k}={v}"
        for k, v in event.items()
        if k not in _EVENT_SKIP and isinstance(v, str | int | float | bool) and v != ""
    )
    text = fields + (("\n" + _as_text(event["output"])) if event.get("output") else "")
    is_error = bool(event.get("error")) or kind.endswith("error")
    if kind == "tests_finish":
        is_error = event.get("exit_code") not in (0, None)
    return Turn(index=index, role="event", title=kind, text=block(text), is_error=is_error)


def _finish_from_events(transcript: Transcript, events: list[dict]) -> None:
    for event in events:
        if event.get("event") == "agent_finish":
            transcript.exit_status = _as_text(event.get("stop"))
            transcript.cost_usd = _number(event.get("cost_usd"))
            calls = sum(1 for e in events if e.get("event") == "llm_response")
            transcript.api_calls = calls or None  # no model behind a scripted agent


# --- helpers ---------------------------------------------------------------------------------


def _safe_relative(value: Any) -> str:
    """A path inside the attempt's folder, or "": an event names it, so it is not trusted."""
    if not isinstance(value, str) or not value:
        return ""
    cleaned = posixpath.normpath(value.replace("\\", "/"))
    if cleaned.startswith(("/", "..")) or ".." in cleaned.split("/") or cleaned == ".":
        return ""
    return cleaned


def _sum_tokens(transcript: Transcript) -> None:
    turns = [t for t in transcript.turns if t.tokens_in is not None or t.tokens_out is not None]
    if turns and transcript.tokens_in is None:
        transcript.tokens_in = sum(t.tokens_in or 0 for t in turns)
        transcript.tokens_out = sum(t.tokens_out or 0 for t in turns)


def _json(data: bytes, name: str) -> Any:
    if len(data) > MAX_FILE_BYTES:
        raise TranscriptError(f"larger than {MAX_FILE_BYTES // (1024 * 1024)} MB; download it")
    try:
        return json.loads(data.decode("utf-8", errors="replace"))
    except json.JSONDecodeError as exc:
        message = f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        raise TranscriptError(message) from None


def _jsonl(data: bytes) -> list[dict]:
    """One object a line; lines that are not objects are skipped (a crash can cut the last)."""
    return list(_jsonl_objects(data[:MAX_FILE_BYTES]))


def _jsonl_objects(data: bytes) -> Iterator[dict]:
    for line in data.decode("utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            yield value


def _obj(value: Any) -> dict:
    """``value`` when it is an object, else an empty one (files are not trusted to match)."""
    return value if isinstance(value, dict) else {}


def _messages(values: Any) -> list[dict]:
    return [m for m in values if isinstance(m, dict)] if isinstance(values, list) else []


def _content_text(content: Any) -> str:
    text, reasoning = _content_parts(content)
    return text if not reasoning else f"{reasoning}\n\n{text}".strip()


def _content_parts(content: Any) -> tuple[str, str]:
    """(text, reasoning) of a message's content: a string, or a list of typed parts."""
    if content is None:
        return "", ""
    if isinstance(content, str):
        return content, ""
    if not isinstance(content, list):
        return _as_text(content), ""
    texts, reasoning = [], []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict):
            kind = part.get("type")
            if kind == "reasoning":
                reasoning.append(_as_text(part.get("reasoning") or part.get("summary")))
            elif "text" in part:
                texts.append(_as_text(part.get("text")))
            else:
                texts.append(f"[{kind or 'content'}]")
    return "\n".join(texts), "\n".join(r for r in reasoning if r)


def _decoded(arguments: Any) -> Any:
    """Tool-call arguments as an object when they are a JSON string of one."""
    if isinstance(arguments, str):
        try:
            value = json.loads(arguments)
        except ValueError:
            return arguments
        return value if isinstance(value, dict | list) else arguments
    return arguments


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
        # {"path": "x", "unified_diff": "..."}: one "key: value" block each, newlines kept.
        return "\n".join(f"{k}:\n{v}" if "\n" in v else f"{k}: {v}" for k, v in value.items())
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
