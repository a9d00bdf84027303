"""How long each step of an agent took, where its trajectory recorded the time.

A step is one model call and what the agent did with the reply (the transcript's assistant
turn, ``runs.transcript``). Pure (no Django): ``load(read, transcript)`` reads the file the
transcript came from again and returns ``StepTimes``, or None when that file records no
times. Each format's clock:

==========================  ===================================================================
file                        when a step starts and ends
==========================  ===================================================================
``trajectory.traj.json``    mini-swe-agent: ``extra.timestamp`` on the reply and on the
                            command's output (2.x): a step ends with its output's timestamp and
                            starts where the previous one ended; else (1.x) the reply's
                            ``extra.response.created``, the provider's time of the call: a
                            step lasts until the next call (the last one's end is unknown)
``trajectory.inspect.json`` Inspect: each ``model`` event's ``timestamp`` to the last
                            ``completed`` of it and the ``tool`` events after it
``trajectory.atif.json``    ATIF (Harbor's agents): an agent step from the step before it to its
                            own ``timestamp``
``llm_messages.jsonl``      our LLM agent's ``events.jsonl``: ``llm_request`` to the last
                            ``tool_finish`` before the next request (``t``: seconds since start)
``events.jsonl``            our other agents: each ``tool_start`` to its ``tool_finish``
``model_calls.jsonl``       a CLI agent through the gateway: each reply's call from its
                            ``started_at`` to the next reply's call (the reply and the tools
                            the CLI ran with it); the last one until its reply was in
==========================  ===================================================================

The k-th step is the transcript's k-th assistant turn; when the counts differ, nothing is
attached (a wrong time on a step is worse than none). A time that is missing or runs
backwards is unknown ("—" on the page), never a guess.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Reader = Callable[[str], bytes | None]
MAX_FILE_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class StepTime:
    step: int  # 1-based
    start: float | None  # seconds on the file's clock
    end: float | None

    @property
    def seconds(self) -> float | None:
        if self.start is None or self.end is None or self.end < self.start:
            return None
        return self.end - self.start


@dataclass
class StepTimes:
    steps: list[StepTime]
    by_turn: dict[int, StepTime] = field(default_factory=dict)  # transcript turn index -> time

    @property
    def timed(self) -> int:
        return sum(1 for s in self.steps if s.seconds is not None)

    @property
    def total(self) -> float | None:
        """The sum of the steps' known durations; None when none is known."""
        known = [s.seconds for s in self.steps if s.seconds is not None]
        return sum(known) if known else None


def load(read: Reader, transcript: Any) -> StepTimes | None:
    """The step times of the file ``transcript`` (a ``runs.transcript.Transcript``) was read
    from, attached to its assistant turns; None when the file records no times or its steps
    do not match the transcript's."""
    if transcript is None or transcript.error:
        return None
    if transcript.file == "model_calls.jsonl":
        return _from_turns(transcript)
    parse = _PARSERS.get(transcript.file)
    if parse is None:
        return None
    try:
        steps = parse(read)
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    if not steps or all(s.seconds is None for s in steps):
        return None
    assistants = [t for t in transcript.turns if t.role == "assistant"]
    if len(assistants) != len(steps):
        return None
    return StepTimes(
        steps=steps, by_turn={t.index: s for t, s in zip(assistants, steps, strict=True)}
    )


def _from_turns(transcript: Any) -> StepTimes | None:
    """Step times the transcript's reader attached to its assistant turns (the gateway's
    record: each turn's model call's start and end)."""
    assistants = [t for t in transcript.turns if t.role == "assistant"]
    steps = []
    for n, turn in enumerate(assistants):
        following = assistants[n + 1].call_started if n + 1 < len(assistants) else None
        end = following if following is not None else turn.call_ended
        steps.append(StepTime(n + 1, turn.call_started, end))
    if not steps or all(s.seconds is None for s in steps):
        return None
    return StepTimes(
        steps=steps, by_turn={t.index: s for t, s in zip(assistants, steps, strict=True)}
    )


# Sources whose clock is seconds since the epoch (the others count from the agent's start).
ABSOLUTE_CLOCKS = frozenset(
    {"model_calls.jsonl", "trajectory.traj.json", "trajectory.inspect.json", "trajectory.atif.json"}
)


# --- mini-swe-agent ------------------------------------------------------------------------


def _mini_swe_agent(read: Reader) -> list[StepTime]:
    data = _json(read("trajectory.traj.json"))
    messages = [m for m in data.get("messages") or [] if isinstance(m, dict)]
    replies: list[tuple[float | None, float | None]] = []  # (reply's time, its output's time)
    created: list[float | None] = []
    last_seen: float | None = None  # the latest time before the next reply
    starts: list[float | None] = []
    for i, message in enumerate(messages):
        extra = _obj(message.get("extra"))
        stamp = _number(extra.get("timestamp"))
        if message.get("role") != "assistant":
            if replies and replies[-1][1] is None and i and _after_reply(messages, i):
                replies[-1] = (replies[-1][0], stamp)
            if stamp is not None:
                last_seen = stamp
            continue
        response = _obj(extra.get("response"))
        starts.append(last_seen)
        replies.append((stamp, None))
        created.append(_number(response.get("created")))
        if stamp is not None:
            last_seen = stamp
    if any(r for r, _ in replies):
        # 2.x: a step runs from the end of the one before to its command's output (or reply).
        steps = []
        for n, ((reply, output), start) in enumerate(zip(replies, starts, strict=True), 1):
            steps.append(StepTime(n, start, output if output is not None else reply))
        return steps
    # 1.x: the provider's time of each call; a step lasts until the next one.
    return [
        StepTime(n, start, created[n] if n < len(created) else None)
        for n, start in enumerate(created, 1)
    ]


