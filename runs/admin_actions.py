"""Admin actions over the same services as the pages and the CLI: cancel, retry, resume a run;
launch runs of selected model configurations (an intermediate form picks the suite). Each asks
``benchsite.accounts.access`` for its write's right, as the pages and the API do, and calls
``runs.actions``, which records one audit event per run."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.html import format_html, format_html_join

from benchsite.accounts.access import write_refusal
from benchsite.accounts.models import Action, Door
from runs import actions
from runs.services import LaunchError
from tasks_app.models import Suite


def _refused(modeladmin, request: HttpRequest, action: Action) -> bool:
    reason = write_refusal(request.user, action)
    if reason is not None:
        modeladmin.message_user(request, reason, level=messages.ERROR)
    return reason is not None


def _asked(request: HttpRequest) -> dict:
    return {"actor": request.user, "door": Door.ADMIN, "request": request}


@admin.action(description="Cancel selected runs")
def cancel_runs(modeladmin, request: HttpRequest, queryset: QuerySet) -> None:
    if _refused(modeladmin, request, Action.RUN_CANCEL):
        return None
    runs = [run for run in queryset if not run.is_final]
    cancelled = sum(actions.run_cancel(run=run, **_asked(request)) for run in runs)
    modeladmin.message_user(request, f"Cancelled; {cancelled} queued attempt(s) cancelled.")


@admin.action(description="Retry infrastructure failures of selected runs")
def retry_runs(modeladmin, request: HttpRequest, queryset: QuerySet) -> None:
    if _refused(modeladmin, request, Action.RUN_RETRY):
        return None
    count = sum(actions.run_retry(run=run, **_asked(request)) for run in queryset)
    modeladmin.message_user(request, f"{count} attempt(s) queued again.")


@admin.action(description="Resume selected runs (re-send queued attempts)")
def resume_runs(modeladmin, request: HttpRequest, queryset: QuerySet) -> None:
    if _refused(modeladmin, request, Action.RUN_RESUME):
        return None
    count = sum(actions.run_resume(run=run, **_asked(request)) for run in queryset)
    modeladmin.message_user(request, f"Re-sent {count} queued attempt(s).")


@admin.action(description="Evaluate the not-evaluated attempts of selected runs")
def evaluate_runs(modeladmin, request: HttpRequest, queryset: QuerySet) -> None:
    if _refused(modeladmin, request, Action.RUN_EVALUATE):
        return None
    count = sum(actions.run_evaluate(run=run, **_asked(request)) for run in queryset)
    modeladmin.message_user(request, f"{count} not-evaluated attempt(s) queued.")


def launched_message(runs: list) -> str:
    """ "Launched N run(s): <links to each run page>", escaped, for the messages framework."""
    links = format_html_join(
        ", ",
        '<a href="{}">{} on {}</a>',
        ((run.get_absolute_url(), run.model_config.name, run.suite.name) for run in runs),
    )
    return format_html("Launched {} run(s): {}.", len(runs), links)


class LaunchRunForm(forms.Form):
    suite = forms.ModelChoiceField(queryset=Suite.objects.all())
    samples = forms.IntegerField(min_value=1, max_value=100, initial=1)
    labels = forms.CharField(required=False, help_text="only tasks with all these labels: a,b")
    include_flaky = forms.BooleanField(required=False)


@admin.action(description="Launch a run of the selected model configurations")
def launch_runs(modeladmin, request: HttpRequest, queryset: QuerySet) -> HttpResponse | None:
    if _refused(modeladmin, request, Action.RUN_LAUNCH):
        return None
    form = LaunchRunForm(request.POST if "apply" in request.POST else None)
    if form.is_valid():
        labels = [x.strip() for x in form.cleaned_data["labels"].split(",") if x.strip()]
        try:
            runs = actions.runs_launch_many(
                suite=form.cleaned_data["suite"],
                model_configs=list(queryset),
                **_asked(request),
                samples=form.cleaned_data["samples"],
                labels=labels or None,
                include_flaky=form.cleaned_data["include_flaky"],
            )
        except LaunchError as exc:
            modeladmin.message_user(request, str(exc), level=messages.ERROR)
            return None
        modeladmin.message_user(request, launched_message(runs))
        return None
    return TemplateResponse(
        request,
        "admin/runs/launch_run.html",
        {
            **modeladmin.admin_site.each_context(request),
            "title": "Launch a run",
            "form": form,
            "configs": queryset,
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            "opts": modeladmin.model._meta,
        },
    )
