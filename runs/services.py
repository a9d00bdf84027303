"""Writes on runs and attempts: launch, cancel, retry, resume, bookkeeping, fail-fast.

Every service is keyword-only, runs inside ``transaction.atomic`` and queues Celery work with
``transaction.on_commit``, so a worker never sees an attempt id before its row is committed.
Celery messages carry only the attempt id; the worker re-reads everything else. An attempt's
status moves only through ``runs.lifecycle``.
"""

from __future__ import annotations

import logging
import subprocess
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import lru_cache
from importlib import metadata

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from runs.failfast import failfast_settings
from runs.lifecycle import attempt_requeue, attempts_cancel_queued, attempts_queue_for_evaluation
from runs.models import (
    FINAL_STATES,
    Attempt,
    AttemptStatus,
    ModelConfig,
    Run,
    RunBackend,
    RunSource,
    RunStatus,
)
from tasks_app.models import Suite, Task

log = logging.getLogger(__name__)

# In progress: a run with any of these is not done. NOT_EVALUATED is neither final nor in
# progress (nothing will happen to it until someone asks), so it does not hold a run open.
NON_FINAL = (AttemptStatus.QUEUED, AttemptStatus.RUNNING)
# Package versions recorded on every run, for reproducibility.
RECORDED_PACKAGES = (
    "agentbench-site",
    "django",
    "celery",
    "kombu",
    "openai",
    "docker",
    "pyyaml",
)


class LaunchError(ValueError):
    """A launch request that selects nothing or names what does not exist."""


# --- Launch ---------------------------------------------------------------------------------


def run_launch(
    *,
    suite: Suite,
    model_config: ModelConfig,
    samples: int = 1,
    labels: Sequence[str] | None = None,
    task_ids: Sequence[str] | None = None,
    include_flaky: bool = False,
    backend: str = "",
    created_by=None,
) -> Run:
    """Create a run (selected tasks x one model configuration x ``samples``) and queue it;
    ``backend`` ("docker", "bwrap"; "" for the worker's default) is the sandbox its attempts use.

    Every attempt is created ``queued`` in one transaction; one Celery task per attempt is
    sent once it commits. Tasks labelled ``flaky`` are left out unless ``include_flaky``.
    """
    if samples < 1:
        raise LaunchError(f"samples must be at least 1, got {samples}")
    if backend not in RunBackend.values:
        raise LaunchError(f"backend: expected docker or bwrap, got {backend!r}")
    tasks = _select_tasks(suite, labels=labels, task_ids=task_ids, include_flaky=include_flaky)
    selection = {
        "labels": list(labels or []),
        "task_ids": [t.task_id for t in tasks],
        "include_flaky": include_flaky,
    }
    with transaction.atomic():
        run = Run.objects.create(
            suite=suite,
            model_config=model_config,
            samples=samples,
            selection=selection,
            backend=backend,
            source=RunSource.HARNESS,
            status=RunStatus.QUEUED,
            created_by=created_by,
            harness_version=settings.HARNESS_VERSION,
            git_revision=_git_revision(),
            package_versions=_package_versions(),
            config_snapshot=_config_snapshot(model_config),
        )
        # Sample-major order: the queue interleaves tasks, so the first failures fail-fast
        # sees come from different tasks rather than k copies of one.
        attempts = Attempt.objects.bulk_create(
            [
                Attempt(
                    run=run,
                    task=task,
                    suite=suite,
                    model_config=model_config,
                    sample_index=index,
                    task_revision=task.revision,
                    status=AttemptStatus.QUEUED,
                )
                for index in range(samples)
                for task in tasks
            ]
        )
        run.totals = run_totals(run)
        run.save(update_fields=["totals"])
        # bulk_create sets primary keys on PostgreSQL and SQLite; re-read to be safe elsewhere.
        ids = [a.id for a in attempts] if all(a.id for a in attempts) else _queued_ids(run)
        transaction.on_commit(lambda: attempts_enqueue(ids))
    return run


def runs_launch_many(
    *,
    suite: Suite,
    model_configs: Iterable[ModelConfig],
    samples: int = 1,
    labels: Sequence[str] | None = None,
    task_ids: Sequence[str] | None = None,
    include_flaky: bool = False,
    created_by=None,
) -> list[Run]:
    """One run per model configuration, all created in one transaction (all or none)."""
    with transaction.atomic():
        return [
            run_launch(
                suite=suite,
                model_config=config,
                samples=samples,
                labels=labels,
                task_ids=task_ids,
                include_flaky=include_flaky,
                created_by=created_by,
            )
            for config in model_configs
        ]


