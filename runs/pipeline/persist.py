"""Database writes of the pipeline: stage rows as they finish, and what it learned
(``AttemptResult``), which ``runs.lifecycle.attempt_finish`` stores as the final state."""

from __future__ import annotations

from dataclasses import dataclass, field

from runs.agents.contract import AgentOutcome
from runs.models import Attempt, AttemptStage
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
    cancelled: bool = False  # stopped on a cancel (INTERRUPTED): ends cancelled, not finished
    duration_sec: float = 0.0
    agent: AgentOutcome | None = None
    final_patch: str | None = None  # None: no diff was taken (no agent stage)
    lines_changed: int = 0
    files_touched: list[str] = field(default_factory=list)
    grade: str = ""
    test_results: dict = field(default_factory=dict)
