"""An attempt's lifecycle: the one module that changes an attempt's status.

Workers, the pipeline, the reaper, run control (cancel, retry, evaluate), fail-fast and the
imports call these functions; none of them writes ``Attempt.status`` itself
(``tests/runs/test_attempt_lifecycle.py`` reads the source and fails on a write anywhere else). So
every way out of a state is listed here, with the guard that makes it safe when two processes
race for one row: a compare-and-set (``filter(status=...).update(...)``, one atomic UPDATE) or
a row lock (``select_for_update``) taken by the function or, where noted, by its caller.

A new row is born in its first state where it is created (``queued`` by a launch, ``running``
when the creating process runs it itself, a final state or ``not_evaluated`` when an import
records results produced elsewhere); from then on only this module moves it.

| from -> to | function | guard | called by |
|---|---|---|---|
| queued -> running | `attempt_claim` | CAS, run active | worker task |
| queued -> cancelled | `attempts_cancel_queued` | CAS, run locked | `run_cancel` |
| queued -> skipped | `attempts_skip_queued` | CAS, run locked | fail-fast |
| running -> finished, cancelled | `attempt_finish` (verdict) | row lock, 1st word wins | pipeline |
| running -> finished, cancelled | `attempt_fail` (reason, text) | claim or lock | task, reaper |
| running -> queued | `attempt_requeue` | caller's row lock | reaper, hand-back |
| running -> cancelled | `attempts_cancel_running` | CAS | suite validation, Ctrl+C |
| finished -> cancelled | `attempt_blame_the_cancel` | the worker's own row | task, run cancelled |
| final (infra) -> queued | `attempt_requeue` | caller's row locks | `run_retry_infra` |
| not_evaluated -> queued | `attempts_queue_for_evaluation` | CAS, run locked | `run_evaluate` |
| (new import row) -> not_evaluated | `attempt_mark_not_evaluated` | unsaved | run-folder import |
| any -> imported outcome | `attempt_replace_with_import` | import's transaction | re-import |

CAS: a compare-and-set, ``filter(status=...).update(...)`` in one UPDATE; "task" is the
worker's Celery task (``runs.workers.tasks``), "reaper" its pass (``runs.workers.bookkeeping``).

What goes with a transition on the run (its status, ``totals``, fail-fast fields) stays with
the caller, in the same transaction; the page-cache stamps follow every write by themselves
(database triggers, ``runs.data_version``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING

from django.db import transaction
from django.utils import timezone

from runs.models import (
    FINAL_STATES,
    AgentVariant,
    Attempt,
    AttemptStage,
    AttemptStatus,
    Run,
    RunStatus,
)
from runs.pricing import AttemptCost
from runs.search.index import attempt_index_on_commit
from runs.taxonomy import Reason
from runs.usage_fields import CostBasis

if TYPE_CHECKING:
    from runs.pipeline.persist import AttemptResult


# --- queued -> running ---------------------------------------------------------------------


def attempt_claim(*, attempt_id: int, worker: str) -> bool:
    """Compare-and-set queued -> running. False when another worker (or a cancel) won."""
    now = timezone.now()
    claimed = Attempt.objects.filter(
        id=attempt_id,
        status=AttemptStatus.QUEUED,
        run__status__in=[RunStatus.QUEUED, RunStatus.RUNNING],
    ).update(status=AttemptStatus.RUNNING, worker=worker[:200], started_at=now, heartbeat_at=now)
    if claimed:
        Run.objects.filter(attempts__id=attempt_id, status=RunStatus.QUEUED).update(
            status=RunStatus.RUNNING, started_at=now
        )
    return bool(claimed)


# --- running -> finished or cancelled -----------------------------------------------------

# The cost as billed, by class (runs/pricing.py), beside cost_usd.
COST_DETAIL_FIELDS = (
    "tokens_cache_write",
    "tokens_cache_read",
    "cost_input_usd",
    "cost_cache_write_usd",
    "cost_cache_read_usd",
    "cost_output_usd",
)


_FINISH_FIELDS = [
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
    *COST_DETAIL_FIELDS,
    "cost_basis",
    "cost_note",
    "tool_calls",
    "steps",
    "final_patch",
    "lines_changed",
    "files_touched",
    "grade",
    "test_results",
]


def _usd(value: float) -> Decimal:
    return Decimal(str(round(value, 6)))


def _store_cost(attempt: Attempt, detail: AttemptCost | None) -> None:
    """The cost by class; an unknown one (a call with no price) is NULL with its reason,
    never $0."""
    if detail is None:
        for name in COST_DETAIL_FIELDS:
            setattr(attempt, name, None)
        attempt.cost_basis, attempt.cost_note = "", ""
        return
    tokens, cost = detail.tokens, detail.cost
    attempt.tokens_cache_write = tokens.cache_write
    attempt.tokens_cache_read = tokens.cache_read
    attempt.cost_input_usd = _usd(cost.input)
    attempt.cost_cache_write_usd = _usd(cost.cache_write)
    attempt.cost_cache_read_usd = _usd(cost.cache_read)
    attempt.cost_output_usd = _usd(cost.output)
    if cost.known:
        attempt.cost_basis, attempt.cost_note = CostBasis.PRICED, ""
    else:
        attempt.cost_usd = None
        attempt.cost_basis, attempt.cost_note = CostBasis.UNKNOWN, cost.reason[:300]


def attempt_finish(*, attempt: Attempt, result: AttemptResult) -> Attempt:
    """Store the pipeline's final word: ``finished`` with its verdict, or ``cancelled`` when
    it stopped on a cancel. An attempt someone else already ended (a reaper, a cancel) keeps
    that state: the first final word wins."""
    verdict = result.verdict
    with transaction.atomic():
        current = Attempt.objects.select_for_update().get(pk=attempt.pk)
        if current.status in FINAL_STATES:
            return current
        now = timezone.now()
        attempt.status = AttemptStatus.CANCELLED if result.cancelled else AttemptStatus.FINISHED
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
            _store_cost(attempt, agent.cost_detail)
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
        attempt.save(update_fields=_FINISH_FIELDS)
    # Its transcript is final now: searchable once this (or the caller's) transaction commits.
    attempt_index_on_commit(attempt.pk)
    return attempt


def attempt_fail(
    attempt: Attempt,
    *,
    reason: Reason,
    text: str,
    fingerprint: str | None = None,
    cancelled: bool = False,
    is_timeout: bool | None = None,
    error_kind: str | None = None,
) -> None:
    """End a running attempt without a verdict of the pipeline's: ``finished`` (or
    ``cancelled``) with ``reason``, ``text`` as its error and ``fingerprint`` (the text's
    start unless given) to group it by. ``is_timeout`` and ``error_kind`` are written only
    when given. The caller holds the attempt: its own claim, or a row lock.

    The worker's task ends an attempt this way when the pipeline raised, hit the Celery time
    limit or returned without a final state; the reaper and a hand-back when its worker was
    lost or stopped.
    """
    now = timezone.now()
    attempt.status = AttemptStatus.CANCELLED if cancelled else AttemptStatus.FINISHED
    attempt.failure_reason_id = reason.value
    attempt.is_infra = reason.is_infrastructure
    attempt.error_text = text
    attempt.error_fingerprint = text[:200] if fingerprint is None else fingerprint
    attempt.finished_at = now
    if attempt.started_at:
        attempt.duration_sec = (now - attempt.started_at).total_seconds()
    fields = ["status", "failure_reason", "is_infra"]
    if is_timeout is not None:
        attempt.is_timeout = is_timeout
        fields.append("is_timeout")
    if error_kind is not None:
        attempt.error_kind = error_kind
        fields.append("error_kind")
    attempt.save(
        update_fields=[*fields, "error_text", "error_fingerprint", "finished_at", "duration_sec"]
    )
    attempt_index_on_commit(attempt.pk)


def attempt_blame_the_cancel(attempt: Attempt) -> None:
    """Cancelling a run removes its containers at once, so an attempt running then usually
    fails with SANDBOX_ERROR before its next stage checks ``should_cancel``. The cancel caused
    that failure: record the attempt as cancelled (INTERRUPTED), keeping the error text."""
    if attempt.status != AttemptStatus.FINISHED or attempt.failure_reason_id not in (
        Reason.SANDBOX_ERROR.value,
        Reason.UNKNOWN.value,
    ):
        return
    if not Run.objects.filter(id=attempt.run_id, status=RunStatus.CANCELLED).exists():
        return
    attempt.status = AttemptStatus.CANCELLED
    attempt.error_text = (
        f"[cancelled] the run was cancelled while this attempt ran; it then ended with "
        f"{attempt.failure_reason_id}: {attempt.error_text}"
    )
    attempt.failure_reason_id = Reason.INTERRUPTED.value
    attempt.save(update_fields=["status", "failure_reason", "error_text"])


# --- back to queued -----------------------------------------------------------------------


def attempt_requeue(attempt: Attempt, *, note: str, requeue_count: int = 0) -> None:
    """Give an attempt another try: keep the previous one (``attempt_archive_try``) and reset
    the row to ``queued`` (``attempt_reset_to_queued``), inside the caller's transaction with
    the row locked. Sending its message is the caller's, once committed."""
    attempt_archive_try(attempt, note=note)
    attempt_reset_to_queued(attempt, requeue_count=requeue_count)


