"""Celery tasks. Messages carry only ids; each task re-reads its rows and claims them first.

``attempt_run`` is idempotent: a duplicate or redelivered message finds its attempt already
claimed (or final) and returns. A worker that dies mid-attempt stops its heartbeat; the
reaper (``ab reaper``, runs.workers.bookkeeping.attempts_reap) then requeues the attempt once, or
ends it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from celery.signals import worker_init, worker_process_init, worker_ready
from django.conf import settings
from django.db import DatabaseError, close_old_connections, connection
from django.utils import timezone

# The project's Celery app becomes the current app before the @shared_task below is bound, in
# every process that imports the tasks (workers, the enqueue, inline predictions); other
# Django processes (pages, database commands) never load Celery.
import benchsite.celery  # noqa: F401
from benchsite.processes import die_with_parent
from runs.lifecycle import attempt_blame_the_cancel, attempt_claim, attempt_fail
from runs.models import Attempt, AttemptStatus, Run, RunStatus
from runs.services import attempts_remove_containers
from runs.taxonomy import Reason
from runs.workers.bookkeeping import run_attempt_done
from runs.workers.worker_dir import worker_dir_join

log = logging.getLogger(__name__)


# The Celery main process's pid, seen by the pool processes it forks.
_MAIN_PID = 0


@worker_init.connect
def _join_the_worker(**_kwargs) -> None:
    """The main process holds its ``ab worker``'s folder lock (runs.workers.worker_dir), so
    no leftovers pass removes its TMPDIR while it lives."""
    global _MAIN_PID
    _MAIN_PID = os.getpid()
    worker_dir_join()


@worker_process_init.connect
def _die_with_the_main_process(**_kwargs) -> None:
    """A pool process dies (SIGKILL) with the main process, which dies with ``ab worker``:
    Celery asks for that too, but a main process that died before this ran would leave an
    orphan running its attempt unwatched (``die_with_parent`` checks). It holds the folder's
    lock as well."""
    if _MAIN_PID:
        die_with_parent(signal.SIGKILL, _MAIN_PID)
    worker_dir_join()


@worker_init.connect
def _warm_imports(**_kwargs) -> None:
    """Import the pipeline, agents and the openai client once in the worker's main process,
    before the pool forks: otherwise each child pays ~1s of imports inside its first attempt's
    agent stage, where it reads as an empty run (over a second, no tokens)."""
    import runs.agents.llm
    import runs.pipeline.execute  # noqa: F401


@worker_ready.connect
def _announce_ready(**_kwargs) -> None:
    """Tell the supervising ``ab`` process (runs.cli.worker) that this worker consumes now."""
    path = os.environ.get("AB_WORKER_READY_FILE")
    if path:
        with contextlib.suppress(OSError):
            Path(path).write_text(f"{os.getpid()}\n")


def attempt_time_limits(attempt_ids: Sequence[int]) -> dict[int, tuple[int, int]]:
    """Soft and hard Celery time limits per attempt, from the task's and the model's budgets.

    Soft = clone/setup + baseline + final test + the agent's max time + a margin; the pipeline
    enforces each budget itself, so hitting this limit means something hung. Hard = soft + 60s.
    """
    margin = int(getattr(settings, "ATTEMPT_TIME_MARGIN_SEC", 300))
    rows = Attempt.objects.filter(id__in=attempt_ids).values_list(
        "id",
        "task__timeout_sec",
        "task__setup_commands",
        "task__spec",
        "model_config__max_time_sec",
    )
    limits = {}
    for attempt_id, timeout_sec, setup_commands, spec, max_time_sec in rows:
        setup = (spec or {}).get("setup") or {}
        setup_timeout = setup.get("timeout_sec") or timeout_sec
        soft = (
            timeout_sec * 2
            + setup_timeout * max(1, len(setup_commands or []))
            + int(max_time_sec or 0)
            + margin
        )
        limits[attempt_id] = (soft, soft + 60)
    return limits


class Heartbeat(threading.Thread):
    """Writes ``heartbeat_at`` every ATTEMPT_HEARTBEAT_SEC while the attempt runs, and notices
    when the attempt should stop: its run was cancelled, or the reaper took it away."""

    def __init__(
        self,
        attempt_id: int,
        run_id: int,
        worker: str,
        interval: float,
        on_run_cancelled: Callable[[], object] | None = None,
    ):
        super().__init__(name=f"heartbeat-{attempt_id}", daemon=True)
        self.on_run_cancelled = on_run_cancelled
        self.attempt_id = attempt_id
        self.run_id = run_id
        self.worker = worker
        self.interval = max(0.2, interval)
        self.stop_event = threading.Event()
        self.cancel_event = threading.Event()

    def run(self) -> None:
        try:
            while not self.stop_event.wait(self.interval):
                self.beat()
        finally:
            connection.close()

    def beat(self) -> None:
        try:
            alive = Attempt.objects.filter(
                id=self.attempt_id, status=AttemptStatus.RUNNING, worker=self.worker
            ).update(heartbeat_at=timezone.now())
            cancelled = Run.objects.filter(id=self.run_id, status=RunStatus.CANCELLED).exists()
        except Exception:  # a database hiccup must not kill the attempt; try again next beat
            log.warning("heartbeat of attempt %s failed", self.attempt_id, exc_info=True)
            return
        if (not alive or cancelled) and not self.cancel_event.is_set():
            self.cancel_event.set()
            # The worker removes its own containers: on another machine than the web app's,
            # run_cancel cannot reach them. Not when the reaper gave the attempt to another
            # worker, whose containers carry the same attempt label.
            if cancelled and self.on_run_cancelled is not None:
                try:
                    self.on_run_cancelled()
                except Exception:
                    log.warning("could not stop attempt %s", self.attempt_id, exc_info=True)

    def should_cancel(self) -> bool:
        return self.cancel_event.is_set()

    def stop(self) -> None:
        self.stop_event.set()
        self.join(timeout=self.interval + 5)


def _worker_name(task_request) -> str:
    host = getattr(task_request, "hostname", None) or socket.gethostname()
    return f"{host}:{os.getpid()}"


@shared_task(name="runs.attempt_run", bind=True, acks_late=True, ignore_result=True)
def attempt_run(self, attempt_id: int) -> str:
    """Run one attempt to a final state, then do the run's bookkeeping."""
    close_old_connections()
    worker = _worker_name(self.request)
    if not attempt_claim(attempt_id=attempt_id, worker=worker):
        return "not claimed"
    attempt = Attempt.objects.select_related("run", "task", "model_config", "suite").get(
        id=attempt_id
    )
    heartbeat = Heartbeat(
        attempt.id,
        attempt.run_id,
        worker,
        settings.ATTEMPT_HEARTBEAT_SEC,
        on_run_cancelled=lambda: attempts_remove_containers([attempt.public_id]),
    )
    heartbeat.start()
    try:
        attempt = _execute(attempt, heartbeat)
    finally:
        heartbeat.stop()
    if not attempt.is_final:
        attempt = _end_unfinished(attempt, worker)
    attempt_blame_the_cancel(attempt)
    _publish_artifacts(attempt)
    _settle(attempt)
    return attempt.status


