"""The admin page (staff with the import right) to upload an archive of tasks: task.yaml
files and Harbor task folders, through the same service as the API (``tasks.py``)."""

from __future__ import annotations

from django import forms
from django.http import HttpRequest, HttpResponse
from django.urls import path

from benchsite.accounts.models import Action, Door
from benchsite.api.errors import ApiInputError
from tasks_app.spec import TaskSpecError
from tasks_app.swebench.dataset_admin import admin_write_page, render_admin_page
from tasks_app.uploads.tasks import task_archive_import


class TaskArchiveForm(forms.Form):
    file = forms.FileField(
        help_text="a .zip, .tar, .tar.gz or .tgz of task folders: task.yaml files or Harbor "
        "task folders (task.toml, instruction.md, environment/, tests/, solution/)"
    )


def task_archive_upload(request: HttpRequest) -> HttpResponse:
    form = TaskArchiveForm(request.POST or None, request.FILES or None)
    context: dict = {"form": form, "title": "Import tasks (task.yaml or Harbor folders)"}
    if request.method == "POST" and form.is_valid():
        try:
            context["report"] = task_archive_import(
                upload=form.cleaned_data["file"],
                actor=request.user,
                door=Door.ADMIN,
                request=request,
            )
        except TaskSpecError as exc:
            context["problems"] = [str(problem) for problem in exc.problems]
        except ApiInputError as exc:  # over API_UPLOAD_MAX_BYTES, or an archive refused
            context["problems"] = [str(exc)]
    return render_admin_page(request, "admin/tasks_upload.html", context)


urlpatterns = [
    path(
        "upload/",
        admin_write_page(Action.TASKS_IMPORT, task_archive_upload),
        name="tasks-archive-upload",
    ),
]