def attempt_archive_try(attempt: Attempt, *, note: str) -> None:
    """Keep the previous try of an attempt as renamed stage rows before it runs again."""
    tries = attempt.stages.filter(name__startswith="try ", name__endswith=": outcome").count()
    number = tries + 1
    offset = 1000 * number
    stages = list(attempt.stages.exclude(name__startswith="try "))
    for stage in stages:
        stage.name = f"try {number}: {stage.name}"[:40]
        stage.order = min(stage.order + offset, 32000)
    AttemptStage.objects.bulk_update(stages, ["name", "order"])
    AttemptStage.objects.create(
        attempt=attempt,
        name=f"try {number}: outcome",
        order=min(offset + 999, 32767),
        command=(
            f"{note}; previous status {attempt.status}, reason {_try_reason(attempt)}, "
            f"worker {attempt.worker or '-'}\n{attempt.error_text}"
        )[:10_000],
        exit_code=attempt.exit_code,
        duration_sec=attempt.duration_sec,
        started_at=attempt.started_at,
    )


def _try_reason(attempt: Attempt) -> str:
    """What the try's outcome was: its failure reason, "none (resolved)" for a finished
    success, and for a try taken back before it ended (a lost or stopped worker) no reason at
    all, never a "success" it did not have."""
    if attempt.failure_reason_id:
        return attempt.failure_reason_id
    if attempt.status == AttemptStatus.FINISHED:
        return "none (resolved)"
    return "none (stopped before an outcome)"


