"""One-off runs for the command line: a run of one attempt, created already running."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from runs.model_configs import upstream_audit, upstream_changes
from runs.models import (
    AgentVariant,
    Attempt,
    AttemptStatus,
    ModelConfig,
    Run,
    RunSource,
    RunStatus,
)
from runs.pipeline.record import model_snapshot, provenance
from tasks_app.models import Task

# Keyed by str: the variants are TextChoices (str), and a variant comes in as a str.
_DESCRIPTIONS: dict[str, str] = {
    AgentVariant.BASELINE: "Baseline validation: clone, setup and the failing tests, no agent.",
    AgentVariant.SCRIPTED: "The deterministic scripted agent (no model).",
    AgentVariant.ORACLE: "Applies the task's reference solution (gold patch).",
    AgentVariant.NOP: "Does nothing: the tests must still fail.",
}


def model_config_for_variant(variant: str, **overrides) -> ModelConfig:
    """The model configuration named after ``variant`` (or ``name=``), created on first use.

    Other keyword arguments are ModelConfig fields; on an existing configuration they are
    updated when they differ. A configuration of that name with another variant is an error.
    """
    if variant not in AgentVariant.values:
        raise ValueError(
            f"unknown agent variant {variant!r}; choose one of {', '.join(AgentVariant.values)}"
        )
    name = overrides.pop("name", variant)
    try:
        with transaction.atomic():
            return _config_for_variant(variant, name, overrides)
    except ValidationError as exc:  # ModelConfig.save: a key variable or upstream not listed
        raise ValueError(field_messages(exc)) from None


def field_messages(exc: ValidationError) -> str:
    """``field: message; ...`` of a model's ValidationError, for a command-line error."""
    if not hasattr(exc, "error_dict"):
        return "; ".join(exc.messages)
    return "; ".join(f"{field}: {' '.join(m)}" for field, m in exc.message_dict.items())


def _config_for_variant(variant: str, name: str, overrides: dict) -> ModelConfig:
    config, created = ModelConfig.objects.get_or_create(
        name=name,
        defaults={
            "agent_variant": variant,
            "description": _DESCRIPTIONS.get(variant, ""),
            **overrides,
        },
    )
    if created:
        _audit_upstream(config, before=None)
        return config
    if config.agent_variant != variant:
        raise ValueError(
            f"model configuration {name!r} exists with variant {config.agent_variant!r}, "
            f"not {variant!r}"
        )
    before = ModelConfig(base_url=config.base_url, api_key_env=config.api_key_env)
    changed = [k for k, v in overrides.items() if getattr(config, k) != v]
    for key in changed:
        setattr(config, key, overrides[key])
    if changed:
        config.save(update_fields=changed)
        _audit_upstream(config, before=before)
    return config


def _audit_upstream(config: ModelConfig, *, before: ModelConfig | None) -> None:
    """The command line is the operator's door (whoever runs ``ab`` on the worker reads its
    environment anyway): no account to check, but the change is audited like the others."""
    from benchsite.accounts.models import Door

    changes = upstream_changes(config, before=before)
    upstream_audit(None, config, changes, door=Door.CLI)


def run_create(
    *,
    suite,
    model_config: ModelConfig,
    source: str,
    selection: dict,
    status: str = RunStatus.RUNNING,
) -> Run:
    """A run stamped with what reproduces it (harness version, git revision, packages)."""
    origin = provenance()
    return Run.objects.create(
        suite=suite,
        model_config=model_config,
        samples=1,
        selection=selection,
        source=source,
        status=status,
        started_at=timezone.now() if status == RunStatus.RUNNING else None,
        harness_version=origin.harness_version,
        git_revision=origin.git_revision,
        package_versions=origin.package_versions,
        config_snapshot=model_snapshot(model_config),
    )


def attempt_create_adhoc(
    *, task: Task, model_config: ModelConfig, source: str = RunSource.HARNESS
) -> Attempt:
    """A run of one attempt on ``task``, both already running (claimed by the caller)."""
    now = timezone.now()
    with transaction.atomic():
        run = run_create(
            suite=task.suite,
            model_config=model_config,
            source=source,
            selection={"tasks": [task.task_id]},
        )
        return Attempt.objects.create(
            run=run,
            task=task,
            suite=task.suite,
            model_config=model_config,
            sample_index=0,
            task_revision=task.revision,
            status=AttemptStatus.RUNNING,
            started_at=now,
            heartbeat_at=now,
        )


def run_close(*, run: Run, status: str = RunStatus.FINISHED) -> Run:
    """End a run driven from the command line and refresh its cached totals."""
    from runs.services import run_refresh_totals

    with transaction.atomic():
        Run.objects.filter(pk=run.pk).update(status=status, finished_at=timezone.now())
        run.refresh_from_db()
        run_refresh_totals(run)
    return run
