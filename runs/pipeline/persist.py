"""Database writes of the pipeline: stage rows as they finish, the attempt's final state."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from django.db import transaction
from django.utils import timezone

from runs.agents.contract import AgentOutcome
from runs.models import FINAL_STATES, Attempt, AttemptStage, AttemptStatus
from runs.pipeline.outcome import Verdict
from runs.pipeline.stages import StageResult


def attempt_stage_add(
    *, attempt: Attempt, stage: StageResult, order: int, output_path: str
) -> AttemptStage:
    """Record one finished stage (pages show them while the attempt still runs)."""
    return AttemptStage.objects.create(
        attempt=attempt,
        name=stage.name,
        order=order,
        command=stage.command,
        exit_code=stage.exit_code,
        duration_sec=round(stage.duration_sec, 3),
        timed_out=stage.timed_out,
        output_truncated=stage.truncated,
        output_path=output_path,
        started_at=stage.started_at,
    )


def attempt_set_artifacts_dir(*, attempt: Attempt, artifacts_dir: str) -> None:
    attempt.artifacts_dir = artifacts_dir
    Attempt.objects.filter(pk=attempt.pk).update(artifacts_dir=artifacts_dir)


@dataclass
class AttemptResult:
    """Everything the pipeline learned, ready to store on the attempt."""

    verdict: Verdict
    status: str = AttemptStatus.FINISHED
    duration_sec: float = 0.0
    agent: AgentOutcome | None = None
    final_patch: str | None = None  # None: no diff was taken (no agent stage)
    lines_changed: int = 0
    files_touched: list[str] = field(default_factory=list)
    grade: str = ""
    test_results: dict = field(default_factory=dict)


_FIELDS = [
    "status",
    "failure_reason",
    "failure_stage",
    "is_infra",
    "is_timeout",
    "is_empty_run",
    "exit_code",
    "duration_sec",
    "error_text",
    "error_fingerprint",
    "error_kind",
    "stderr_tail",
    "agent_exit_code",
    "agent_signal",
    "finished_at",
    "heartbeat_at",
    "tokens_in",
    "tokens_out",
    "cost_usd",
    "tool_calls",
    "steps",
    "final_patch",
    "lines_changed",
    "files_touched",
    "grade",
    "test_results",
]


def attempt_finish(*, attempt: Attempt, result: AttemptResult) -> Attempt:
    """Store the attempt's final state. An attempt someone else already finished (a reaper,
    a cancel) keeps that state: the first final word wins."""
    verdict = result.verdict
    with transaction.atomic():
        current = Attempt.objects.select_for_update().get(pk=attempt.pk)
        if current.status in FINAL_STATES:
            return current
        now = timezone.now()
        attempt.status = result.status
        attempt.failure_reason_id = verdict.reason.value if verdict.reason else None
        attempt.failure_stage = verdict.stage.value if verdict.stage else ""
        attempt.is_infra = verdict.is_infra
        attempt.is_timeout = verdict.is_timeout
        attempt.is_empty_run = verdict.is_empty_run
        attempt.exit_code = verdict.exit_code
        attempt.duration_sec = round(result.duration_sec, 3)
        attempt.error_text = verdict.error_text
        attempt.error_fingerprint = verdict.error_fingerprint
        attempt.stderr_tail = verdict.stderr_tail
        attempt.finished_at = now
        attempt.heartbeat_at = now
        if result.agent is not None:
            agent = result.agent
            attempt.tokens_in = agent.tokens_in
            attempt.tokens_out = agent.tokens_out
            attempt.cost_usd = Decimal(str(round(agent.cost_usd, 6)))
            attempt.tool_calls = agent.tool_calls
            attempt.steps = agent.steps
            attempt.error_kind = agent.llm_error_kind or ""
            attempt.agent_exit_code = agent.exit_code
            attempt.agent_signal = agent.signal
        if result.final_patch is not None:
            attempt.final_patch = result.final_patch
            attempt.lines_changed = result.lines_changed
            attempt.files_touched = result.files_touched
        if result.grade:
            attempt.grade = result.grade
            attempt.test_results = result.test_results
        attempt.save(update_fields=_FIELDS)
    return attempt
