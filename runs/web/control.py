"""The POST endpoints of the run page's buttons (cancel, retry, resume, evaluate) and the suite
page's launch form, over the same services as the admin, the API and the CLI
(``runs.actions``, which record the audit event). Each needs the right
``benchsite.accounts.access.RIGHTS`` gives its action (staff), the same as the API's."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.utils.html import format_html
from django.views.decorators.http import require_POST

from benchsite.accounts.access import write_view
from benchsite.accounts.models import Action, Door
from runs import actions
from runs.models import AgentVariant, ModelConfig, Run, RunBackend
from runs.services import LaunchError
from tasks_app.models import Suite


def _done(request: HttpRequest, run: Run, message: str) -> HttpResponse:
    messages.success(request, message)
    return redirect(run.get_absolute_url())


def _asked(request: HttpRequest) -> dict:
    return {"actor": request.user, "door": Door.PAGE, "request": request}


@require_POST
@write_view(Action.RUN_CANCEL)
def run_cancel_view(request: HttpRequest, public_id) -> HttpResponse:
    run = get_object_or_404(Run, public_id=public_id)
    if run.is_final:
        return _done(request, run, f"The run is already {run.status}; nothing to cancel.")
    count = actions.run_cancel(run=run, **_asked(request))
    return _done(
        request,
        run,
        f"Run cancelled: {count} queued attempt(s) cancelled, running ones told to stop.",
    )


@require_POST
@write_view(Action.RUN_RETRY)
def run_retry_view(request: HttpRequest, public_id) -> HttpResponse:
    run = get_object_or_404(Run, public_id=public_id)
    count = actions.run_retry(run=run, **_asked(request))
    return _done(
        request, run, f"{count} attempt(s) that ended for infrastructure reasons are queued again."
    )


@require_POST
@write_view(Action.RUN_RESUME)
def run_resume_view(request: HttpRequest, public_id) -> HttpResponse:
    run = get_object_or_404(Run, public_id=public_id)
    count = actions.run_resume(run=run, **_asked(request))
    return _done(request, run, f"Re-sent {count} queued attempt(s) to the workers.")


@require_POST
@write_view(Action.RUN_EVALUATE)
def run_evaluate_view(request: HttpRequest, public_id) -> HttpResponse:
    run = get_object_or_404(Run, public_id=public_id)
    count = actions.run_evaluate(run=run, **_asked(request))
    return _done(request, run, f"{count} not-evaluated attempt(s) queued.")


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
@write_view(Action.RUN_LAUNCH)
def suite_launch_view(request: HttpRequest, name: str) -> HttpResponse:
    """Launch a run of the suite; to its run page, or back to the suite with the error."""
    suite = get_object_or_404(Suite, name=name)
    form = SuiteLaunchForm(request.POST)
    if form.is_valid():
        labels = [x.strip() for x in form.cleaned_data["labels"].split(",") if x.strip()]
        try:
            run = actions.run_launch(
                suite=suite,
                model_config=form.cleaned_data["model"],
                **_asked(request),
                samples=form.cleaned_data["samples"],
                labels=labels or None,
                include_flaky=form.cleaned_data["include_flaky"],
                backend=form.cleaned_data["backend"] or "",
            )
        except LaunchError as exc:
            form.add_error(None, str(exc))
        else:
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
