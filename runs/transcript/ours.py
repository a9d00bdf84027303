"""Our own agents' logs: ``llm_messages.jsonl`` (the LLM agent's conversation) with
``events.jsonl`` (every agent's tool calls, test runs and stop)."""

from __future__ import annotations

from typing import Any

from runs.transcript.messages import openai_turns
from runs.transcript.shapes import (
    MAX_BLOCK_CHARS,
    Reader,
    ToolCall,
    Transcript,
    Turn,
    as_text,
    block,
    decoded,
    integer,
    number,
    obj,
    objects,
    safe_relative,
    sum_tokens,
)

LLM_MESSAGES = "llm_messages.jsonl"
EVENTS = "events.jsonl"


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
        payload = obj(line.get("payload"))
        if line.get("kind") == "request":
            messages += [
                m for m in objects(payload.get("messages") or []) if m.get("role") != "assistant"
            ]
        elif line.get("kind") == "response" and isinstance(payload.get("message"), dict):
            messages.append({**payload["message"], "_n": payload.get("n")})
    openai_turns(transcript, messages, as_text)
    replies = iter(m for m in messages if m.get("role") == "assistant")
    for turn in transcript.turns:
        if turn.role != "assistant":
            continue
        event = usage.get(next(replies).get("_n"), {})
        turn.tokens_in = integer(event.get("tokens_in"))
        turn.tokens_out = integer(event.get("tokens_out"))
        turn.cost_usd = number(event.get("cost_usd"))
    _attach_steps(transcript, events or [], read)
    _append_ending(transcript, events or [])
    _finish_from_events(transcript, events or [])
    sum_tokens(transcript)
    return transcript


# After the model's last reply: what the model never saw (the last tests, how it stopped).
_ENDING_EVENTS = ("tests_finish", "agent_finish", "agent_error", "llm_error")


def _append_ending(transcript: Transcript, events: list[dict]) -> None:
    last = max((i for i, e in enumerate(events) if e.get("event") == "llm_response"), default=-1)
    transcript.turns += ending_turns(len(transcript.turns), events[last + 1 :])


def ending_turns(start: int, events: list[dict]) -> list[Turn]:
    """The events after the model's last reply (the last tests, how the agent stopped)."""
    turns: list[Turn] = []
    for event in events:
        kind = str(event.get("event") or "")
        if kind in _ENDING_EVENTS:
            turns.append(event_turn(start + len(turns), kind, event))
    return turns


def parse_events(events: list[dict], *, read: Reader | None = None) -> Transcript:
    """An agent without a conversation (scripted, oracle, external, or messages not logged):
    each tool call is an assistant turn with its result, test runs and the rest are events."""
    transcript = Transcript(source="events", file=EVENTS)
    open_calls: dict[Any, ToolCall] = {}
    for event in events:
        kind = str(event.get("event") or event.get("type") or "")
        if kind == "tool_start":
            arguments = decoded(event.get("arguments", event.get("input")))
            call = ToolCall(
                name=as_text(event.get("tool")) or "?",
                arguments=block(arguments),
                input=arguments if isinstance(arguments, dict) else None,
            )
            open_calls[event.get("step", len(open_calls))] = call
            transcript.add("assistant", tool_calls=[call])
        elif kind == "tool_finish":
            step = event.get("step")
            found = open_calls.pop(step) if step in open_calls else _last_open(open_calls)
            if found is None:
                found = ToolCall(name=as_text(event.get("tool")) or "?", arguments=block(""))
                transcript.add("assistant", tool_calls=[found])
            _finish_call(found, event, read)
        elif kind in ("llm_request", "llm_response", "tool_start"):
            continue
        else:
            transcript.turns.append(event_turn(len(transcript.turns), kind, event))
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
    artifact = safe_relative(event.get("artifact"))
    if artifact.startswith("diffs/") and artifact.endswith(".patch"):
        call.patch_file = artifact
        data = read(artifact) if read else None
        if data is not None:
            call.patch = data.decode("utf-8", errors="replace")[:MAX_BLOCK_CHARS]
    elif artifact:
        call.artifact = artifact


_EVENT_SKIP = {"ts", "t", "event", "type", "output", "artifact"}


def event_turn(index: int, kind: str, event: dict) -> Turn:
    """A harness event (a test run, the agent's stop) as a turn of its own."""
    fields = ", ".join(
        f"{k}={v}"
        for k, v in event.items()
        if k not in _EVENT_SKIP and isinstance(v, str | int | float | bool) and v != ""
    )
    text = fields + (("\n" + as_text(event["output"])) if event.get("output") else "")
    is_error = bool(event.get("error")) or kind.endswith("error")
    if kind == "tests_finish":
        is_error = event.get("exit_code") not in (0, None)
    return Turn(index=index, role="event", title=kind, text=block(text), is_error=is_error)


def _finish_from_events(transcript: Transcript, events: list[dict]) -> None:
    for event in events:
        if event.get("event") == "agent_finish":
            transcript.exit_status = as_text(event.get("stop"))
            transcript.cost_usd = number(event.get("cost_usd"))
            calls = sum(1 for e in events if e.get("event") == "llm_response")
            transcript.api_calls = calls or None  # no model behind a scripted agent
