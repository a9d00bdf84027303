"""The REST shape of an attempt's transcript: ``runs.transcript.Transcript`` as JSON.

The same normalised conversation the attempt page shows, whatever file it came from
(mini-swe-agent, SWE-agent, Inspect AI, ATIF, a CLI agent's recorded model calls, our agents'
logs); ``?format=atif`` answers the same turns as an ATIF trajectory instead (runs/api/runs.py).
Text is sent as stored, not escaped: a client that renders it as HTML must escape it. Each text
block says how long it was (``total_chars``) when the reader cut it at
``runs.transcript.MAX_BLOCK_CHARS``.
"""

from __future__ import annotations

from ninja import Field, Schema


class BlockOut(Schema):
    text: str
    total_chars: int = Field(description="length before the cut; > len(text) when cut")


class ToolCallOut(Schema):
    name: str
    call_id: str
    arguments: BlockOut
    result: BlockOut | None = Field(description="null: no result recorded")
    is_error: bool
    patch: str = Field(description="the diff an apply_patch call applied")
    patch_file: str
    artifact: str = Field(description="the call's full output, a file of the attempt folder")


class TurnOut(Schema):
    index: int
    role: str = Field(description="system, user, assistant, tool or event")
    title: str
    text: BlockOut
    reasoning: BlockOut | None
    tool_calls: list[ToolCallOut]
    tokens_in: int | None
    tokens_out: int | None
    cost_usd: float | None
    is_error: bool


class ScoreOut(Schema):
    scorer: str
    value: str


class TranscriptOut(Schema):
    source: str = Field(
        description="mini-swe-agent, swe-agent, inspect, atif, model-calls (a CLI agent's calls "
        "through the gateway), llm or events"
    )
    file: str = Field(description="the artifact it was read from")
    error: str = Field(description="set when the file could not be read; turns are then empty")
    model: str
    exit_status: str
    submission: str
    cost_usd: float | None
    api_calls: int | None
    tokens_in: int | None
    tokens_out: int | None
    tool_call_count: int
    scores: list[ScoreOut]
    notes: list[str]
    turns: list[TurnOut]

    @staticmethod
    def resolve_scores(obj) -> list[dict]:
        return [{"scorer": scorer, "value": value} for scorer, value in obj.scores]
