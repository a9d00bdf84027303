"""The versioned per-attempt record written as ``run.json``: enough to audit and reproduce.

Everything an attempt did is here (task, model configuration, every stage's command, exit
code, duration and log file, the baseline checks, the outcome), with the harness version, its
git revision and the package versions it ran with. Secrets never enter it: the model
configuration names the environment variable that holds the key, not the key.
"""

from __future__ import annotations

import functools
import platform
import subprocess
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from typing import Any

from django.conf import settings

from runs.models import Attempt, ModelConfig
from runs.pipeline.stages import StageResult

RECORD_SCHEMA_VERSION = Attempt.SCHEMA_VERSION
_PACKAGES = ("agentbench-site", "django", "celery", "docker", "openai", "pydantic", "pyyaml")


@dataclass(frozen=True)
class Provenance:
    harness_version: str
    git_revision: str
    package_versions: dict[str, str]
    python: str
    platform: str


@functools.cache
def provenance() -> Provenance:
    return Provenance(
        harness_version=settings.HARNESS_VERSION,
        git_revision=harness_git_revision(),
        package_versions=package_versions(),
        python=platform.python_version(),
        platform=platform.platform(terse=True),
    )


def harness_git_revision() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(settings.BASE_DIR), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def package_versions() -> dict[str, str]:
    versions = {}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


@dataclass
class StageRecord:
    name: str
    stage: str
    command: str
    exit_code: int | None
    duration_sec: float
    timed_out: bool
    output_truncated: bool
    output_path: str
    reason: str | None
    note: str
    started_at: str
    # False for stages kept for the record that do not decide the outcome (the baseline
    # re-run; the agent's own stop reason when the final tests decide).
    counts: bool

    @classmethod
    def of(cls, stage: StageResult, output_path: str) -> StageRecord:
        return cls(
            name=stage.name,
            stage=stage.stage.value,
            command=stage.command,
            exit_code=stage.exit_code,
            duration_sec=round(stage.duration_sec, 3),
            timed_out=stage.timed_out,
            output_truncated=stage.truncated,
            output_path=output_path,
            reason=stage.reason.value if stage.reason else None,
            note=stage.note,
            started_at=stage.started_at.isoformat(),
            counts=stage.counts,
        )


@dataclass
class BaselineRecord:
    ran: bool = False
    valid: bool | None = None
    exit_codes: list[int] = field(default_factory=list)
    reruns: int = 0
    # Two runs of the unchanged repository disagreed: the task's tests are not deterministic.
    flaky_baseline: bool = False
    note: str = ""


@dataclass
class OutcomeRecord:
    status: str
    success: bool
    failure_reason: str | None
    failure_stage: str
    is_infra: bool
    is_timeout: bool
    is_empty_run: bool
    exit_code: int | None
    duration_sec: float
    error_text: str
    error_fingerprint: str
    error_kind: str
    tokens_in: int
    tokens_out: int
    cost_usd: float | None  # None: unknown (a price is missing: ``cost_note``), never $0
    tool_calls: int
    steps: int
    lines_changed: int
    files_touched: list[str]
    final_patch_path: str
    grade: str
    test_results: dict
    # An agent CLI's process: its exit code and the signal that killed it, if one did.
    agent_exit_code: int | None = None
    agent_signal: int | None = None
    # Where the cost comes from (runs.usage_fields.CostBasis) and why it is unknown, if it is.
    cost_basis: str = ""
    cost_note: str = ""

    @classmethod
    def of(cls, attempt: Attempt, final_patch_path: str) -> OutcomeRecord:
        return cls(
            status=attempt.status,
            success=attempt.failure_reason_id is None,
            failure_reason=attempt.failure_reason_id,
            failure_stage=attempt.failure_stage,
            is_infra=attempt.is_infra,
            is_timeout=attempt.is_timeout,
            is_empty_run=attempt.is_empty_run,
            exit_code=attempt.exit_code,
            duration_sec=round(attempt.duration_sec or 0.0, 3),
            error_text=attempt.error_text,
            error_fingerprint=attempt.error_fingerprint,
            error_kind=attempt.error_kind,
            tokens_in=attempt.tokens_in or 0,
            tokens_out=attempt.tokens_out or 0,
            cost_usd=None if attempt.cost_usd is None else float(attempt.cost_usd),
            tool_calls=attempt.tool_calls or 0,
            steps=attempt.steps or 0,
            lines_changed=attempt.lines_changed,
            files_touched=list(attempt.files_touched or []),
            final_patch_path=final_patch_path,
            grade=attempt.grade,
            test_results=dict(attempt.test_results or {}),
            agent_exit_code=attempt.agent_exit_code,
            agent_signal=attempt.agent_signal,
            cost_basis=attempt.cost_basis,
            cost_note=attempt.cost_note,
        )


