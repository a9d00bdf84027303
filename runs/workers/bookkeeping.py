"""What workers write around attempts: run bookkeeping after each one, fail-fast, the reaper.

Split from ``runs.services`` (launch and control) because it runs inside worker processes and
the reaper (``ab reaper``), under row locks, and has its own concurrency rules. The claim and
every status change of an attempt are ``runs.lifecycle``'s.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from runs.failfast import Breach, Outcome, failfast_settings, find_breach
from runs.lifecycle import attempt_fail, attempt_requeue, attempts_skip_queued
from runs.models import RUN_FINAL_STATES, Attempt, AttemptStatus, Run, RunSource, RunStatus
from runs.services import NON_FINAL, attempts_enqueue, attempts_remove_containers, run_totals
from runs.taxonomy import Reason
from runs.workers.broker import broker_forget_unacked

log = logging.getLogger(__name__)


# --- Bookkeeping after an attempt -----------------------------------------------------------


def run_attempt_done(*, attempt: Attempt) -> Run:
    """Run bookkeeping after one attempt reached a final state: fail-fast, totals, status."""
    return run_settle(run_id=attempt.run_id)


def run_settle(*, run_id: int) -> Run:
    """Fail-fast check, cached totals, and ``finished`` once no attempt is left to run.

    The run row is locked (``select_for_update``; SQLite's IMMEDIATE transactions serialize
    writers the same way), so two workers finishing at once see each other's results and
    "consecutive" is well defined by finish order. Idempotent: it recomputes from the attempts.
    """
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run_id)
        if run.status in (RunStatus.QUEUED, RunStatus.RUNNING):
            breach = _breach_of(run)
            if breach is not None:
                _abort(run, breach)
                if breach.permanent:
                    for other in (
                        Run.objects.select_for_update()
                        .active()
                        .filter(model_config_id=run.model_config_id)
                        .exclude(pk=run.pk)
                    ):
                        _abort(other, breach, origin=run)
        _finish_if_done(run)
        return run


def _breach_of(run: Run) -> Breach | None:
    threshold, counted = failfast_settings()
    rows = (
        run.attempts.filter(status=AttemptStatus.FINISHED)
        .order_by("finished_at", "id")
        .values_list("id", "failure_reason_id", "error_fingerprint", "error_kind", "error_text")
    )
    outcomes = (
        Outcome(attempt_id=i, reason=r, fingerprint=f, error_kind=k, error_text=t[:2000])
        for i, r, f, k, t in rows
    )
    return find_breach(outcomes, threshold=threshold, counted=counted)


def _abort(run: Run, breach: Breach, *, origin: Run | None = None) -> None:
    """Fail-fast: skip the queued attempts (never delete them), keep the finished ones."""
    now = timezone.now()
    reason = breach.describe()
    if origin is not None:
        reason = f"propagated from run {origin.public_id}: {reason}"
    attempts_skip_queued(
        run=run,
        reason=breach.reason,
        text=f"[fail-fast] skipped: {reason}",
        error_kind="permanent" if breach.permanent else "transient",
        now=now,
    )
    run.status = RunStatus.ABORTED
    run.fail_fast_reason = reason
    run.fail_fast_code = breach.reason
    run.fail_fast_permanent = breach.permanent
    run.save(update_fields=["status", "fail_fast_reason", "fail_fast_code", "fail_fast_permanent"])
    if origin is not None:
        _finish_if_done(run)


def _finish_if_done(run: Run) -> None:
    run.totals = run_totals(run)
    fields = ["totals"]
    if not run.attempts.filter(status__in=NON_FINAL).exists():
        if run.status in (RunStatus.QUEUED, RunStatus.RUNNING):
            run.status = RunStatus.FINISHED
            fields.append("status")
        if run.finished_at is None:
            run.finished_at = timezone.now()
            fields.append("finished_at")
    run.save(update_fields=fields)


# --- Worker side: reap, hand back ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReapReport:
    requeued: list[int]
    ended: list[int]
    resent: list[int]
    settled: list[int]


def attempts_reap(*, stale_after_sec: int | None = None, max_requeues: int | None = None):
    """End or requeue attempts whose worker stopped sending heartbeats.

    A ``running`` attempt whose heartbeat is older than ``ATTEMPT_STALE_AFTER_SEC`` is put back
    in the queue once (``requeue_count``); the second time it ends ``finished`` with
    SANDBOX_ERROR and ``[worker-lost]``. Its containers are removed either way. Queued attempts
    of active runs that waited that long while the broker queue is empty lost their message
    (the SQL transport forgets unacknowledged messages of a killed worker) and are sent again.
    """
    stale_after = stale_after_sec if stale_after_sec is not None else _stale_after()
    max_requeues = max_requeues if max_requeues is not None else _max_requeues()
    cutoff = timezone.now() - timedelta(seconds=stale_after)
    stale = Attempt.objects.filter(status=AttemptStatus.RUNNING).filter(
        Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, started_at__lt=cutoff)
    )
    requeued: list[int] = []
    ended: list[int] = []
    for attempt in stale.select_related(None).order_by("id"):
        with transaction.atomic():
            locked = (
                Attempt.objects.select_for_update()
                .filter(
                    pk=attempt.pk, status=AttemptStatus.RUNNING, heartbeat_at=attempt.heartbeat_at
                )
                .first()
            )
            if locked is None:  # it moved on (finished, or a heartbeat arrived) meanwhile
                continue
            transaction.on_commit(partial(attempts_remove_containers, [locked.public_id]))
            if Run.objects.filter(pk=locked.run_id, status__in=RUN_FINAL_STATES).exists():
                _end_worker_lost(locked, stale_after, run_ended=True)
                ended.append(locked.id)
            elif locked.requeue_count < max_requeues:
                lost = locked.worker or "unknown"
                _take_back(locked, note=f"worker lost ({lost}), requeued", count=True)
                requeued.append(locked.id)
            else:
                _end_worker_lost(locked, stale_after)
                ended.append(locked.id)
        attempt_remove_workspace(locked)
        if locked.id in ended:
            run_attempt_done(attempt=locked)
    broker_forget_unacked([*requeued, *ended])
    if requeued:
        attempts_enqueue(requeued)
    resent = _resend_lost_messages(stale_after)
    settled = runs_settle_idle()
    return ReapReport(requeued=requeued, ended=ended, resent=resent, settled=settled)


def attempts_hand_back(*, worker_node: str) -> list[int]:
    """Put back in the queue the attempts a stopped worker left ``running``.

    ``ab worker`` calls it once every process of its Celery worker ``worker_node`` is gone
    (stopped past its grace period, or crashed), so the attempts need not wait for the reaper.
    A hand-back is not a lost worker: ``requeue_count`` stays as it was. Attempts of a run that
    ended meanwhile end ``cancelled`` instead.
    """
    handed: list[int] = []
    ended: list[Attempt] = []
    running = Attempt.objects.filter(
        status=AttemptStatus.RUNNING, worker__startswith=f"{worker_node}:"
    )
    for attempt in running.order_by("id"):
        with transaction.atomic():
            locked = (
                Attempt.objects.select_for_update()
                .filter(pk=attempt.pk, status=AttemptStatus.RUNNING, worker=attempt.worker)
                .first()
            )
            if locked is None:
                continue
            transaction.on_commit(partial(attempts_remove_containers, [locked.public_id]))
            if Run.objects.filter(pk=locked.run_id, status__in=RUN_FINAL_STATES).exists():
                text = f"[worker-stopped] worker {locked.worker} stopped after the run ended"
                _end_worker_lost(locked, 0, run_ended=True, text=text)
                ended.append(locked)
            else:
                _take_back(locked, note=f"worker {locked.worker} stopped, handed back", count=False)
                handed.append(locked.id)
        attempt_remove_workspace(locked)
    for attempt in ended:
        run_attempt_done(attempt=attempt)
    broker_forget_unacked([*handed, *(a.id for a in ended)])
    attempts_enqueue(handed)
    return handed


def _take_back(attempt: Attempt, *, note: str, count: bool) -> None:
    """Put the attempt back in the queue (inside the caller's transaction, row locked)."""
    attempt_requeue(attempt, note=note, requeue_count=attempt.requeue_count + (1 if count else 0))


def attempt_remove_workspace(attempt: Attempt) -> None:
    """Remove what a taken-back try left on this machine: its workspace (its logs stay), and
    its sandbox's host files and quota mounts (``sandbox.leftovers``).

    The next try gets a folder of its own and a fresh clone; on a worker of another machine
    the folder is only here when the artifacts root is shared, else nothing is removed.
    """
    from runs.pipeline.artifacts import WORKSPACE_DIR, folder_of
    from runs.workers.leftovers import attempt_sandbox_name
    from sandbox.leftovers import remove_host_leftovers

    workspace = folder_of(attempt.artifacts_dir) / WORKSPACE_DIR if attempt.artifacts_dir else None
    # A try killed mid-command leaves its disk quota's filesystem bound over the workspace
    # (and its loop mount): unmount them first, or rmtree cannot remove it.
    remove_host_leftovers(attempt_sandbox_name(attempt.public_id), workspace)
    if workspace is not None:
        shutil.rmtree(workspace, ignore_errors=True)


def runs_settle_idle() -> list[int]:
    """Settle harness runs that are not marked done although none of their attempts is left
    to run (their last attempt's bookkeeping failed, e.g. on a database deadlock)."""
    idle = list(
        Run.objects.filter(source=RunSource.HARNESS, finished_at__isnull=True)
        .exclude(attempts__status__in=NON_FINAL)
        .values_list("id", flat=True)[:100]
    )
    for run_id in idle:
        run_settle(run_id=run_id)
    return idle


def _end_worker_lost(
    attempt: Attempt, stale_after: int, *, run_ended: bool = False, text: str = ""
) -> None:
    text = text or (
        f"[worker-lost] worker {attempt.worker or 'unknown'} sent no heartbeat for over "
        f"{stale_after}s, after {attempt.requeue_count} requeue(s)"
    )
    # In a run already cancelled or aborted, a lost attempt is not worth another try.
    attempt_fail(
        attempt,
        reason=Reason.INTERRUPTED if run_ended else Reason.SANDBOX_ERROR,
        cancelled=run_ended,
        text=text,
        fingerprint="[worker-lost]",
        error_kind="transient",
    )


def _resend_lost_messages(stale_after: int) -> list[int]:
    cutoff = timezone.now() - timedelta(seconds=stale_after)
    waiting = list(
        Attempt.objects.filter(
            status=AttemptStatus.QUEUED,
            queued_at__lt=cutoff,
            run__status__in=[RunStatus.QUEUED, RunStatus.RUNNING],
        )
        .order_by("id")
        .values_list("id", flat=True)[:1000]
    )
    if not waiting or broker_queue_size() != 0:
        return []
    # attempts_enqueue restarts their waiting time (queued_at) once the broker answers, so the
    # next pass does not send them yet again; if it does not answer, the next pass tries again.
    attempts_enqueue(waiting)
    return waiting


def broker_queue_size() -> int | None:
    """Messages waiting in the default queue, or None when the broker cannot say.

    A queue the broker does not know is an empty queue: Redis deletes a list's key with its
    last element (and a Redis restarted without persistence knows no key at all), so kombu's
    passive declare answers "no queue" exactly when the lost messages should be sent again.
    """
    from benchsite.celery import app

    try:
        with app.connection_for_write() as conn:
            queue = app.conf.task_default_queue
            try:
                # The transport's own channel: kombu's StdChannel type declares no queue_declare.
                channel: Any = conn.default_channel
                _, count, _ = channel.queue_declare(queue=queue, passive=True)
            except Exception as exc:
                if _is_no_such_queue(exc):
                    return 0
                raise
            return int(count)
    except Exception:
        log.warning("could not read the broker queue size", exc_info=True)
        return None


def _is_no_such_queue(exc: Exception) -> bool:
    """kombu's virtual transports (Redis, SQL) raise ChannelError("NOT_FOUND - no queue ...",
    ..., "404"); AMQP brokers raise amqp's NotFound (reply code 404)."""
    if getattr(exc, "reply_code", None) == 404:
        return True
    return any(str(arg).startswith("NOT_FOUND") or arg == "404" for arg in exc.args)


def _stale_after() -> int:
    return int(getattr(settings, "ATTEMPT_STALE_AFTER_SEC", 40) or 40)


def _max_requeues() -> int:
    return int(getattr(settings, "ATTEMPT_MAX_REQUEUES", 1))
