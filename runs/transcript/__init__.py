"""An attempt's conversation with its model, read from the files in its artifact folder.

Pure (no Django; may import only the standard library, ``runs.transcript`` itself and, for
ATIF, the ``atif`` package): ``load(read)`` takes a function that returns a file of the
attempt's folder as bytes (or None when absent) and returns a ``Transcript``, whatever agent
wrote it. One module per source format:

==========================  ===================================================================
file                        written by (module)
==========================  ===================================================================
``trajectory.traj.json``    mini-swe-agent ("mini-swe-agent-1"), stored unchanged by the import
                            (``mini_swe_agent``)
``trajectory.traj``         SWE-agent's ``.traj`` (``swe_agent``)
``trajectory.inspect.json`` one Inspect AI eval-log sample (``inspect_sample``)
``trajectory.atif.json``    an ATIF trajectory (Harbor's format), imported (``atif``, which
                            also writes one)
``model_calls.jsonl``       the gateway's record of a CLI agent's model calls
                            (``model_calls`` over ``wire_anthropic``, ``wire_responses``,
                            ``wire_chat``, ``wire_gemini``), with ``events.jsonl``
``llm_messages.jsonl``      our LLM agent (``runs/agents/llm.py``), with ``events.jsonl``
                            (``ours``)
``events.jsonl``            any of our agents (tool calls and test runs only) (``ours``)
==========================  ===================================================================

The first file present wins, in that order. Every agent becomes the same shape (``shapes``):
turns (system, user, assistant, or a harness ``event``), an assistant turn carrying its tool
calls with each call's result attached (not a turn of its own), token counts where the file
has them, and the patch an ``apply_patch`` call applied. Text is kept as text: escaping is the
template's job. A file that cannot be read gives a transcript with ``error`` set, never an
exception, so the attempt page still opens.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from runs.transcript import atif, inspect_sample, mini_swe_agent, model_calls, ours, swe_agent
from runs.transcript.atif import parse_atif, to_atif
from runs.transcript.inspect_sample import parse_inspect_sample
from runs.transcript.mini_swe_agent import mini_swe_agent_command, parse_mini_swe_agent
from runs.transcript.model_calls import parse_model_calls
from runs.transcript.ours import parse_events, parse_llm_messages
from runs.transcript.shapes import (
    FOLD_CHARS,
    FOLD_LINES,
    MAX_BLOCK_CHARS,
    MAX_FILE_BYTES,
    Block,
    Reader,
    ToolCall,
    Transcript,
    TranscriptError,
    Turn,
    block,
    full_blocks,
    parse_json,
    parse_jsonl,
)
from runs.transcript.swe_agent import parse_swe_agent

TRAJ_JSON = mini_swe_agent.FILE
SWE_AGENT_TRAJ = swe_agent.FILE
INSPECT_SAMPLE = inspect_sample.FILE
ATIF = atif.FILE
MODEL_CALLS = model_calls.FILE
LLM_MESSAGES = ours.LLM_MESSAGES
EVENTS = ours.EVENTS
# In the order ``load`` tries them.
FILES = (TRAJ_JSON, SWE_AGENT_TRAJ, INSPECT_SAMPLE, ATIF, MODEL_CALLS, LLM_MESSAGES, EVENTS)

SOURCE_TITLES = {
    "mini-swe-agent": "mini-swe-agent trajectory",
    "swe-agent": "SWE-agent trajectory",
    "inspect": "Inspect AI sample",
    "atif": "ATIF trajectory",
    "model-calls": "model calls (recorded by the gateway)",
    "llm": "LLM conversation",
    "events": "agent events",
}

__all__ = [
    "ATIF",
    "EVENTS",
    "FILES",
    "FOLD_CHARS",
    "FOLD_LINES",
    "INSPECT_SAMPLE",
    "LLM_MESSAGES",
    "MAX_BLOCK_CHARS",
    "MAX_FILE_BYTES",
    "MODEL_CALLS",
    "SOURCE_TITLES",
    "SWE_AGENT_TRAJ",
    "TRAJ_JSON",
    "Block",
    "Reader",
    "ToolCall",
    "Transcript",
    "TranscriptError",
    "Turn",
    "block",
    "full_blocks",
    "load",
    "mini_swe_agent_command",
    "parse_atif",
    "parse_events",
    "parse_inspect_sample",
    "parse_llm_messages",
    "parse_mini_swe_agent",
    "parse_model_calls",
    "parse_swe_agent",
    "to_atif",
]


def load(read: Reader) -> Transcript | None:
    """The attempt's transcript from the first of ``FILES`` that ``read`` finds, else None."""
    parsers: tuple[tuple[str, Callable[[Any], Transcript]], ...] = (
        (TRAJ_JSON, parse_mini_swe_agent),
        (SWE_AGENT_TRAJ, parse_swe_agent),
        (INSPECT_SAMPLE, parse_inspect_sample),
        (ATIF, parse_atif),
    )
    for name, parse in parsers:
        data = read(name)
        if data is not None:
            try:
                return parse(parse_json(data, name))
            except TranscriptError as exc:
                return Transcript(source="", file=name, error=f"{name}: {exc}")
    events_data = read(EVENTS)
    events = parse_jsonl(events_data) if events_data is not None else None
    calls = read(MODEL_CALLS)
    if calls is not None:
        return parse_model_calls(calls, events)
    messages = read(LLM_MESSAGES)
    if messages is not None:
        return parse_llm_messages(parse_jsonl(messages), events, read=read)
    if events is not None:
        return parse_events(events, read=read)
    return None
