"""Suites and tasks over the REST API: reads, and imports (task.yaml archives, SWE-bench
datasets) through the same services as the `ab` CLI. Imports of results produced elsewhere
(predictions, published results, run folders) are in ``runs.imports.api``."""

import datetime as dt
import uuid
from typing import Annotated

from django.db.models import Q
from django.http import HttpRequest
from django.shortcuts import get_object_or_404
from ninja import (
    Field,
    File,
    FilterLookup,
    FilterSchema,
    Form,
    Query,
    Router,
    Schema,
    UploadedFile,
)
from ninja.pagination import paginate

from benchsite.accounts.auth import PUBLIC_READ, write_auth, write_throttle
from benchsite.accounts.models import Action, Door
from benchsite.api.common import Pages, Text
from benchsite.api.errors import ErrorOut
from tasks_app.actions import swebench_import
from tasks_app.models import Suite, Task, TaskSource
from tasks_app.uploads.files import upload_source
from tasks_app.uploads.tasks import task_archive_import

router = Router(tags=["tasks"])

IMPORT_ERRORS = {
    400: ErrorOut,
    401: ErrorOut,
    403: ErrorOut,
    413: ErrorOut,
    422: ErrorOut,
    429: ErrorOut,
}


class SuiteOut(Schema):
    name: str
    description: str
    source: str
    task_count: int
    created_at: dt.datetime
    updated_at: dt.datetime
    url: str = Field(alias="get_absolute_url")


class SuiteFilter(FilterSchema):
    source: TaskSource | None = None
    q: Annotated[Text | None, FilterLookup(["name__icontains", "description__icontains"])] = None


class TaskOut(Schema):
    public_id: uuid.UUID
    suite: str = Field(alias="suite.name")
    task_id: str
    source: str
    revision: int
    dataset_version: str
    repo_url: str
    repo_commit: str
    docker_image: str
    # The image as last pulled here: repository digest, where from (a mirror's reference,
    # or "local"), when, and the pull under way or how the last one failed.
    image_digest: str
    image_source: str
    image_pulled_at: dt.datetime | None
    image_status: str
    labels: list[str]
    timeout_sec: int
    max_steps: int | None
    difficulty: str
    instance_version: str
    updated_at: dt.datetime
    url: str = Field(alias="get_absolute_url")


class TaskDetailOut(TaskOut):
    # The pull's numbers (layers, bytes, eta_sec, state), as the task page's live view reads.
    image_progress: dict
    workdir: str
    setup_commands: list[str]
    setup_network: bool
    test_command: str
    problem_statement: str
    hints_text: str
    fail_to_pass: list[str]
    pass_to_pass: list[str]
    environment_setup_commit: str
    harness_min_version: str
    spec: dict
    environment: dict | None = Field(
        None,
        description="SWE-bench: the Python the specification asks for and the one used here "
        "(approximate when they differ) and each backend's gold validation",
    )

    @staticmethod
    def resolve_environment(obj: Task) -> dict | None:
        if obj.source != TaskSource.SWEBENCH:
            return None
        validations = list(obj.gold_validations.order_by("backend"))
        # Stored at import (reading the official harness here cost seconds: issue 29); a task
        # imported before the columns existed has what a gold validation recorded.
        asked, used = obj.python_asked, obj.python_used
        if not asked:
            done = next((v for v in validations if v.python_used), None)
            asked, used = (done.python_asked, done.python_used) if done else ("", "")
        return {
            "python_asked": asked,
            "python_used": used,
            "approximate": bool(asked) and asked != used,
            "gold_validations": [
                {
                    "backend": v.backend,
                    "status": v.status,
                    "gold_grade": v.gold_grade,
                    "empty_grade": v.empty_grade,
                    "reason": v.reason,
                    "failing_tests": v.failing_tests,
                    "python_asked": v.python_asked,
                    "python_used": v.python_used,
                    "installs_as_of": v.installs_as_of,
                }
                for v in validations
            ],
        }


