"""SWE-agent's ``.traj`` (``history``, ``trajectory``, ``info``), stored unchanged by the import."""

from __future__ import annotations

from typing import Any

from runs.transcript.messages import openai_turns, paired_observations
from runs.transcript.shapes import (
    ToolCall,
    Transcript,
    TranscriptError,
    Turn,
    as_text,
    block,
    content_text,
    integer,
    number,
    obj,
    objects,
)

FILE = "trajectory.traj"


def parse_swe_agent(data: Any, file: str = FILE) -> Transcript:
    """SWE-agent's ``.traj``: the ``history`` of messages (an assistant message's ``action``
    is its command, the next message its observation), or, without a history, the
    ``trajectory`` steps (``thought``, ``action``, ``observation``); ``info`` has the
    submission, the exit status and ``model_stats``."""
    if not isinstance(data, dict) or not (
        isinstance(data.get("history"), list) or isinstance(data.get("trajectory"), list)
    ):
        raise TranscriptError("expected an object with a 'history' or 'trajectory' list")
    info = obj(data.get("info"))
    stats = obj(info.get("model_stats"))
    transcript = Transcript(
        source="swe-agent",
        file=file,
        submission=as_text(info.get("submission")),
        exit_status=as_text(info.get("exit_status")),
        cost_usd=number(stats.get("instance_cost")),
        api_calls=integer(stats.get("api_calls")),
        tokens_in=integer(stats.get("tokens_sent")),
        tokens_out=integer(stats.get("tokens_received")),
    )
    history = objects(data.get("history") or [])
    steps = objects(data.get("trajectory") or [])
    history_actions = sum(
        1
        for m in history
        if m.get("role") == "assistant" and (m.get("action") or m.get("tool_calls"))
    )
    step_actions = sum(1 for s in steps if s.get("action"))
    if history and history_actions >= step_actions:
        if any(m.get("tool_calls") for m in history):
            openai_turns(transcript, history, _arguments)
        else:
            # Observations come back as "user" or, in SWE-agent 1.x, "tool" messages.
            paired_observations(transcript, history, _turn)
        return transcript
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
        transcript.turns.append(_turn(len(transcript.turns), message))
    for step in steps:
        turn = transcript.add("assistant", step.get("thought") or step.get("response"))
        if step.get("action"):
            turn.tool_calls.append(
                ToolCall(
                    name="bash",
                    arguments=block(step.get("action")),
                    result=block(step.get("observation")),
                )
            )
    return transcript


def _turn(index: int, message: dict) -> Turn:
    role = str(message.get("role") or "user")
    content = content_text(message.get("content"))
    turn = Turn(index=index, role=role, text=block(content))
    if role == "assistant" and message.get("action"):
        # ``thought`` is the content without the command block.
        turn.text = block(message.get("thought") if "thought" in message else content)
        turn.tool_calls.append(
            ToolCall(name="bash", arguments=block(str(message["action"]).rstrip()))
        )
    return turn


def _arguments(arguments: Any) -> str:
    # SWE-agent's function calls carry the command as {"command": "..."}.
    if isinstance(arguments, dict) and set(arguments) == {"command"}:
        return as_text(arguments["command"])
    return as_text(arguments)
