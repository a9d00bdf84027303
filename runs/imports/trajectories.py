"""What an imported run keeps from an agent's trajectory: the patch, the cost, the calls.

Three formats, each read from the parsed JSON of one instance (the file itself is stored
unchanged as the attempt's artifact, under the name the attempt page's viewer expects):

* mini-swe-agent ``<id>.traj.json`` (``trajectory_format`` "mini-swe-agent-1"/"-1.1"):
  ``info.submission`` the patch, ``info.exit_status``, ``info.model_stats`` (``instance_cost``,
  ``api_calls``), ``messages`` (tokens from each response's ``usage`` when present);
* SWE-agent ``<id>.traj``: ``trajectory`` (one step per action), ``history``, ``info``
  (``submission``, ``exit_status``, ``model_stats`` with ``tokens_sent``/``tokens_received``);
* an Inspect AI sample (``samples/<id>_epoch_<n>.json`` of an ``.eval`` log): ``scores`` the
  outcome, ``messages`` the conversation, ``model_usage`` the tokens, ``error``/``limit``;
* an ATIF trajectory (Harbor's ``agent/trajectory.json``, or our own export): checked against
  the format (``runs.transcript.atif.validate``); ``final_metrics`` (else the steps' metrics)
  the tokens and cost, its agent steps the calls, Harbor's trial ``result.json`` beside it
  the outcome (``verifier_result.rewards``, ``exception_info``); our export's
  ``extra.agentbench`` the patch and exit status.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Literal

from runs.imports.numbers import Numbers
from runs.transcript import atif, mini_swe_agent_command
from tasks_app.swebench.errors import Problem


class TrajFormat(enum.StrEnum):
    MINI_SWE_AGENT = "mini-swe-agent"
    SWE_AGENT = "swe-agent"
    INSPECT = "inspect"
    ATIF = "atif"


# The artifact name of each format (agreed with the attempt page's transcript viewer).
ARTIFACT_NAMES: dict[TrajFormat, str] = {
    TrajFormat.MINI_SWE_AGENT: "trajectory.traj.json",
    TrajFormat.SWE_AGENT: "trajectory.traj",
    TrajFormat.INSPECT: "trajectory.inspect.json",
    TrajFormat.ATIF: atif.FILE,
}
REPORT_ARTIFACT = "report.json"


class NotThisFormat(ValueError):
    """The JSON parsed but is not the format its name suggests; says what was expected."""

    def __init__(self, where: str, expected: str):
        self.problem = Problem(where, expected)
        super().__init__(str(self.problem))


@dataclass(frozen=True, slots=True)
class TrajectoryFacts:
    format: TrajFormat
    instance_id: str
    exit_status: str = ""
    submission: str | None = None
    cost_usd: float | None = None  # None: the trajectory records no cost
    api_calls: int = 0
    tool_calls: int = 0
    tokens_in: int | None = None  # None: no token counts recorded
    tokens_out: int | None = None
    duration_sec: float | None = None
    epoch: int = 1
    # When the agent's last model response came (unix time), when the trajectory says.
    ended_at: float | None = None
    # Inspect only: the scorer's verdict (True resolved, False not, None no score) and error.
    resolved: bool | None = None
    error: str = ""
    # The model the trajectory says the agent called (mini-swe-agent's config, ATIF's agent,
    # Inspect's model usage), for the imported system's configuration page.
    model: str = ""


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def read_mini_swe_agent(data: Any, where: str, instance_id: str) -> TrajectoryFacts:
    """Facts of a mini-swe-agent trajectory; ``NotThisFormat`` when the shape differs."""
    if not isinstance(data, dict) or not isinstance(data.get("info"), dict):
        raise NotThisFormat(where, "a mini-swe-agent trajectory needs an object with 'info'")
    fmt = data.get("trajectory_format", "")
    if not (isinstance(fmt, str) and fmt.startswith("mini-swe-agent")):
        raise NotThisFormat(where, f"trajectory_format must be mini-swe-agent-1, got {fmt!r}")
    info = data["info"]
    stats = _dict(info.get("model_stats"))
    messages = _list(data.get("messages"))
    numbers = Numbers(where)
    assistant = [m for m in messages if isinstance(m, dict) and m.get("role") == "assistant"]
    tokens_in = tokens_out = 0
    counted = False
    created: list[float] = []
    for index, message in enumerate(messages):
        if not (isinstance(message, dict) and message.get("role") == "assistant"):
            continue
        usage = _usage(message)
        at = f"messages[{index}].extra.response"
        counted |= "prompt_tokens" in usage or "completion_tokens" in usage
        tokens_in += int(
            numbers.number(usage.get("prompt_tokens"), f"{at}.usage.prompt_tokens", "tokens")
        )
        tokens_out += int(
            numbers.number(
                usage.get("completion_tokens"), f"{at}.usage.completion_tokens", "tokens"
            )
        )
        response = _dict(_dict(message.get("extra")).get("response"))
        stamp = numbers.number(response.get("created"), f"{at}.created", "time")
        if stamp:
            created.append(stamp)
    cost = numbers.get(stats.get("instance_cost"), "info.model_stats.instance_cost", "cost")
    calls = int(numbers.number(stats.get("api_calls"), "info.model_stats.api_calls", "count"))
    counts = (
        numbers.total(tokens_in, "tokens in (the messages' prompt_tokens)", "tokens"),
        numbers.total(tokens_out, "tokens out (the messages' completion_tokens)", "tokens"),
    )
    numbers.done()
    del counts
    return TrajectoryFacts(
        format=TrajFormat.MINI_SWE_AGENT,
        instance_id=_text(data.get("instance_id")) or instance_id,
        exit_status=_text(info.get("exit_status")) or "",
        submission=_text(info.get("submission")),
        cost_usd=cost,
        api_calls=calls,
        # The commands that ran: a turn with no or several bash blocks ran nothing (a format
        # error), counted as the transcript viewer counts them.
        tool_calls=sum(
            1 for m in assistant if mini_swe_agent_command(m.get("content")) is not None
        ),
        tokens_in=tokens_in if counted else None,
        tokens_out=tokens_out if counted else None,
        # From the first model response to the last: the run's wall time, less its last step.
        duration_sec=max(created) - min(created) if len(created) > 1 else None,
        ended_at=max(created) if created else None,
        model=_text(_dict(_dict(info.get("config")).get("model")).get("model_name")) or "",
    )


def _usage(message: dict) -> dict:
    extra = message.get("extra")
    response = extra.get("response") if isinstance(extra, dict) else None
    usage = response.get("usage") if isinstance(response, dict) else None
    return usage if isinstance(usage, dict) else {}


def read_swe_agent(data: Any, where: str, instance_id: str) -> TrajectoryFacts:
    """Facts of a SWE-agent ``.traj``; ``NotThisFormat`` when the shape differs."""
    if not (
        isinstance(data, dict)
        and isinstance(data.get("info"), dict)
        and isinstance(data.get("trajectory"), list)
    ):
        raise NotThisFormat(where, "a SWE-agent .traj needs an object with 'trajectory' and 'info'")
    info = data["info"]
    stats = _dict(info.get("model_stats"))
    steps = data["trajectory"]
    numbers = Numbers(where)
    at = "info.model_stats"
    cost = numbers.get(stats.get("instance_cost"), f"{at}.instance_cost", "cost")
    calls = int(numbers.number(stats.get("api_calls"), f"{at}.api_calls", "count"))
    tokens_in = numbers.get(stats.get("tokens_sent"), f"{at}.tokens_sent", "tokens")
    tokens_out = numbers.get(stats.get("tokens_received"), f"{at}.tokens_received", "tokens")
    seconds = sum(
        numbers.number(s.get("execution_time"), f"trajectory[{i}].execution_time", "seconds")
        for i, s in enumerate(steps)
        if isinstance(s, dict)
    )
    duration = numbers.total(seconds, "the steps' execution_time", "seconds")
    numbers.done()
    return TrajectoryFacts(
        format=TrajFormat.SWE_AGENT,
        instance_id=instance_id,
        exit_status=_text(info.get("exit_status")) or "",
        submission=_text(info.get("submission")),
        cost_usd=cost,
        api_calls=calls or len(steps),
        tool_calls=sum(1 for s in steps if isinstance(s, dict) and s.get("action")),
        tokens_in=None if tokens_in is None else int(tokens_in),
        tokens_out=None if tokens_out is None else int(tokens_out),
        duration_sec=duration or None,
    )


CORRECT_VALUES = frozenset({"C", "correct", "resolved", "pass", "PASS"})
INCORRECT_VALUES = frozenset({"I", "incorrect", "unresolved", "fail", "FAIL", "P", "N"})


def read_inspect_sample(data: Any, where: str) -> TrajectoryFacts:
    """Facts of one Inspect AI sample; ``NotThisFormat`` when it is not one."""
    if not (isinstance(data, dict) and "id" in data and isinstance(data.get("messages"), list)):
        raise NotThisFormat(where, "an Inspect sample needs 'id' and 'messages'")
    scores = _dict(data.get("scores"))
    resolved: bool | None = None
    patch: str | None = None
    for score in scores.values():
        if not isinstance(score, dict):
            continue
        verdict = _verdict(score.get("value"))
        if verdict is not None:
            resolved = verdict if resolved is None else resolved and verdict
        metadata = _dict(score.get("metadata"))
        patch = patch or _text(metadata.get("model_patch"))
    tokens_in = tokens_out = 0
    numbers = Numbers(where)
    usage = _dict(data.get("model_usage"))
    for model, per_model in usage.items():
        if isinstance(per_model, dict):
            at = f"model_usage.{model}"
            tokens_in += int(
                numbers.number(per_model.get("input_tokens"), f"{at}.input_tokens", "tokens")
            )
            tokens_out += int(
                numbers.number(per_model.get("output_tokens"), f"{at}.output_tokens", "tokens")
            )
    counted = any(isinstance(v, dict) for v in usage.values())
    numbers.total(tokens_in, "model_usage (input_tokens in all)", "tokens")
    numbers.total(tokens_out, "model_usage (output_tokens in all)", "tokens")
    seconds = numbers.number(data.get("total_time"), "total_time", "seconds")
    messages = [m for m in data["messages"] if isinstance(m, dict)]
    assistant = [m for m in messages if m.get("role") == "assistant"]
    limit = _dict(data.get("limit"))
    error = _dict(data.get("error"))
    epoch = data.get("epoch")
    if isinstance(epoch, int) and not isinstance(epoch, bool) and epoch > 0:
        numbers.total(epoch, "epoch", "index")
    numbers.done()
    return TrajectoryFacts(
        format=TrajFormat.INSPECT,
        instance_id=str(data["id"]),
        exit_status=f"limit:{limit['type']}" if isinstance(limit.get("type"), str) else "",
        submission=patch,
        api_calls=len(assistant),
        tool_calls=sum(len(m.get("tool_calls") or []) for m in assistant),
        tokens_in=tokens_in if counted else None,
        tokens_out=tokens_out if counted else None,
        duration_sec=seconds or None,
        epoch=epoch if isinstance(epoch, int) and epoch > 0 else 1,
        resolved=resolved,
        model=next((str(m) for m in usage if isinstance(m, str)), ""),
        error=str(error.get("message") or "")[:2000],
    )


def _verdict(value: Any) -> bool | None:
    """A score value as resolved or not: "C"/"I", 1/0, true/false; None when it says neither."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return value >= 1
    if isinstance(value, str):
        if value in CORRECT_VALUES:
            return True
        if value in INCORRECT_VALUES:
            return False
    return None