class TaskFilter(FilterSchema):
    suite: Annotated[Text | None, FilterLookup("suite__name")] = None
    source: TaskSource | None = None
    label: Text | None = Field(None, description="tasks carrying this label")
    q: Annotated[Text | None, FilterLookup(["task_id__icontains", "repo_url__icontains"])] = None

    def filter_label(self, value: str | None) -> Q:
        return Q(labels_text__contains=f",{value},") if value else Q()


class ImportReportOut(Schema):
    created: list[str]
    updated: list[str]
    unchanged: list[str]
    suites: list[str]
    total: int


@router.get("/suites", response={200: list[SuiteOut]}, auth=PUBLIC_READ, summary="List suites")
@paginate(Pages)
def suite_list(request: HttpRequest, filters: Query[SuiteFilter]):
    return filters.filter(Suite.objects.with_task_counts().order_by("name"))


@router.get(
    "/suites/{name}",
    response={200: SuiteOut, 404: ErrorOut},
    auth=PUBLIC_READ,
    summary="One suite",
)
def suite_detail(request: HttpRequest, name: Text):
    return get_object_or_404(Suite.objects.with_task_counts(), name=name)


@router.get("/tasks", response={200: list[TaskOut]}, auth=PUBLIC_READ, summary="List tasks")
@paginate(Pages)
def task_list(request: HttpRequest, filters: Query[TaskFilter]):
    tasks = Task.objects.select_related("suite").order_by("suite__name", "task_id")
    return filters.filter(tasks)


@router.get(
    "/tasks/{public_id}",
    response={200: TaskDetailOut, 404: ErrorOut},
    auth=PUBLIC_READ,
    summary="One task, with its spec",
)
def task_detail(request: HttpRequest, public_id: uuid.UUID):
    return get_object_or_404(Task.objects.select_related("suite"), public_id=public_id)


@router.post(
    "/imports/tasks",
    response={
        200: ImportReportOut,
        400: ErrorOut,
        401: ErrorOut,
        403: ErrorOut,
        413: ErrorOut,
        429: ErrorOut,
    },
    auth=write_auth(Action.TASKS_IMPORT),
    throttle=write_throttle,
    summary="Import task.yaml files from an uploaded archive",
    description=(
        "Multipart field `file`: a .zip, .tar, .tar.gz or .tgz of task directories (or one "
        "task.yaml). Every file is validated first; nothing is imported if any is wrong. "
        "The archive is kept unpacked under API_UPLOADS_ROOT, since relative repo URLs and "
        "reference solutions point into it."
    ),
)
def task_import(request: HttpRequest, file: File[UploadedFile]):
    report = task_archive_import(upload=file, actor=request.user, door=Door.API, request=request)
    return {
        "created": report.created,
        "updated": report.updated,
        "unchanged": report.unchanged,
        "suites": report.suites,
        "total": report.total,
    }


# --- SWE-bench datasets ---------------------------------------------------------------------------

SuiteName = Annotated[Text, Field(min_length=1, max_length=100, pattern=r"^[-a-zA-Z0-9_]+$")]
ModelName = Annotated[Text, Field(min_length=1, max_length=200)]


class SwebenchImportIn(Schema):
    suite: SuiteName
    dataset_version: Text = Field("", max_length=100)
    image_template: Text = Field("", max_length=300)
    description: Text = ""


@router.post(
    "/imports/swebench",
    response={200: ImportReportOut, **IMPORT_ERRORS},
    auth=write_auth(Action.SWEBENCH_IMPORT),
    throttle=write_throttle,
    summary="Import a SWE-bench dataset file (.jsonl, .json, .parquet) as a suite",
)
def swebench_import_endpoint(
    request: HttpRequest, payload: Form[SwebenchImportIn], file: File[UploadedFile]
):
    report = swebench_import(
        actor=request.user,
        door=Door.API,
        request=request,
        source=upload_source(file),
        filename=file.name or "upload.jsonl",
        suite_name=payload.suite,
        dataset_version=payload.dataset_version,
        image_template=payload.image_template,
        description=payload.description,
    )
    return {
        "created": report.created,
        "updated": report.updated,
        "unchanged": report.unchanged,
        "suites": report.suites,
        "total": report.total,
    }