def _settle(attempt: Attempt, tries: int = 3) -> None:
    """Run bookkeeping, retried: two workers aborting runs of one model configuration at once
    can deadlock on PostgreSQL, and the bookkeeping is safe to repeat. The reaper settles the
    run later if every try fails."""
    for number in range(1, tries + 1):
        try:
            run_attempt_done(attempt=attempt)
            return
        except DatabaseError:
            log.warning(
                "run bookkeeping of attempt %s failed (try %s)", attempt.id, number, exc_info=True
            )
            time.sleep(0.2 * number)


def _execute(attempt: Attempt, heartbeat: Heartbeat) -> Attempt:
    from runs.pipeline.execute import attempt_execute

    try:
        return attempt_execute(
            attempt,
            # The sandbox the run asked for at launch, else the worker's default.
            backend=attempt.run.backend or None,
            heartbeat=_throttled(heartbeat.beat),
            should_cancel=heartbeat.should_cancel,
        )
    except SoftTimeLimitExceeded:
        attempt.refresh_from_db()
        if not attempt.is_final:
            attempt_fail(
                attempt,
                reason=Reason.TIMEOUT,
                text="[timeout] the attempt exceeded its overall time budget (Celery soft limit)",
                is_timeout=True,
            )
        return attempt
    except Exception as exc:  # the pipeline should not raise; if it does, nothing is lost
        log.exception("attempt %s: the pipeline raised", attempt.id)
        attempt.refresh_from_db()
        if not attempt.is_final:
            text = f"[harness] {type(exc).__name__}: {exc}"
            attempt_fail(attempt, reason=Reason.UNKNOWN, text=text, is_timeout=False)
        return attempt


def _end_unfinished(attempt: Attempt, worker: str) -> Attempt:
    attempt.refresh_from_db()
    if not attempt.is_final:
        text = f"[harness] the pipeline returned without a final state ({worker})"
        attempt_fail(attempt, reason=Reason.UNKNOWN, text=text, is_timeout=False)
    return attempt


def _throttled(beat: Callable[[], None]) -> Callable[[], None]:
    """The pipeline may call heartbeat() often; write at most once a second."""
    last = [0.0]

    def heartbeat() -> None:
        now = timezone.now().timestamp()
        if now - last[0] >= 1.0:
            last[0] = now
            beat()

    return heartbeat


def _publish_artifacts(attempt: Attempt) -> None:
    from runs.workers.artifacts_sync import attempt_publish_artifacts

    try:
        attempt_publish_artifacts(attempt)
    except Exception:
        log.exception("attempt %s: could not copy artifacts to shared storage", attempt.id)
