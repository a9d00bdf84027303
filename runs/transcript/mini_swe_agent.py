"""mini-swe-agent's ``.traj.json`` ("mini-swe-agent-1"), stored unchanged by the import."""

from __future__ import annotations

import re
from typing import Any

from runs.transcript.messages import paired_observations
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
    sum_tokens,
)

FILE = "trajectory.traj.json"
# mini-swe-agent's action_regex: ```bash (1.x) or ```mswea_bash_command (its later prompts).
_BASH_BLOCK = re.compile(r"```(?:bash|mswea_bash_command)\s*\n(.*?)\n```", re.DOTALL)


def mini_swe_agent_command(content: Any) -> str | None:
    """The command a mini-swe-agent assistant message ran: its one bash block. None for zero
    or several blocks: mini-swe-agent runs nothing then and answers with a format error."""
    commands = _BASH_BLOCK.findall(content if isinstance(content, str) else content_text(content))
    return commands[0] if len(commands) == 1 else None


def without_command(content: str) -> str:
    """The THOUGHT of a message: its text without the bash block it ran."""
    return _BASH_BLOCK.sub("", content, count=1).rstrip()


def parse_mini_swe_agent(data: Any, file: str = FILE) -> Transcript:
    """mini-swe-agent's ``.traj.json``: ``info`` (exit status, submission, model stats) and
    ``messages``, where an assistant message holds a THOUGHT and one bash block and the user
    message after it holds that command's output."""
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        raise TranscriptError("expected an object with a 'messages' list (mini-swe-agent-1)")
    info = obj(data.get("info"))
    stats = obj(info.get("model_stats"))
    transcript = Transcript(
        source="mini-swe-agent",
        file=file,
        submission=as_text(info.get("submission")),
        exit_status=as_text(info.get("exit_status")),
        cost_usd=number(stats.get("instance_cost")),
        api_calls=integer(stats.get("api_calls")),
    )
    model = obj(obj(info.get("config")).get("model"))
    transcript.model = as_text(model.get("model_name"))
    transcript.agent_version = as_text(info.get("mini_version"))
    if transcript.agent_version:
        transcript.agent_name = "mini-swe-agent"
    paired_observations(transcript, objects(data["messages"]), _turn)
    sum_tokens(transcript)
    return transcript


def _turn(index: int, message: dict) -> Turn:
    role = str(message.get("role") or "user")
    content = content_text(message.get("content"))
    turn = Turn(index=index, role=role, text=block(content))
    response = obj(obj(message.get("extra")).get("response"))
    usage = response.get("usage") if isinstance(response.get("usage"), dict) else None
    if usage:
        turn.tokens_in = integer(usage.get("prompt_tokens"))
        turn.tokens_out = integer(usage.get("completion_tokens"))
        turn.cost_usd = number(usage.get("cost"))
    if role == "assistant":
        choices = objects(response.get("choices"))
        reply = obj(choices[0].get("message")) if choices else {}
        if reply.get("reasoning"):
            turn.reasoning = block(reply.get("reasoning"))
        command = mini_swe_agent_command(content)
        if command is not None:
            # The command is shown as the tool call; the text keeps the THOUGHT.
            turn.text = block(without_command(content))
            turn.tool_calls.append(ToolCall(name="bash", arguments=block(command)))
    return turn
