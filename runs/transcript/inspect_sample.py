"""One Inspect AI eval-log sample (``messages``, ``events``, ``scores``), stored by the import."""

from __future__ import annotations

from typing import Any

from runs.transcript.messages import openai_turns
from runs.transcript.shapes import (
    Transcript,
    TranscriptError,
    as_text,
    integer,
    obj,
    objects,
    sum_tokens,
)

FILE = "trajectory.inspect.json"


def parse_inspect_sample(data: Any, file: str = FILE) -> Transcript:
    """One sample of an Inspect AI eval log: ``messages`` (content a string or a list of
    parts; assistant ``tool_calls`` with ``arguments`` as an object; ``tool`` messages with
    ``tool_call_id`` and ``error``), per-call usage from ``model`` events, ``scores``."""
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        raise TranscriptError("expected an Inspect sample with a 'messages' list")
    transcript = Transcript(source="inspect", file=file)
    openai_turns(transcript, objects(data["messages"]), as_text)
    # Token counts per model call, in the order of the assistant turns.
    usages = [
        event.get("output", {}).get("usage")
        for event in objects(data.get("events") or [])
        if event.get("event") == "model" and isinstance(event.get("output"), dict)
    ]
    assistants = [t for t in transcript.turns if t.role == "assistant"]
    if len(usages) == len(assistants):
        for turn, usage in zip(assistants, usages, strict=True):
            if isinstance(usage, dict):
                turn.tokens_in = integer(usage.get("input_tokens"))
                turn.tokens_out = integer(usage.get("output_tokens"))
    sum_tokens(transcript)
    usage_by_model = data.get("model_usage")
    if transcript.tokens_in is None and isinstance(usage_by_model, dict):
        totals = [u for u in usage_by_model.values() if isinstance(u, dict)]
        transcript.tokens_in = sum(integer(u.get("input_tokens")) or 0 for u in totals)
        transcript.tokens_out = sum(integer(u.get("output_tokens")) or 0 for u in totals)
    transcript.model = as_text(obj(data.get("output")).get("model"))
    for name, score in obj(data.get("scores")).items():
        value = score.get("value") if isinstance(score, dict) else score
        transcript.scores.append((str(name), as_text(value)))
    return transcript