def read_atif(
    data: Any, where: str, instance_id: str, trial: dict | None = None, sample: int = 0
) -> TrajectoryFacts:
    """Facts of an ATIF trajectory; ``NotThisFormat`` naming each field that breaks the format.

    ``trial`` is Harbor's trial ``result.json`` beside it, when there is one: its reward
    decides the outcome (1 resolved, 0 not), its ``exception_info`` is an error.
    """
    problems = atif.validate(data)
    if problems:
        shown = "; ".join(problems[:5]) + (
            f" (and {len(problems) - 5} more)" if problems[5:] else ""
        )
        raise NotThisFormat(where, f"not a valid ATIF trajectory: {shown}")
    steps = [s for s in data["steps"] if isinstance(s, dict)]
    agent = [(i, s) for i, s in enumerate(data["steps"]) if isinstance(s, dict)]
    agent = [(i, s) for i, s in agent if s.get("source") == "agent"]
    agent_steps = [s for _, s in agent]
    final = _dict(data.get("final_metrics"))
    ours = _dict(_dict(data.get("extra")).get(atif.OURS))
    numbers = Numbers(where)

    def steps_sum(name: str, kind: Literal["cost", "tokens"]) -> float:
        return sum(
            numbers.number(_dict(s.get("metrics")).get(name), f"steps[{i}].metrics.{name}", kind)
            for i, s in agent
        )

    def final_or_steps(name: str, step_name: str, kind: Literal["cost", "tokens"]) -> float:
        total = numbers.number(final.get(name), f"final_metrics.{name}", kind)
        summed = steps_sum(step_name, kind)
        if not total:
            numbers.total(summed, f"the steps' metrics.{step_name} in all", kind)
        return total or summed

    cost = final_or_steps("total_cost_usd", "cost_usd", "cost")
    tokens_in = final_or_steps("total_prompt_tokens", "prompt_tokens", "tokens")
    tokens_out = final_or_steps("total_completion_tokens", "completion_tokens", "tokens")
    calls = sum(
        int(numbers.number(s.get("llm_call_count"), f"steps[{i}].llm_call_count", "count"))
        if s.get("llm_call_count") is not None
        else 1
        for i, s in agent
    )
    api_calls = int(numbers.number(ours.get("api_calls"), f"extra.{atif.OURS}.api_calls", "count"))
    numbers.total(sample, f"extra.{atif.OURS}.sample", "index")
    stamps = sorted(str(s["timestamp"]) for s in steps if isinstance(s.get("timestamp"), str))
    duration = _seconds(stamps[0], stamps[-1]) if len(stamps) > 1 else None
    if duration is not None:
        numbers.total(duration, "steps' timestamps (the last less the first)", "seconds")
    ended = _unix(stamps[-1]) if stamps else None
    if ended is not None:
        numbers.total(ended, "steps' last timestamp", "time")
    numbers.done()
    trial = trial or {}
    rewards = _dict(_dict(trial.get("verifier_result")).get("rewards"))
    reward = rewards.get("reward", next(iter(rewards.values()), None) if rewards else None)
    exception = _dict(trial.get("exception_info"))
    return TrajectoryFacts(
        format=TrajFormat.ATIF,
        instance_id=instance_id,
        exit_status=_text(ours.get("exit_status")) or "",
        submission=_text(ours.get("submission")),
        cost_usd=cost,
        api_calls=api_calls or calls,
        tool_calls=sum(len(s.get("tool_calls") or []) for s in agent_steps),
        tokens_in=int(tokens_in),
        tokens_out=int(tokens_out),
        duration_sec=duration,
        # Its last step's time dates the run when nothing else does (``RunFolder.run_date``).
        ended_at=ended,
        epoch=sample + 1,
        resolved=_verdict(reward) if reward is not None else None,
        model=_text(_dict(data.get("agent")).get("model_name")) or "",
        error=" ".join(
            str(exception.get(k) or "") for k in ("exception_type", "exception_message")
        ).strip()[:2000],
    )


def is_harbor_trial_result(data: Any) -> bool:
    """Harbor's per-trial ``result.json`` (a TrialResult): the task, the trial, the verdict."""
    return isinstance(data, dict) and "trial_name" in data and "task_name" in data


def _unix(stamp: str) -> float | None:
    """An ISO time (UTC when it names no zone) as unix time; None when it is not one."""
    from datetime import UTC, datetime

    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


def _seconds(first: str, last: str) -> float | None:
    from datetime import datetime

    try:
        start = datetime.fromisoformat(first.replace("Z", "+00:00"))
        end = datetime.fromisoformat(last.replace("Z", "+00:00"))
    except ValueError:
        return None
    return max((end - start).total_seconds(), 0.0)