def _select_tasks(
    suite: Suite,
    *,
    labels: Sequence[str] | None,
    task_ids: Sequence[str] | None,
    include_flaky: bool,
) -> list[Task]:
    qs = Task.objects.for_suite(suite)
    if task_ids:
        found = set(qs.filter(task_id__in=task_ids).values_list("task_id", flat=True))
        missing = sorted(set(task_ids) - found)
        if missing:
            raise LaunchError(f"task_ids: not in suite {suite.name}: {', '.join(missing)}")
        qs = qs.filter(task_id__in=task_ids)
    for label in labels or []:
        qs = qs.with_label(label)
    if not include_flaky and not task_ids:
        qs = qs.without_label("flaky")
    tasks = list(qs.order_by("task_id"))
    if not tasks:
        raise LaunchError(f"no task of suite {suite.name} matches the selection")
    return tasks


@lru_cache(maxsize=1)
def _git_revision() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=settings.BASE_DIR,
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


@lru_cache(maxsize=1)
def _package_versions() -> dict[str, str]:
    versions = {}
    for name in RECORDED_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def _config_snapshot(config: ModelConfig) -> dict:
    threshold, counted = failfast_settings()
    return {
        "model_config": {
            "name": config.name,
            "agent_variant": config.agent_variant,
            "model_name": config.model_name,
            "base_url": config.base_url,
            "api_key_env": config.api_key_env,  # the variable's name, never its value
            "sampling": config.sampling_params(),
            "max_steps": config.max_steps,
            "max_time_sec": config.max_time_sec,
            "max_tokens": config.max_tokens,
            "max_cost_usd": str(config.max_cost_usd) if config.max_cost_usd is not None else None,
            "repeated_failure_threshold": config.repeated_failure_threshold,
            "strict_patch": config.strict_patch,
        },
        "sandbox": {
            "backend": settings.SANDBOX_BACKEND,
            "image": settings.SANDBOX_IMAGE,
            "memory_mb": settings.SANDBOX_MEMORY_MB,
            "cpus": settings.SANDBOX_CPUS,
            "pids_limit": settings.SANDBOX_PIDS_LIMIT,
        },
        "fail_fast": {"threshold": threshold, "reasons": list(counted)},
    }


def _queued_ids(run: Run) -> list[int]:
    return list(
        run.attempts.filter(status=AttemptStatus.QUEUED)
        .order_by("sample_index", "task__task_id")
        .values_list("id", flat=True)
    )


def imported_run_read_in_background(run_public_id: str) -> None:
    """What an import through the web leaves to a process of its own, detached: the run's
    transcripts indexed for search (``ab search reindex --run``), then its attempts' integrity
    flags (``ab flags recompute --all --run``). Both read each attempt's transcript back, which a
    web worker at the import limits must not do (nor load Celery just to say so). When the
    process cannot start, here and now (never left unindexed or unchecked)."""
    import sys

    # sh starts them in the background and exits: the reader is no child of ours.
    script = (
        '{ "$0" -m benchsite.cli.main search reindex --run "$1"; '
        '"$0" -m benchsite.cli.main flags recompute --all --run "$1"; } >/dev/null 2>&1 &'
    )
    try:
        subprocess.run(
            ["sh", "-c", script, sys.executable, run_public_id],
            stdin=subprocess.DEVNULL,
            check=True,
            timeout=30,
            start_new_session=True,
        )
    except (OSError, subprocess.SubprocessError):
        log.warning("imports: run %s not read apart; indexing and checking here", run_public_id)
        imported_run_read(run_public_id)


def imported_run_read(run_public_id: str) -> None:
    """An imported run's transcripts indexed and its attempts' integrity flags computed, in
    this process (``ab``'s own imports, or when no process could start)."""
    from runs.integrity.services import flags_recompute
    from runs.models import Attempt, Run
    from runs.search.index import attempts_index

    run = Run.objects.get(public_id=run_public_id)
    read = Attempt.objects.filter(run=run).exclude(artifacts_dir="")
    attempts_index(read.order_by("id").values_list("id", flat=True))
    # All of them: a bundle's attempts arrive with the rule set they were checked under
    # elsewhere but not their flags (a bundle holds no flag rows: they are ours to compute).
    flags_recompute(everything=True, run_ids=[run.pk])


