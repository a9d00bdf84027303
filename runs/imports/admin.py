"""Admin pages (staff only) to upload results produced elsewhere: SWE-bench predictions,
published results and run folders.

Each page calls the same service as the ``ab`` command (``runs.imports.actions``, which
records the audit event) and shows its report, or every problem of a bad file (nothing
stored). Mounted under /admin/swebench/ by benchsite.urls,
beside the dataset page (``tasks_app.swebench.dataset_admin``), whose helpers it shares.
"""

from __future__ import annotations

from django import forms
from django.http import HttpRequest, HttpResponse
from django.urls import path

from benchsite.accounts.models import Action, Door
from benchsite.api.errors import ApiInputError
from runs.imports import actions
from tasks_app.models import Suite, TaskSource
from tasks_app.swebench.dataset_admin import admin_write_page, render_admin_page
from tasks_app.swebench.errors import SwebenchInputError
from tasks_app.uploads.files import upload_source


def _swebench_suites() -> forms.ModelChoiceField:
    return forms.ModelChoiceField(
        queryset=Suite.objects.filter(source=TaskSource.SWEBENCH).order_by("name"),
        to_field_name="name",
    )


class PredictionsForm(forms.Form):
    file = forms.FileField(
        help_text="instance_id / model_name_or_path / model_patch: .jsonl, .json list or object"
    )
    suite = _swebench_suites()
    model = forms.CharField(max_length=200, help_text="leaderboard name of the system")
    enqueue = forms.BooleanField(
        required=False, label="Evaluate now", help_text="send the attempts to the workers"
    )


RUN_DATE_HELP = (
    "when the run ran (YYYY-MM-DD), if its files do not say; else its date is unknown: shown "
    "as the import's and left out of date filters"
)


class ResultsForm(forms.Form):
    file = forms.FileField(
        help_text="a harness run report (.json), a report.json, or a .zip of report files"
    )
    suite = _swebench_suites()
    model = forms.CharField(max_length=200, help_text="leaderboard name of the system")
    predictions = forms.FileField(required=False, help_text="optional: adds each patch")
    ignore_unknown = forms.BooleanField(
        required=False, help_text="skip instances the suite does not hold (default: error)"
    )
    skip_bad = forms.BooleanField(
        required=False, help_text="leave bad files out and list them (default: import nothing)"
    )
    date = forms.DateTimeField(required=False, help_text=RUN_DATE_HELP)


class RunFolderForm(forms.Form):
    file = forms.FileField(
        help_text="a .zip/.tar(.gz) of the run folder (trajs/, logs/, preds, instances.jsonl), "
        "or one .eval, .traj, .json or .jsonl file"
    )
    suite = forms.SlugField(
        max_length=100, help_text="created or extended from an instances.jsonl in the folder"
    )
    model = forms.CharField(max_length=200, help_text="leaderboard name of the system")
    dry_run = forms.BooleanField(required=False, help_text="show the plan, store nothing")
    skip_bad = forms.BooleanField(
        required=False, help_text="leave bad files out and list them (default: import nothing)"
    )
    date = forms.DateTimeField(required=False, help_text=RUN_DATE_HELP)


def predictions_upload(request: HttpRequest) -> HttpResponse:
    form = PredictionsForm(request.POST or None, request.FILES or None)
    context: dict = {"form": form, "title": "Evaluate SWE-bench predictions"}
    if request.method == "POST" and form.is_valid():
        upload = form.cleaned_data["file"]
        try:
            context["report"] = actions.predictions_import(
                actor=request.user,
                door=Door.ADMIN,
                request=request,
                source=upload_source(upload),  # a large one from disk, not memory
                filename=upload.name,
                suite_name=form.cleaned_data["suite"].name,
                model_name=form.cleaned_data["model"],
                enqueue=form.cleaned_data["enqueue"],
            )
        except SwebenchInputError as exc:
            context["problems"] = exc.lines()
        except ApiInputError as exc:  # over API_UPLOAD_MAX_BYTES
            context["problems"] = [str(exc)]
    return render_admin_page(request, "admin/swebench/predictions.html", context)


def results_upload(request: HttpRequest) -> HttpResponse:
    form = ResultsForm(request.POST or None, request.FILES or None)
    context: dict = {"form": form, "title": "Import published SWE-bench results"}
    if request.method == "POST" and form.is_valid():
        upload = form.cleaned_data["file"]
        predictions = form.cleaned_data["predictions"]
        try:
            context["report"] = actions.results_import(
                actor=request.user,
                door=Door.ADMIN,
                request=request,
                source=upload_source(upload),  # a large one from disk, not memory
                filename=upload.name,
                suite_name=form.cleaned_data["suite"].name,
                model_name=form.cleaned_data["model"],
                predictions=predictions.read() if predictions else None,
                ignore_unknown=form.cleaned_data["ignore_unknown"],
                skip_bad=form.cleaned_data["skip_bad"],
                date=form.cleaned_data["date"],
            )
        except SwebenchInputError as exc:
            context["problems"] = exc.lines()
        except ApiInputError as exc:  # over API_UPLOAD_MAX_BYTES
            context["problems"] = [str(exc)]
    return render_admin_page(request, "admin/swebench/results.html", context)


def run_folder_upload(request: HttpRequest) -> HttpResponse:
    form = RunFolderForm(request.POST or None, request.FILES or None)
    context: dict = {"form": form, "title": "Import a run folder"}
    if request.method == "POST" and form.is_valid():
        try:
            context["report"] = actions.run_import_upload(
                actor=request.user,
                door=Door.ADMIN,
                request=request,
                upload=form.cleaned_data["file"],
                suite_name=form.cleaned_data["suite"],
                model_name=form.cleaned_data["model"],
                dry_run=form.cleaned_data["dry_run"],
                skip_bad=form.cleaned_data["skip_bad"],
                date=form.cleaned_data["date"],
            )
        except SwebenchInputError as exc:
            context["problems"] = exc.lines()
        except ApiInputError as exc:
            context["problems"] = [str(exc)]
    return render_admin_page(request, "admin/swebench/run_folder.html", context)


urlpatterns = [
    path(
        "predictions/",
        admin_write_page(Action.PREDICTIONS_IMPORT, predictions_upload),
        name="swebench-predictions-upload",
    ),
    path(
        "results/",
        admin_write_page(Action.RESULTS_IMPORT, results_upload),
        name="swebench-results-upload",
    ),
    path(
        "run/", admin_write_page(Action.RUN_IMPORT, run_folder_upload), name="swebench-run-upload"
    ),
]