_RESET_FIELDS: dict[str, object] = {
    "status": AttemptStatus.QUEUED,
    "failure_reason": None,
    "failure_stage": "",
    "is_infra": False,
    "is_timeout": False,
    "is_empty_run": False,
    "exit_code": None,
    "duration_sec": None,
    "tokens_in": 0,
    "tokens_out": 0,
    "cost_usd": 0,
    **dict.fromkeys(COST_DETAIL_FIELDS),
    "cost_basis": "",
    "cost_note": "",
    "tool_calls": 0,
    "steps": 0,
    "lines_changed": 0,
    "files_touched": [],
    "final_patch": "",
    "error_text": "",
    "error_fingerprint": "",
    "error_kind": "",
    "stderr_tail": "",
    "test_results": {},
    "grade": "",
    "worker": "",
    "started_at": None,
    "heartbeat_at": None,
    "finished_at": None,
}


def attempt_reset_to_queued(attempt: Attempt, *, requeue_count: int = 0) -> None:
    """Clear the outcome of the try before and set ``queued`` (saved; no message sent)."""
    # An imported prediction lives in final_patch until it has been evaluated: keep it.
    keep_patch = attempt.model_config.agent_variant == AgentVariant.EXTERNAL
    for field, value in _RESET_FIELDS.items():
        if field == "final_patch" and keep_patch:
            continue
        setattr(attempt, field, value.copy() if isinstance(value, list | dict) else value)
    attempt.requeue_count = requeue_count
    attempt.queued_at = timezone.now()
    attempt.save(update_fields=[*_RESET_FIELDS, "requeue_count", "queued_at"])


def attempts_queue_for_evaluation(*, attempt_ids: Sequence[int]) -> int:
    """Compare-and-set not_evaluated -> queued (imported patches someone asked to evaluate);
    how many moved."""
    return Attempt.objects.filter(id__in=attempt_ids, status=AttemptStatus.NOT_EVALUATED).update(
        status=AttemptStatus.QUEUED
    )


# --- many at once: cancel, skip -----------------------------------------------------------


def attempts_cancel_queued(*, run: Run, text: str, now: datetime) -> int:
    """Compare-and-set queued -> cancelled (INTERRUPTED) for every queued attempt of ``run``:
    a worker that claims one first keeps it. Returns how many were cancelled."""
    return _cancel(run, AttemptStatus.QUEUED, text=text, now=now)


def attempts_cancel_running(*, run: Run, text: str) -> int:
    """Compare-and-set running -> cancelled (INTERRUPTED) for every running attempt of
    ``run``: what a Ctrl+C leaves of a run this process drives itself."""
    return _cancel(run, AttemptStatus.RUNNING, text=text, now=timezone.now())


def _cancel(run: Run, status: str, *, text: str, now: datetime) -> int:
    return run.attempts.filter(status=status).update(
        status=AttemptStatus.CANCELLED,
        failure_reason_id=Reason.INTERRUPTED.value,
        is_infra=True,
        error_text=text,
        finished_at=now,
    )


def attempts_skip_queued(
    *, run: Run, reason: str, text: str, error_kind: str, now: datetime
) -> int:
    """Fail-fast: compare-and-set queued -> skipped (never deleted) for every queued attempt
    of ``run``, as infrastructure with the breach's ``reason`` code."""
    return run.attempts.filter(status=AttemptStatus.QUEUED).update(
        status=AttemptStatus.SKIPPED,
        failure_reason_id=reason,
        is_infra=True,
        error_text=text,
        error_kind=error_kind,
        finished_at=now,
    )


# --- imports ------------------------------------------------------------------------------


def attempt_mark_not_evaluated(attempt: Attempt, *, note: str) -> None:
    """An imported patch nobody evaluated (the row is not saved yet): ``not_evaluated``, with
    no outcome, until ``run_evaluate`` queues it."""
    attempt.status = AttemptStatus.NOT_EVALUATED
    attempt.failure_reason_id = None
    attempt.failure_stage = ""
    attempt.is_infra = False
    attempt.grade = ""
    attempt.error_text = note
    attempt.error_fingerprint = ""
    attempt.started_at = attempt.finished_at = None


def attempt_replace_with_import(*, pk: int, imported: Attempt, fields: Sequence[str]) -> None:
    """A re-import's new outcome for an attempt it recorded before: ``fields`` (its status
    among them) copied from the unsaved ``imported`` row onto row ``pk``."""
    Attempt.objects.filter(pk=pk).update(**{name: getattr(imported, name) for name in fields})