def attempts_enqueue(attempt_ids: Sequence[int]) -> None:
    """Send one Celery message per attempt id over a single broker connection.

    ``queued_at`` is stamped here, when the messages go out, not when the rows were created:
    the rows wait for their transaction to commit, and a re-sent attempt waits anew.
    """
    # Imported here, the one place services reach the task layer: runs.workers.tasks imports
    # services at module level (tasks call services), so a module-level import would be a
    # cycle (tests/architecture/test_import_cycles.py); this also keeps Celery out of non-sending
    # commands.
    from benchsite.celery import app
    from runs.workers.tasks import attempt_run, attempt_time_limits

    if not attempt_ids:
        return
    limits = attempt_time_limits(attempt_ids)
    unsent = list(attempt_ids)
    for try_number in (1, 2):
        try:
            with app.producer_or_acquire() as producer:
                producer.connection.ensure_connection()
                Attempt.objects.filter(id__in=unsent, status=AttemptStatus.QUEUED).update(
                    queued_at=timezone.now()
                )
                while unsent:
                    soft, hard = limits[unsent[0]]
                    attempt_run.apply_async(
                        args=(unsent[0],), soft_time_limit=soft, time_limit=hard, producer=producer
                    )
                    unsent.pop(0)
            return
        except Exception:  # any broker failure: the rows are committed already
            # A broker that fails mid-send (kombu's SQL transport on a busy SQLite loses its
            # channel: AttributeError) must not fail the launch after its rows committed: one
            # more try on a fresh producer, then the attempts stay queued for the reaper, which
            # re-sends queued attempts whose message is gone.
            log.warning(
                "sending %d attempt message(s) failed (try %d)",
                len(unsent),
                try_number,
                exc_info=True,
            )
    log.error(
        "%d attempt message(s) not sent; the reaper re-sends queued attempts whose message is gone",
        len(unsent),
    )


# --- Control: cancel, retry, resume ----------------------------------------------------------


def run_cancel(*, run: Run, by=None) -> int:
    """Cancel a run: queued attempts end ``cancelled`` (INTERRUPTED), running ones are told
    to stop (their worker's ``should_cancel`` turns true) and their containers removed.

    Returns how many queued attempts were cancelled. Cancelling a final run does nothing.
    """
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run.pk)
        if run.is_final:
            return 0
        now = timezone.now()
        who = f" by {by}" if by is not None else ""
        count = attempts_cancel_queued(
            run=run,
            text=f"[cancelled] the run was cancelled{who} before this attempt started",
            now=now,
        )
        running = list(
            run.attempts.filter(status=AttemptStatus.RUNNING).values_list("public_id", flat=True)
        )
        run.status = RunStatus.CANCELLED
        run.finished_at = now
        run.notes = (run.notes + f"\ncancelled{who} at {now:%Y-%m-%d %H:%M:%S}Z").strip()
        run.totals = run_totals(run)
        run.save(update_fields=["status", "finished_at", "notes", "totals"])
        transaction.on_commit(lambda: attempts_remove_containers(running))
    return count


def run_evaluate(*, run: Run, by=None) -> int:
    """Queue a run's ``not_evaluated`` attempts (imported patches) for the workers.

    Imports leave them out of every queue until someone asks; this is the one way in. The run
    becomes queued again and one message per attempt goes out once committed. Returns how
    many attempts were queued (0 when there is nothing to evaluate).
    """
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run.pk)
        ids = list(
            run.attempts.filter(status=AttemptStatus.NOT_EVALUATED)
            .order_by("task__task_id", "sample_index")
            .values_list("id", flat=True)
        )
        if not ids:
            return 0
        attempts_queue_for_evaluation(attempt_ids=ids)
        who = f" by {by}" if by is not None else ""
        now = timezone.now()
        run.status = RunStatus.QUEUED
        run.finished_at = None
        run.notes = (run.notes + f"\nevaluation asked{who} at {now:%Y-%m-%d %H:%M:%S}Z").strip()
        run.totals = run_totals(run)
        run.save(update_fields=["status", "finished_at", "notes", "totals"])
        transaction.on_commit(lambda: attempts_enqueue(ids))
    return len(ids)


def retryable_attempts(run: Run) -> QuerySet[Attempt]:
    """The attempts ``run_retry_infra`` queues again: final ones that ended for an
    infrastructure reason. ``is_infra``, not the reason's category: a failure before the agent
    started is infrastructure whatever its code (the taxonomy's stage rule)."""
    return run.attempts.filter(status__in=FINAL_STATES, is_infra=True, failure_reason__isnull=False)


