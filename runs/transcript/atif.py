"""Harbor's Agent Trajectory Interchange Format (ATIF): read one into a ``Transcript``, write a
``Transcript`` as one, and check a document against the format.

ATIF (Harbor RFC 0001) is one JSON object: ``schema_version``, ``agent`` (name, version,
model), ``steps`` numbered from 1 (``source`` system, user or agent; an agent step carries its
``tool_calls`` and the ``observation`` whose results answer them by ``source_call_id``, and its
``metrics``), ``final_metrics``, ``notes``, ``extra``. Our turns map onto steps one to one:
assistant turns are agent steps, system and user turns their own sources, and what ATIF has
no source for (a harness event, a result with no call) is a system step that says what it was
in ``extra.agentbench``, so our own export reads back as the same turns.

Checking uses the pydantic models of the ``atif`` package (Harbor's own package, ``harbor``,
needs Python 3.12 and some hundred dependencies), plus the rules Harbor's models add to it:
a known ``schema_version`` and at least one step.
"""

from __future__ import annotations

from typing import Any

from runs.transcript.shapes import (
    ToolCall,
    Transcript,
    TranscriptError,
    Turn,
    as_text,
    block,
    content_text,
    integer,
    iso_text,
    number,
    obj,
    objects,
)

FILE = "trajectory.atif.json"
SCHEMA_VERSION = "ATIF-v1.7"
# The versions Harbor's models accept (harbor 0.25.0, harbor/models/trajectories).
KNOWN_VERSIONS = tuple(f"ATIF-v1.{n}" for n in range(9))
OURS = "agentbench"  # the key of our metadata in every ``extra``


def is_atif(data: Any) -> bool:
    """A JSON document that says it is ATIF."""
    return isinstance(data, dict) and str(data.get("schema_version", "")).startswith("ATIF-v")


def validate(data: Any) -> list[str]:
    """What makes ``data`` not a valid ATIF trajectory, one line each naming the field; []
    when it is one."""
    from atif import Trajectory  # pydantic models: loaded by the exports and imports only
    from pydantic import ValidationError

    if not isinstance(data, dict):
        return ["(root): an ATIF trajectory is a JSON object"]
    problems = []
    version = data.get("schema_version")
    if version not in KNOWN_VERSIONS:
        problems.append(f"schema_version: {version!r} is not one of {', '.join(KNOWN_VERSIONS)}")
    if isinstance(data.get("steps"), list) and not data["steps"]:
        problems.append("steps: at least one step is needed")
    try:
        Trajectory.model_validate(data)
    except ValidationError as exc:
        for error in exc.errors()[:20]:
            where = ".".join(str(p) for p in error["loc"]) or "(root)"
            problems.append(f"{where}: {error['msg']}")
    return problems


# --- writing ---------------------------------------------------------------------------------


def to_atif(
    transcript: Transcript,
    *,
    agent_name: str,
    agent_version: str,
    session_id: str = "",
    extra: dict | None = None,
    timestamps: dict[int, float] | None = None,
) -> dict:
    """``transcript`` as an ATIF document (a dict ready for ``json.dumps``). ``timestamps``:
    when each assistant turn (by index) ended, in seconds since the epoch, where known; an agent
    step's ``timestamp`` (the time its reply was in, as ``parse_atif``'s step times read it)."""
    stamps = timestamps or {}
    steps = []
    for n, turn in enumerate(transcript.turns, start=1):
        step = _step(n, turn)
        if step["source"] == "agent" and stamps.get(turn.index) is not None:
            step["timestamp"] = iso_text(stamps[turn.index])
        steps.append(step)
    if not steps:
        # ATIF needs one step; an attempt whose agent said nothing still ran.
        steps = [_system(1, "(no turns recorded)", {"role": "event", "title": "empty"})]
    ours = {
        "source": transcript.source,
        "file": transcript.file,
        "exit_status": transcript.exit_status,
        "submission": transcript.submission,
        "api_calls": transcript.api_calls,
        "scores": [list(s) for s in transcript.scores],
        "agent_name": transcript.agent_name or None,
    } | (extra or {})
    document: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "agent": {"name": agent_name, "version": agent_version},
        "steps": steps,
        "final_metrics": _drop_none(
            {
                "total_prompt_tokens": transcript.tokens_in,
                "total_completion_tokens": transcript.tokens_out,
                "total_cost_usd": transcript.cost_usd,
                "total_steps": len(steps),
            }
        ),
        "extra": {OURS: _drop_none(ours)},
    }
    if session_id:
        document["session_id"] = session_id
    if transcript.model:
        document["agent"]["model_name"] = transcript.model
    if transcript.notes:
        document["notes"] = "\n".join(transcript.notes)
    return document