@dataclass
class AttemptRecord:
    schema_version: str
    kind: str
    written_at: str
    provenance: Provenance
    run: dict[str, Any]
    attempt: dict[str, Any]
    task: dict[str, Any]
    model: dict[str, Any]
    sandbox: dict[str, Any]
    stages: list[StageRecord]
    baseline: BaselineRecord
    outcome: OutcomeRecord

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def model_snapshot(config: ModelConfig) -> dict[str, Any]:
    return {
        "name": config.name,
        "slug": config.slug,
        "agent_variant": config.agent_variant,
        "model_name": config.model_name,
        "base_url": config.base_url,
        "api_key_env": config.api_key_env,
        "sampling": config.sampling_params(),
        "budgets": {
            "max_steps": config.max_steps,
            "max_time_sec": config.max_time_sec,
            "max_tokens": config.max_tokens,
            "max_cost_usd": float(config.max_cost_usd) if config.max_cost_usd else None,
            "repeated_failure_threshold": config.repeated_failure_threshold,
            "max_model_calls": config.max_model_calls,
        },
        "strict_patch": config.strict_patch,
        "cli_agent": config.cli_agent,
    }


def attempt_record(
    *,
    attempt: Attempt,
    stages: list[tuple[StageResult, str]],
    baseline: BaselineRecord,
    sandbox: dict[str, Any],
    final_patch_path: str,
) -> AttemptRecord:
    task = attempt.task
    run = attempt.run
    return AttemptRecord(
        schema_version=RECORD_SCHEMA_VERSION,
        kind="attempt",
        written_at=datetime.now(UTC).isoformat(),
        provenance=provenance(),
        run={
            "public_id": str(run.public_id),
            "suite": attempt.suite.name,
            "source": run.source,
            "artifacts_dir": run.artifacts_dir,
        },
        attempt={
            "public_id": str(attempt.public_id),
            "sample_index": attempt.sample_index,
            "task_revision": attempt.task_revision,
            "started_at": attempt.started_at.isoformat() if attempt.started_at else None,
            "finished_at": attempt.finished_at.isoformat() if attempt.finished_at else None,
            "artifacts_dir": attempt.artifacts_dir,
        },
        task={
            "task_id": task.task_id,
            "suite": attempt.suite.name,
            "source": task.source,
            "revision": task.revision,
            "spec_hash": task.spec_hash,
            "spec_path": task.spec_path,
            "repo_url": task.repo_url,
            "repo_commit": task.repo_commit,
            "docker_image": task.docker_image,
            "workdir": task.workdir,
            "timeout_sec": task.timeout_sec,
            "setup_commands": list(task.setup_commands or []),
            "setup_network": task.setup_network,
            "test_command": task.test_command,
            "labels": list(task.labels or []),
        },
        model=model_snapshot(attempt.model_config),
        sandbox=sandbox,
        stages=[StageRecord.of(stage, path) for stage, path in stages],
        baseline=baseline,
        outcome=OutcomeRecord.of(attempt, final_patch_path),
    )
