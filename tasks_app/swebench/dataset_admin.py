"""The admin page (staff only) to upload a SWE-bench dataset, and the helpers every admin
upload page uses (``runs.imports.admin`` has the pages of results produced elsewhere).

The page calls the same service as ``ab import-swebench`` and shows its report, or every
problem of a bad file (nothing stored). Mounted under /admin/swebench/ by benchsite.urls.
"""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import path

from benchsite.accounts.access import write_view
from benchsite.accounts.models import Action, Door
from benchsite.api.errors import ApiInputError
from tasks_app.actions import swebench_import
from tasks_app.models import Suite
from tasks_app.swebench.errors import SwebenchInputError
from tasks_app.uploads.files import upload_source


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


def render_admin_page(request: HttpRequest, template: str, context: dict) -> HttpResponse:
    return render(request, template, {**admin.site.each_context(request), **context})


def dataset_upload(request: HttpRequest) -> HttpResponse:
    form = DatasetForm(request.POST or None, request.FILES or None)
    context: dict = {"form": form, "title": "Import a SWE-bench dataset"}
    if request.method == "POST" and form.is_valid():
        upload = form.cleaned_data["file"]
        try:
            context["report"] = swebench_import(
                actor=request.user,
                door=Door.ADMIN,
                request=request,
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
    return render_admin_page(request, "admin/swebench/dataset.html", context)


def admin_write_page(action: Action, view):
    """admin_view: staff only (others go to the admin login), CSRF-protected, never cached;
    write_view: the right ``benchsite.accounts.access`` gives the import, the same as the API's."""
    return admin.site.admin_view(write_view(action, door=Door.ADMIN)(view))


urlpatterns = [
    path(
        "dataset/",
        admin_write_page(Action.SWEBENCH_IMPORT, dataset_upload),
        name="swebench-dataset-upload",
    ),
]
