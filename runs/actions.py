"""Run writes a person asks for, whatever the door: launch, cancel, retry, resume, evaluate.

Each takes the ``actor`` (the account; None for the ``ab`` command, whose events name the OS
user) and the ``door`` it came through, does the write with ``runs.services`` and records the
audit event in the same transaction. The API, the pages, the admin actions and the CLI only
call these and format the answer, so one action leaves the same record through every door.
The right to act is checked before, by the door (``benchsite.accounts.access``).

``runs.services`` keeps the operations themselves, unaudited: the workers, the pipeline and
the imports call them on no one's behalf.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import transaction
from django.http import HttpRequest

from benchsite.accounts.models import Action, Door
from benchsite.accounts.services import audit_event_record
from runs import services
from runs.models import ModelConfig, Run
from tasks_app.models import Suite


def _who(actor, door: Door):
    """What a run's notes say did it: the account, or the command for the CLI."""
    return actor if actor is not None else "ab"


def _record(action: Action, run: Run, *, actor, door: Door, request, details: dict) -> None:
    audit_event_record(
        actor=actor, action=action, door=door, objects=[run], request=request, details=details
    )


def run_launch(
    *,
    suite: Suite,
    model_config: ModelConfig,
    actor,
    door: Door,
    request: HttpRequest | None = None,
    samples: int = 1,
    labels: Sequence[str] | None = None,
    task_ids: Sequence[str] | None = None,
    include_flaky: bool = False,
    backend: str = "",
) -> Run:
    """``runs.services.run_launch``, audited. Raises its ``LaunchError`` (nothing stored)."""
    with transaction.atomic():
        run = services.run_launch(
            suite=suite,
            model_config=model_config,
            samples=samples,
            labels=labels,
            task_ids=task_ids,
            include_flaky=include_flaky,
            backend=backend,
            created_by=actor,
        )
        _record(
            Action.RUN_LAUNCH,
            run,
            actor=actor,
            door=door,
            request=request,
            details=_launch_details(run, samples),
        )
    return run


def runs_launch_many(
    *,
    suite: Suite,
    model_configs: Sequence[ModelConfig],
    actor,
    door: Door,
    request: HttpRequest | None = None,
    samples: int = 1,
    labels: Sequence[str] | None = None,
    include_flaky: bool = False,
) -> list[Run]:
    """One run per configuration, all or none (``runs.services.runs_launch_many``), each
    audited as a launch of its own."""
    with transaction.atomic():
        runs = services.runs_launch_many(
            suite=suite,
            model_configs=model_configs,
            samples=samples,
            labels=labels,
            include_flaky=include_flaky,
            created_by=actor,
        )
        for run in runs:
            _record(
                Action.RUN_LAUNCH,
                run,
                actor=actor,
                door=door,
                request=request,
                details=_launch_details(run, samples),
            )
    return runs


def _launch_details(run: Run, samples: int) -> dict:
    return {
        "suite": run.suite.name,
        "model": run.model_config.name,
        "samples": samples,
        "selection": run.selection,
    }


def run_cancel(*, run: Run, actor, door: Door, request: HttpRequest | None = None) -> int:
    """Cancel ``run`` (``runs.services.run_cancel``); returns the queued attempts cancelled.
    A run already final is left alone and nothing is recorded: ask ``run.is_final`` first to
    say so."""
    with transaction.atomic():
        run.refresh_from_db(fields=["status"])
        if run.is_final:
            return 0
        count = services.run_cancel(run=run, by=_who(actor, door))
        details = {"cancelled_attempts": count}
        _record(Action.RUN_CANCEL, run, actor=actor, door=door, request=request, details=details)
    return count


def run_retry(*, run: Run, actor, door: Door, request: HttpRequest | None = None) -> int:
    """Queue again the attempts that ended for infrastructure (``run_retry_infra``)."""
    with transaction.atomic():
        count = services.run_retry_infra(run=run, by=_who(actor, door))
        details = {"requeued_attempts": count}
        _record(Action.RUN_RETRY, run, actor=actor, door=door, request=request, details=details)
    return count


def run_resume(*, run: Run, actor, door: Door, request: HttpRequest | None = None) -> int:
    """Re-send the messages of the run's queued attempts (``runs.services.run_resume``)."""
    with transaction.atomic():
        count = services.run_resume(run=run)
        details = {"resent_attempts": count}
        _record(Action.RUN_RESUME, run, actor=actor, door=door, request=request, details=details)
    return count


def run_evaluate(*, run: Run, actor, door: Door, request: HttpRequest | None = None) -> int:
    """Queue the run's not-evaluated attempts (``runs.services.run_evaluate``)."""
    with transaction.atomic():
        count = services.run_evaluate(run=run, by=_who(actor, door))
        details = {"queued_attempts": count}
        _record(Action.RUN_EVALUATE, run, actor=actor, door=door, request=request, details=details)
    return count
