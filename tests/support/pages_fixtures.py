"""Builders for results-page tests: suites, tasks, models and attempts with chosen outcomes."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import storages

from runs.models import (
    AgentVariant,
    Attempt,
    AttemptStage,
    AttemptStatus,
    FailureReason,
    ModelConfig,
    Run,
    RunSource,
    RunStatus,
)
from tasks_app.models import Suite, Task, TaskSource

T0 = dt.datetime(2026, 10, 1, 12, 0, tzinfo=dt.UTC)


def make_suite(name: str = "demo", tasks: int = 4, labels=None, **fields) -> Suite:
    suite = Suite.objects.create(name=name, source=TaskSource.SWEBENCH, **fields)
    for i in range(tasks):
        Task.objects.create(
            suite=suite,
            task_id=f"task-{i:03d}",
            repo_url="https://example.org/repo",
            test_command="pytest -q",
            labels=(labels or {}).get(i, ["even" if i % 2 == 0 else "odd"]),
        )
    return suite


def make_model(name: str, variant: str = AgentVariant.LLM) -> ModelConfig:
    return ModelConfig.objects.create(name=name, agent_variant=variant)


def make_run(
    suite: Suite,
    model: ModelConfig,
    *,
    samples: int = 1,
    source=RunSource.HARNESS,
    status=RunStatus.FINISHED,
) -> Run:
    return Run.objects.create(
        suite=suite, model_config=model, samples=samples, source=source, status=status
    )


def make_attempt(
    run: Run,
    task: Task,
    reason: str | None = None,
    *,
    sample: int = 0,
    missing: bool = False,
    finished_at: dt.datetime = T0,
    status: str = AttemptStatus.FINISHED,
    **fields,
) -> Attempt:
    """``missing``: the instance was never attempted (status missing: no reason, no usage)."""
    if missing:
        status, reason = AttemptStatus.MISSING, None
        for name in ("cost_usd", "tokens_in", "tokens_out", "duration_sec", "steps"):
            fields.setdefault(name, None)
    failure = FailureReason.objects.get(code=reason) if reason else None
    is_infra = bool(failure and failure.is_infrastructure)
    return Attempt.objects.create(
        run=run,
        task=task,
        suite=run.suite,
        model_config=run.model_config,
        sample_index=sample,
        status=status,
        failure_reason=failure,
        is_infra=is_infra,
        finished_at=finished_at if status == AttemptStatus.FINISHED else None,
        cost_usd=fields.pop("cost_usd", Decimal("0.10")),
        tokens_in=fields.pop("tokens_in", 1000),
        tokens_out=fields.pop("tokens_out", 100),
        duration_sec=fields.pop("duration_sec", 10.0),
        **fields,
    )


def outcomes(run: Run, results: list[list[str | None]], tasks: list[Task] | None = None) -> None:
    """results[i] lists the reason (None = resolved) of each sample on the i-th task."""
    tasks = tasks or list(Task.objects.for_suite(run.suite).order_by("task_id"))
    for task, samples in zip(tasks, results, strict=False):
        for index, reason in enumerate(samples):
            make_attempt(run, task, reason, sample=index)


def write_artifact(attempt: Attempt, relative: str, data: bytes) -> str:
    if not attempt.artifacts_dir:
        attempt.artifacts_dir = f"t/{attempt.public_id}"
        attempt.save(update_fields=["artifacts_dir"])
    name = f"{attempt.artifacts_dir}/{relative}"
    storages["artifacts"].save(name, ContentFile(data))
    return name


def add_stage(attempt: Attempt, name: str, output_path: str, order: int = 0, exit_code: int = 0):
    return AttemptStage.objects.create(
        attempt=attempt, name=name, order=order, exit_code=exit_code, output_path=output_path
    )


@pytest.fixture
def artifacts_root(settings, tmp_path):
    """Artifacts in a temporary folder (Django resets its storages when STORAGES changes)."""
    root = tmp_path / "artifacts"
    root.mkdir()
    settings.ARTIFACTS_ROOT = root
    settings.STORAGES = {
        **settings.STORAGES,
        "artifacts": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(root)},
        },
    }
    return root