def _step(step_id: int, turn: Turn) -> dict:
    if turn.role == "assistant":
        return _agent_step(step_id, turn)
    if turn.role in ("system", "user") and not turn.is_error and not turn.title:
        return {"step_id": step_id, "source": turn.role, "message": turn.text.text}
    marks = {
        "role": turn.role,
        "title": turn.title,
        "is_error": turn.is_error or None,
        "tokens_in": turn.tokens_in,
        "tokens_out": turn.tokens_out,
        "cost_usd": turn.cost_usd,
    }
    if turn.role == "tool":
        step = _system(step_id, "", marks)
        step["observation"] = {"results": [{"content": turn.text.text}]}
        return step
    return _system(step_id, turn.text.text, marks)


def _system(step_id: int, message: str, marks: dict) -> dict:
    return {
        "step_id": step_id,
        "source": "system",
        "message": message,
        "extra": {OURS: _drop_none(marks)},
    }


def _agent_step(step_id: int, turn: Turn) -> dict:
    step: dict[str, Any] = {"step_id": step_id, "source": "agent", "message": turn.text.text}
    if turn.title:
        step["model_name"] = turn.title
    if turn.reasoning:
        step["reasoning_content"] = turn.reasoning.text
    calls, results = [], []
    for i, call in enumerate(turn.tool_calls, start=1):
        call_id = call.call_id or f"step{step_id}-call{i}"
        marks = {
            "is_error": call.is_error or None,
            "patch": call.patch or None,
            "patch_file": call.patch_file or None,
            "artifact": call.artifact or None,
        }
        if isinstance(call.input, dict):
            arguments = call.input
        else:
            # Text arguments (a bash command): ATIF wants an object; the mark says to show
            # the text again on the way back.
            arguments, marks["arguments_text"] = {"input": call.arguments.text}, True
        entry: dict[str, Any] = {
            "tool_call_id": call_id,
            "function_name": call.name,
            "arguments": arguments,
        }
        if _drop_none(marks):
            entry["extra"] = {OURS: _drop_none(marks)}
        calls.append(entry)
        if call.result is not None:
            result: dict[str, Any] = {"source_call_id": call_id, "content": call.result.text}
            if call.is_error:
                result["extra"] = {OURS: {"is_error": True}}
            results.append(result)
    if calls:
        step["tool_calls"] = calls
    if results:
        step["observation"] = {"results": results}
    metrics = _drop_none(
        {
            "prompt_tokens": turn.tokens_in,
            "completion_tokens": turn.tokens_out,
            "cost_usd": turn.cost_usd,
        }
    )
    if metrics:
        step["metrics"] = metrics
    if turn.is_error:
        step["extra"] = {OURS: {"is_error": True}}
    return step


def _drop_none(values: dict) -> dict:
    return {k: v for k, v in values.items() if v is not None and v != "" and v != []}


# --- reading ---------------------------------------------------------------------------------


