"""The POST endpoints of the run page's buttons (cancel, retry, resume, evaluate) and the suite
page's launch form, over the same services as the admin, the API and the CLI. Each needs the
right ``benchsite.accounts.access.RIGHTS`` gives its action (staff), the same as the API's."""

from __future__ import annotations

from collections.abc import Callable

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.utils.html import format_html
from django.views.decorators.http import require_POST

from benchsite.accounts.access import Write, write_view
from benchsite.accounts.models import AuditAction
from benchsite.accounts.services import audit_event_record
from runs.models import AgentVariant, ModelConfig, Run, RunBackend
from runs.services import (
    LaunchError,
    run_cancel,
    run_evaluate,
    run_launch,
    run_resume,
    run_retry_infra,
)
from tasks_app.models import Suite


def _control(
    request: HttpRequest, public_id, action: Callable[[Run], str], audit: str
) -> HttpResponse:
    run = get_object_or_404(Run, public_id=public_id)
    messages.success(request, action(run))
    audit_event_record(actor=request.user, action=audit, objects=[run], request=request, via="page")
    return redirect(run.get_absolute_url())


@require_POST
@write_view(Write.RUN_CANCEL)
def run_cancel_view(request: HttpRequest, public_id) -> HttpResponse:
    def cancel(run: Run) -> str:
        if run.is_final:
            return f"The run is already {run.status}; nothing to cancel."
        count = run_cancel(run=run, by=request.user)
        return f"Run cancelled: {count} queued attempt(s) cancelled, running ones told to stop."

    return _control(request, public_id, cancel, AuditAction.RUN_CANCEL)


@require_POST
@write_view(Write.RUN_RETRY)
def run_retry_view(request: HttpRequest, public_id) -> HttpResponse:
    def retry(run: Run) -> str:
        count = run_retry_infra(run=run, by=request.user)
        return f"{count} attempt(s) that ended for infrastructure reasons are queued again."

    return _control(request, public_id, retry, AuditAction.RUN_RETRY)


@require_POST
@write_view(Write.RUN_RESUME)
def run_resume_view(request: HttpRequest, public_id) -> HttpResponse:
    def resume(run: Run) -> str:
        return f"Re-sent {run_resume(run=run)} queued attempt(s) to the workers."

    return _control(request, public_id, resume, Write.RUN_RESUME)


@require_POST
@write_view(Write.RUN_EVALUATE)
def run_evaluate_view(request: HttpRequest, public_id) -> HttpResponse:
    def evaluate(run: Run) -> str:
        return f"{run_evaluate(run=run, by=request.user)} not-evaluated attempt(s) queued."

    return _control(request, public_id, evaluate, Write.RUN_EVALUATE)


class SuiteLaunchForm(forms.Form):
    """The suite page's "Launch a run" form (staff): what ``run_launch`` takes."""

    # External configurations hold imported results: there is no agent to run.
    model = forms.ModelChoiceField(
        queryset=ModelConfig.objects.exclude(agent_variant=AgentVariant.EXTERNAL).order_by("name"),
        to_field_name="slug",
        empty_label=None,
    )
    samples = forms.IntegerField(min_value=1, max_value=100, initial=1)
    labels = forms.CharField(
        required=False, max_length=500, help_text="only tasks with all these labels: a,b"
    )
    include_flaky = forms.BooleanField(required=False, label="Include flaky tasks")
    backend = forms.ChoiceField(
        choices=RunBackend.choices,
        required=False,
        label="Sandbox",
        help_text="the sandbox every attempt runs in; the worker's default is SANDBOX_BACKEND",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Each configuration says which agent it runs: the variant is chosen with it.
        # A ModelChoiceField; the form's fields are typed Field.
        self.fields["model"].label_from_instance = _config_label  # type: ignore[attr-defined]


def _config_label(config: ModelConfig) -> str:
    agent = config.cli_agent if config.agent_variant == AgentVariant.CLI else config.agent_variant
    model = f" · {config.model_name}" if config.model_name else ""
    return f"{config.name} ({agent}{model})"


@require_POST
@write_view(Write.RUN_LAUNCH)
def suite_launch_view(request: HttpRequest, name: str) -> HttpResponse:
    """Launch a run of the suite; to its run page, or back to the suite with the error."""
    suite = get_object_or_404(Suite, name=name)
    form = SuiteLaunchForm(request.POST)
    if form.is_valid():
        labels = [x.strip() for x in form.cleaned_data["labels"].split(",") if x.strip()]
        try:
            run = run_launch(
                suite=suite,
                model_config=form.cleaned_data["model"],
                samples=form.cleaned_data["samples"],
                labels=labels or None,
                include_flaky=form.cleaned_data["include_flaky"],
                backend=form.cleaned_data["backend"] or "",
                created_by=request.user,
            )
        except LaunchError as exc:
            form.add_error(None, str(exc))
        else:
            audit_event_record(
                actor=request.user,
                action=AuditAction.RUN_LAUNCH,
                objects=[run],
                request=request,
                via="page",
            )
            count = run.attempts.count()
            messages.success(
                request, format_html("Launched a run of {} attempt(s); it updates live.", count)
            )
            return redirect(run.get_absolute_url())
    errors = "; ".join(
        f"{field}: {' '.join(map(str, errs))}" if field != "__all__" else " ".join(map(str, errs))
        for field, errs in form.errors.items()
    )
    messages.error(request, f"Nothing launched. {errors}")
    return redirect("suite-detail", name=suite.name)