def run_retry_infra(*, run: Run, by=None) -> int:
    """Give every attempt that ended for an infrastructure reason a fresh try.

    Decision: the attempt row is reset to ``queued`` in place rather than copied. A run holds
    exactly one attempt per task x sample (a database constraint the leaderboards rely on),
    so a copy would either double count or need hiding rules everywhere. The previous try is
    kept: its stage rows stay attached, renamed ``try N: <stage>`` and ordered after the new
    try's stages, and its outcome is recorded as one more stage row ``try N: outcome``.
    Returns how many attempts were re-queued.
    """
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run.pk)
        attempts = list(
            retryable_attempts(run).select_for_update().order_by("sample_index", "task__task_id")
        )
        for attempt in attempts:
            attempt_requeue(attempt, note=f"retried{f' by {by}' if by is not None else ''}")
        if attempts:
            run.status = RunStatus.QUEUED
            run.finished_at = None
            run.fail_fast_reason = run.fail_fast_code = ""
            run.fail_fast_permanent = False
            run.totals = run_totals(run)
            run.save(
                update_fields=[
                    "status",
                    "finished_at",
                    "fail_fast_reason",
                    "fail_fast_code",
                    "fail_fast_permanent",
                    "totals",
                ]
            )
            ids = [a.id for a in attempts]
            transaction.on_commit(lambda: attempts_enqueue(ids))
    return len(attempts)


def run_resume(*, run: Run) -> int:
    """Send again the Celery message of every attempt still queued (the broker lost them,
    or the workers were down). A duplicate message is harmless: only one claim succeeds."""
    with transaction.atomic():
        ids = _queued_ids(run)
        transaction.on_commit(lambda: attempts_enqueue(ids))
    return len(ids)


def attempts_remove_containers(public_ids: Iterable) -> int:
    """Remove the sandbox containers of these attempts (by label); 0 when Docker is absent."""
    public_ids = list(public_ids)
    if not public_ids:
        return 0
    try:
        from sandbox.docker_backend import remove_stale_containers
    except ImportError:
        return 0
    removed = 0
    for public_id in public_ids:
        try:
            removed += remove_stale_containers(attempt_container_label(public_id))
        except Exception:  # Docker down or unreachable: the reaper retries later.
            log.warning("could not remove containers of attempt %s", public_id, exc_info=True)
    return removed


def attempt_container_label(public_id) -> dict[str, str]:
    """The label filter that selects one attempt's containers (set by the pipeline)."""
    return {"agentbench.attempt": str(public_id)}


# --- Totals ----------------------------------------------------------------------------


def run_refresh_totals(run: Run) -> dict:
    """Recompute the cached counts of a run from its attempts and store them."""
    run.totals = run_totals(run)
    Run.objects.filter(pk=run.pk).update(totals=run.totals)
    return run.totals


def run_totals(run: Run) -> dict:
    """Counts by status and reason, and the run's score (``runs.results.scoring``: the leaderboard's
    figure for this run's row) as ``success_rate``."""
    from runs.results.scoring import TaskTally, classify, score

    rows = run.attempts.values_list("task_id", "status", "failure_reason_id", "is_infra")
    by_status: Counter[str] = Counter()
    by_reason: Counter[str] = Counter()
    per_task: dict[int, TaskTally] = {}
    for task_id, status, reason, is_infra in rows:
        by_status[status] += 1
        tally = classify(status, is_infra=is_infra, resolved=reason is None)
        per_task[task_id] = per_task[task_id] + tally if task_id in per_task else tally
        if status == AttemptStatus.MISSING:
            by_reason["MISSING"] += 1
        elif status in FINAL_STATES:
            by_reason[reason or "RESOLVED"] += 1
    figures = score(per_task, universe=per_task, k=run.samples)
    return {
        "attempts": sum(by_status.values()),
        "by_status": dict(by_status),
        "by_reason": dict(by_reason),
        "final": sum(by_status[s] for s in FINAL_STATES),
        # Imported patches waiting for someone to ask for their evaluation (not final).
        "not_evaluated": by_status[AttemptStatus.NOT_EVALUATED],
        "scored": figures.scored,
        "resolved": figures.resolved_attempts,
        "infra": figures.excluded,
        "pending": figures.pending,
        "tasks": figures.tasks,
        "score_label": figures.resolved_label,
        "success_rate": None if figures.rate is None else round(figures.rate, 4),
        "missing": figures.missing_attempts,
        "attempted_tasks": figures.attempted_tasks,
        "attempted_rate": (
            None if figures.attempted_rate is None else round(figures.attempted_rate, 4)
        ),
    }