def parse_atif(data: Any, file: str = FILE) -> Transcript:
    """An ATIF trajectory as turns (see the module doc); lenient: the import checked it."""
    if not is_atif(data) or not isinstance(data.get("steps"), list):
        raise TranscriptError("expected an ATIF trajectory: schema_version 'ATIF-v1.x' and steps")
    agent = obj(data.get("agent"))
    metrics = obj(data.get("final_metrics"))
    ours = obj(obj(data.get("extra")).get(OURS))
    transcript = Transcript(
        source="atif",
        file=file,
        model=as_text(agent.get("model_name")),
        agent_name=as_text(ours.get("agent_name") or agent.get("name")),
        agent_version=as_text(agent.get("version")),
        submission=as_text(ours.get("submission")),
        exit_status=as_text(ours.get("exit_status")),
        api_calls=integer(ours.get("api_calls")),
        tokens_in=integer(metrics.get("total_prompt_tokens")),
        tokens_out=integer(metrics.get("total_completion_tokens")),
        cost_usd=number(metrics.get("total_cost_usd")),
        scores=[
            (as_text(s[0]), as_text(s[1]))
            for s in ours.get("scores") or []
            if isinstance(s, list) and len(s) == 2
        ],
    )
    if data.get("notes"):
        transcript.notes += as_text(data.get("notes")).splitlines()
    for step in objects(data["steps"]):
        _read_step(transcript, step)
    if data.get("subagent_trajectories"):
        transcript.notes.append(
            f"{len(data['subagent_trajectories'])} embedded sub-agent trajectories are not shown "
            "(the file is a download)."
        )
    if data.get("continued_trajectory_ref"):
        transcript.notes.append(
            f"The trajectory continues in {as_text(data['continued_trajectory_ref'])}."
        )
    return transcript


def _read_step(transcript: Transcript, step: dict) -> None:
    source = as_text(step.get("source"))
    marks = obj(obj(step.get("extra")).get(OURS))
    text = content_text(step.get("message"))
    results = objects(obj(step.get("observation")).get("results"))
    if source == "agent":
        _read_agent_step(transcript, step, text, results, marks)
        return
    role = as_text(marks.get("role")) or (source if source in ("system", "user") else "event")
    if role == "tool":
        text = "\n".join(content_text(r.get("content")) for r in results)
    elif results:  # a system step's observation (a sub-agent's result, a reset)
        text = "\n\n".join([text, *(content_text(r.get("content")) for r in results)]).strip()
    transcript.add(
        role,
        text,
        title=as_text(marks.get("title")),
        is_error=marks.get("is_error") is True,
        tokens_in=integer(marks.get("tokens_in")),
        tokens_out=integer(marks.get("tokens_out")),
        cost_usd=number(marks.get("cost_usd")),
    )


def _read_agent_step(
    transcript: Transcript, step: dict, text: str, results: list[dict], marks: dict
) -> None:
    metrics = obj(step.get("metrics"))
    turn = transcript.add(
        "assistant",
        text,
        title=as_text(step.get("model_name")),
        tokens_in=integer(metrics.get("prompt_tokens")),
        tokens_out=integer(metrics.get("completion_tokens")),
        cost_usd=number(metrics.get("cost_usd")),
        is_error=marks.get("is_error") is True,
    )
    if step.get("reasoning_content"):
        turn.reasoning = block(step.get("reasoning_content"))
    by_id: dict[str, ToolCall] = {}
    for raw in objects(step.get("tool_calls")):
        call_marks = obj(obj(raw.get("extra")).get(OURS))
        arguments = raw.get("arguments")
        if call_marks.get("arguments_text") and isinstance(arguments, dict):
            shown: Any = arguments.get("input", "")
        else:
            shown = arguments
        call = ToolCall(
            name=as_text(raw.get("function_name")) or "?",
            arguments=block(shown),
            call_id=as_text(raw.get("tool_call_id")),
            is_error=call_marks.get("is_error") is True,
            patch=as_text(call_marks.get("patch")),
            patch_file=as_text(call_marks.get("patch_file")),
            artifact=as_text(call_marks.get("artifact")),
        )
        if isinstance(arguments, dict) and not call_marks.get("arguments_text"):
            call.input = arguments
        turn.tool_calls.append(call)
        by_id[call.call_id] = call
    loose = []
    for result in results:
        answered = by_id.get(as_text(result.get("source_call_id")))
        content = content_text(result.get("content"))
        if answered is not None and answered.result is None:
            answered.result = block(content)
            failed = obj(obj(result.get("extra")).get(OURS)).get("is_error") is True
            answered.is_error = answered.is_error or failed
        else:
            loose.append(content)
    waiting = [c for c in turn.tool_calls if c.result is None]
    if len(loose) == 1 and len(waiting) == 1:
        waiting[0].result = block(loose[0])  # a result that names no call, for the one call
    elif loose:
        # Results of actions that are no tool call (Terminus's keystrokes): one block.
        turn.tool_calls.append(
            ToolCall(name="observation", arguments=block(""), result=block("\n\n".join(loose)))
        )
