"""Admin pages (staff only) to upload SWE-bench datasets, predictions, published results and
run folders.

Each page calls the same service as the ``ab`` command and shows its report, or every
problem of a bad file (nothing stored). Mounted under /admin/swebench/ by benchsite.urls.
"""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import path

from benchsite.api.errors import ApiInputError
from runs.access import Write, write_view
from tasks_app.models import Suite, TaskSource
from tasks_app.swebench.errors import SwebenchInputError
from tasks_app.swebench.importer import swebench_import
from tasks_app.swebench.predictions import predictions_import
from tasks_app.swebench.results import results_import
from tasks_app.uploads.files import upload_source
from tasks_app.uploads.runs import run_import_upload


class DatasetForm(forms.Form):
    file = forms.FileField(help_text="SWE-bench instances: .jsonl, a .json list, or .parquet")
    suite = forms.SlugField(max_length=100, help_text="e.g. swebench-lite; created if new")
    dataset_version = forms.CharField(
        max_length=100, required=False, help_text="recorded with each task revision"
    )
    image_template = forms.CharField(
        max_length=300,
        required=False,
        help_text="optional image name template: {key} {instance_id} {repo} {version}",
    )


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


def _page(request: HttpRequest, template: str, context: dict) -> HttpResponse:
    return render(request, template, {**admin.site.each_context(request), **context})


def dataset_upload(request: HttpRequest) -> HttpResponse:
    form = DatasetForm(request.POST or None, request.FILES or None)
    context: dict = {"form": form, "title": "Import a SWE-bench dataset"}
    if request.method == "POST" and form.is_valid():
        upload = form.cleaned_data["file"]
        try:
            context["report"] = swebench_import(
                source=upload_source(upload),  # a large one from disk, not memory
                filename=upload.name,
                suite_name=form.cleaned_data["suite"],
                dataset_version=form.cleaned_data["dataset_version"],
                image_template=form.cleaned_data["image_template"],
            )
            context["suite"] = Suite.objects.get(name=form.cleaned_data["suite"])
        except SwebenchInputError as exc:
            context["problems"] = exc.lines()
        except ApiInputError as exc:  # over API_UPLOAD_MAX_BYTES
            context["problems"] = [str(exc)]
    return _page(request, "admin/swebench/dataset.html", context)


def predictions_upload(request: HttpRequest) -> HttpResponse:
    form = PredictionsForm(request.POST or None, request.FILES or None)
    context: dict = {"form": form, "title": "Evaluate SWE-bench predictions"}
    if request.method == "POST" and form.is_valid():
        upload = form.cleaned_data["file"]
        try:
            context["report"] = predictions_import(
                source=upload_source(upload),  # a large one from disk, not memory
                filename=upload.name,
                suite_name=form.cleaned_data["suite"].name,
                model_name=form.cleaned_data["model"],
                enqueue=form.cleaned_data["enqueue"],
                created_by=request.user,
            )
        except SwebenchInputError as exc:
            context["problems"] = exc.lines()
        except ApiInputError as exc:  # over API_UPLOAD_MAX_BYTES
            context["problems"] = [str(exc)]
    return _page(request, "admin/swebench/predictions.html", context)


def results_upload(request: HttpRequest) -> HttpResponse:
    form = ResultsForm(request.POST or None, request.FILES or None)
    context: dict = {"form": form, "title": "Import published SWE-bench results"}
    if request.method == "POST" and form.is_valid():
        upload = form.cleaned_data["file"]
        predictions = form.cleaned_data["predictions"]
        try:
            context["report"] = results_import(
                source=upload_source(upload),  # a large one from disk, not memory
                filename=upload.name,
                suite_name=form.cleaned_data["suite"].name,
                model_name=form.cleaned_data["model"],
                predictions=predictions.read() if predictions else None,
                ignore_unknown=form.cleaned_data["ignore_unknown"],
                skip_bad=form.cleaned_data["skip_bad"],
                date=form.cleaned_data["date"],
                created_by=request.user,
            )
        except SwebenchInputError as exc:
            context["problems"] = exc.lines()
        except ApiInputError as exc:  # over API_UPLOAD_MAX_BYTES
            context["problems"] = [str(exc)]
    return _page(request, "admin/swebench/results.html", context)


def run_folder_upload(request: HttpRequest) -> HttpResponse:
    form = RunFolderForm(request.POST or None, request.FILES or None)
    context: dict = {"form": form, "title": "Import a run folder"}
    if request.method == "POST" and form.is_valid():
        try:
            context["report"] = run_import_upload(
                upload=form.cleaned_data["file"],
                suite_name=form.cleaned_data["suite"],
                model_name=form.cleaned_data["model"],
                dry_run=form.cleaned_data["dry_run"],
                skip_bad=form.cleaned_data["skip_bad"],
                date=form.cleaned_data["date"],
                created_by=request.user,
            )
        except SwebenchInputError as exc:
            context["problems"] = exc.lines()
        except ApiInputError as exc:
            context["problems"] = [str(exc)]
    return _page(request, "admin/swebench/run_folder.html", context)


def _admin_page(action: Write, view):
    """admin_view: staff only (others go to the admin login), CSRF-protected, never cached;
    write_view: the right ``runs.access`` gives the import, the same as the API's."""
    return admin.site.admin_view(write_view(action)(view))


urlpatterns = [
    path(
        "dataset/",
        _admin_page(Write.SWEBENCH_IMPORT, dataset_upload),
        name="swebench-dataset-upload",
    ),
    path(
        "predictions/",
        _admin_page(Write.PREDICTIONS_IMPORT, predictions_upload),
        name="swebench-predictions-upload",
    ),
    path(
        "results/",
        _admin_page(Write.RESULTS_IMPORT, results_upload),
        name="swebench-results-upload",
    ),
    path("run/", _admin_page(Write.RUN_IMPORT, run_folder_upload), name="swebench-run-upload"),
]
