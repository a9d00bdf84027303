"""Staff-only POST endpoints behind the run page's buttons: cancel, retry, resume, evaluate."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import messages
from django.contrib.admin.views.decorators import staff_member_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from benchsite.accounts.models import AuditAction
from benchsite.accounts.services import audit_event_record
from runs.models import Run
from runs.services import run_cancel, run_evaluate, run_resume, run_retry_infra

# Not AuditAction choices (adding one would need a migration); stored as the same kind of text.
RUN_RESUME = "run.resume"
RUN_EVALUATE = "run.evaluate"


def _control(
    request: HttpRequest, public_id, action: Callable[[Run], str], audit: str
) -> HttpResponse:
    run = get_object_or_404(Run, public_id=public_id)
    messages.success(request, action(run))
    audit_event_record(actor=request.user, action=audit, objects=[run], request=request, via="page")
    return redirect(run.get_absolute_url())


@require_POST
@staff_member_required
def run_cancel_view(request: HttpRequest, public_id) -> HttpResponse:
    def cancel(run: Run) -> str:
        if run.is_final:
            return f"The run is already {run.status}; nothing to cancel."
        count = run_cancel(run=run, by=request.user)
        return f"Run cancelled: {count} queued attempt(s) cancelled, running ones told to stop."

    return _control(request, public_id, cancel, AuditAction.RUN_CANCEL)


@require_POST
@staff_member_required
def run_retry_view(request: HttpRequest, public_id) -> HttpResponse:
    def retry(run: Run) -> str:
        count = run_retry_infra(run=run, by=request.user)
        return f"{count} attempt(s) that ended for infrastructure reasons are queued again."

    return _control(request, public_id, retry, AuditAction.RUN_RETRY)


@require_POST
@staff_member_required
def run_resume_view(request: HttpRequest, public_id) -> HttpResponse:
    def resume(run: Run) -> str:
        return f"Re-sent {run_resume(run=run)} queued attempt(s) to the workers."

    return _control(request, public_id, resume, RUN_RESUME)


@require_POST
@staff_member_required
def run_evaluate_view(request: HttpRequest, public_id) -> HttpResponse:
    def evaluate(run: Run) -> str:
        return f"{run_evaluate(run=run, by=request.user)} not-evaluated attempt(s) queued."

    return _control(request, public_id, evaluate, RUN_EVALUATE)