def _after_reply(messages: list[dict], i: int) -> bool:
    return messages[i - 1].get("role") == "assistant"


# --- Inspect ---------------------------------------------------------------------------------


def _inspect(read: Reader) -> list[StepTime]:
    data = _json(read("trajectory.inspect.json"))
    steps: list[StepTime] = []
    start: float | None = None
    end: float | None = None
    for event in data.get("events") or []:
        if not isinstance(event, dict):
            continue
        kind = event.get("event")
        if kind == "model":
            if steps or start is not None:
                steps.append(StepTime(len(steps) + 1, start, end))
            start, end = _iso(event.get("timestamp")), _inspect_end(event)
        elif kind == "tool" and start is not None:
            finished = _inspect_end(event)
            if finished is not None and (end is None or finished > end):
                end = finished
    if start is not None:
        steps.append(StepTime(len(steps) + 1, start, end))
    return steps


def _inspect_end(event: dict) -> float | None:
    completed = _iso(event.get("completed"))
    if completed is not None:
        return completed
    began, working = _iso(event.get("timestamp")), _number(event.get("working_time"))
    return began + working if began is not None and working is not None else None


# --- our agents ------------------------------------------------------------------------------


def _events(read: Reader) -> list[dict]:
    data = read("events.jsonl")
    if data is None or len(data) > MAX_FILE_BYTES:
        return []
    out = []
    for line in data.decode("utf-8", errors="replace").splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


def _clock(event: dict) -> float | None:
    """Seconds since the agent started (``t``), else the wall clock (``ts``)."""
    t = _number(event.get("t"))
    return t if t is not None else _iso(event.get("ts"))


def _llm(read: Reader) -> list[StepTime]:
    """One step per reply: from its request to the last tool finished before the next one."""
    steps: list[StepTime] = []
    start: float | None = None
    end: float | None = None
    replied = False
    for event in _events(read):
        kind = event.get("event")
        if kind == "llm_request":
            if replied:
                steps.append(StepTime(len(steps) + 1, start, end))
            start, end, replied = _clock(event), None, False
        elif kind == "llm_response":
            replied, end = True, _clock(event)
        elif kind == "tool_finish" and replied:
            end = _clock(event)
    if replied:
        steps.append(StepTime(len(steps) + 1, start, end))
    return steps


def _tools(read: Reader) -> list[StepTime]:
    """One step per tool call: from its start to its finish."""
    steps: list[StepTime] = []
    open_steps: dict[Any, int] = {}
    for event in _events(read):
        kind = event.get("event")
        if kind == "tool_start":
            open_steps[event.get("step", len(steps))] = len(steps)
            steps.append(StepTime(len(steps) + 1, _clock(event), None))
        elif kind == "tool_finish":
            key = event.get("step")
            if key in open_steps:
                at = open_steps.pop(key)
            elif open_steps:
                at = open_steps.pop(next(reversed(open_steps)))
            else:  # a finish without its start: a step of its own, as the transcript has it
                steps.append(StepTime(len(steps) + 1, None, _clock(event)))
                continue
            steps[at] = StepTime(steps[at].step, steps[at].start, _clock(event))
    return steps


# --- ATIF ------------------------------------------------------------------------------------


def _atif(read: Reader) -> list[StepTime]:
    """One step per agent step: from the step before it (any source: the task, a tool's
    output) to its own ``timestamp``, when its reply was in."""
    data = _json(read("trajectory.atif.json"))
    steps: list[StepTime] = []
    last: float | None = None
    for step in data.get("steps") or []:
        if not isinstance(step, dict):
            continue
        stamp = _iso(step.get("timestamp"))
        if step.get("source") == "agent":
            steps.append(StepTime(len(steps) + 1, last, stamp))
        last = stamp
    return steps


_PARSERS: dict[str, Callable[[Reader], list[StepTime]]] = {
    "trajectory.traj.json": _mini_swe_agent,
    "trajectory.inspect.json": _inspect,
    "trajectory.atif.json": _atif,
    "llm_messages.jsonl": _llm,
    "events.jsonl": _tools,
}


# --- helpers ---------------------------------------------------------------------------------


def _json(data: bytes | None) -> dict:
    if data is None or len(data) > MAX_FILE_BYTES:
        return {}
    value = json.loads(data.decode("utf-8", errors="replace"))
    return value if isinstance(value, dict) else {}


def _obj(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _iso(value: Any) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.timestamp()


def duration_text(seconds: float | None) -> str:
    """``4.2 s``, ``3 min 05 s``, ``1 h 02 min``; "—" when unknown."""
    if seconds is None:
        return "—"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"
