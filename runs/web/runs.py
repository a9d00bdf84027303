"""The run page and its live fragment (counts, outcomes and the attempts table), which the page
polls until the run is final."""

from __future__ import annotations

import datetime as dt

from django.core.paginator import Paginator
from django.db.models import Count, Max
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils import timezone

from benchsite.accounts.access import can_read_artifacts, can_write
from benchsite.accounts.models import Action
from runs.models import Attempt, AttemptStatus, Run
from runs.results.scoring import Score
from runs.results.selection import read_results, run_usage
from runs.services import retryable_attempts

ATTEMPTS_PER_PAGE = 100
# Queued attempts with nothing of their run moving for this long are offered "Resume".
RESUME_AFTER = dt.timedelta(minutes=5)
# The attempts table of a run with "not attempted" stubs: which ones it lists.
SHOW = {"made": True, "missing": False, "all": None}


def _run(public_id) -> Run:
    return get_object_or_404(
        Run.objects.select_related("suite", "model_config", "created_by", "imported_by"),
        public_id=public_id,
    )


def run_score(run: Run) -> Score | None:
    """The run's figures: its leaderboard row's (``runs.results``), both rates included."""
    results = read_results(suite=run.suite, run_ids=[run.id])
    entries = results.entries("runs")
    return results.score(entries[0]) if entries else None


def _progress(run: Run) -> dict:
    by_status = dict(
        Attempt.objects.filter(run=run).order_by().values_list("status").annotate(n=Count("id"))
    )
    by_reason = list(
        Attempt.objects.filter(run=run, status="finished")
        .order_by()
        .values_list("failure_reason_id", "failure_reason__category", "failure_reason__precedence")
        .annotate(n=Count("id"))
        .order_by("failure_reason__precedence")
    )
    total = sum(by_status.values())
    # A partial run's "not attempted" stubs are no attempts: the progress counts the attempts
    # made ("100 of 100 final", not "500 of 500") and says how many tasks were left out.
    missing = by_status.get(AttemptStatus.MISSING, 0)
    made = total - missing
    final = sum(by_status.get(s, 0) for s in ("finished", "skipped", "cancelled"))
    outcomes = [
        {"code": code or "resolved", "category": category or "", "n": n}
        for code, category, _, n in by_reason
    ]
    if by_status.get(AttemptStatus.MISSING):
        # Not attempted: an outcome of its own, no failure reason of the agent's.
        outcomes.append({"code": "missing", "category": "", "n": by_status[AttemptStatus.MISSING]})
    return {
        "by_status": sorted(by_status.items()),
        "by_reason": outcomes,
        "total": total,
        "made": made,
        "missing": missing,
        "final": final,
        "pending": made - final,
        "running": by_status.get(AttemptStatus.RUNNING, 0),
        "not_evaluated": by_status.get("not_evaluated", 0),
        "percent": round(100 * final / made) if made else 0,
    }


def _stalled(run: Run, progress: dict) -> bool:
    """Whether the run's queued attempts look lost rather than waiting their turn: none of its
    attempts is running and nothing of it was queued, started or finished for
    ``RESUME_AFTER``. While a worker works through the run, "Resume" would only send
    duplicate messages (harmless, but offered for nothing)."""
    if progress["running"]:
        return False
    last = Attempt.objects.filter(run=run).aggregate(
        queued=Max("queued_at"), started=Max("started_at"), finished=Max("finished_at")
    )
    moments = [m for m in last.values() if m is not None]
    return not moments or timezone.now() - max(moments) > RESUME_AFTER


def _actions(request: HttpRequest, run: Run, progress: dict) -> list[tuple[str, str]]:
    """The buttons that can do something in the run's state, for an account with the right to
    (``benchsite.accounts.access``; none for others): cancel a run not yet final; retry
    attempts that ended for infrastructure once nothing of the run is left to run; re-send
    queued attempts that look lost (``_stalled``); evaluate not-evaluated ones (imported
    patches)."""
    if not can_write(request.user, Action.RUN_CANCEL):
        return []
    queued = dict(progress["by_status"]).get(AttemptStatus.QUEUED, 0)
    live = progress["pending"] - progress["not_evaluated"]
    retryable = retryable_attempts(run).count() if not live else 0
    if queued and not _stalled(run, progress):
        queued = 0
    wanted = [
        ("run-cancel", Action.RUN_CANCEL, "Cancel", not run.is_final),
        ("run-retry", Action.RUN_RETRY, f"Retry failed ({retryable})", retryable),
        ("run-resume", Action.RUN_RESUME, f"Resume ({queued} queued)", queued),
        (
            "run-evaluate",
            Action.RUN_EVALUATE,
            f"Evaluate ({progress['not_evaluated']})",
            progress["not_evaluated"],
        ),
    ]
    return [
        (label, reverse(name, args=[run.public_id]))
        for name, action, label, can in wanted
        if can and can_write(request.user, action)
    ]


def _live(request: HttpRequest, run: Run) -> dict:
    """What the fragment shows: counts, outcomes and the requested page of attempts (of a
    partial run, the attempts made unless ``?show=missing`` or ``?show=all``)."""
    progress = _progress(run)
    show = request.GET.get("show", "")
    if show not in SHOW:
        show = "made" if progress["missing"] else "all"
    attempts = (
        Attempt.objects.filter(run=run)
        .select_related("task", "failure_reason")
        .order_by("task__task_id", "sample_index")
    )
    if SHOW[show] is True:
        attempts = attempts.exclude(status=AttemptStatus.MISSING)
    elif SHOW[show] is False:
        attempts = attempts.filter(status=AttemptStatus.MISSING)
    page = Paginator(attempts, ATTEMPTS_PER_PAGE).get_page(request.GET.get("page"))
    # The buttons are part of the live fragment: they change as the run does.
    actions = _actions(request, run, progress)
    return {
        "run": run,
        "progress": progress,
        "page": page,
        "show": show,
        "page_query": f"show={show}" if progress["missing"] else "",
        "actions": actions,
        "score": run_score(run),
        # The run's cost summed as its leaderboard row sums it (runs.results.selection).
        "cost": run_usage(run.id),
    }


def run_detail(request: HttpRequest, public_id) -> HttpResponse:
    context = _live(request, _run(public_id))
    # The exports hold patches and logs: offered to readers only (the API checks it too).
    context["can_export"] = can_read_artifacts(request.user)
    return render(request, "runs/run_detail.html", context)


def run_progress(request: HttpRequest, public_id) -> HttpResponse:
    """The live fragment, polled by the run page (``static/js/poll.js``) until it is final."""
    return render(request, "runs/_run_progress.html", _live(request, _run(public_id)))
