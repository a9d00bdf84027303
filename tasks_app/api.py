"""Suites and tasks over the REST API: reads, and imports of task.yaml archives."""

import datetime as dt
import shutil
import tarfile
import uuid
import zipfile
from pathlib import Path, PurePosixPath
from typing import Annotated

from django.conf import settings
from django.db.models import Q
from django.http import HttpRequest
from django.shortcuts import get_object_or_404
from ninja import Field, File, FilterLookup, FilterSchema, Query, Router, Schema, UploadedFile
from ninja.pagination import paginate

from benchsite.accounts.auth import AUTHENTICATED, PUBLIC_READ, write_throttle
from benchsite.accounts.models import AuditAction
from benchsite.accounts.services import audit_event_record
from benchsite.api_common import Pages, Text
from benchsite.api_errors import ApiInputError, ErrorOut
from tasks_app.models import Suite, Task, TaskSource
from tasks_app.services import tasks_import
from tasks_app.spec import SpecProblem, TaskSpecError

router = Router(tags=["tasks"])

ARCHIVE_SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz")
MAX_ARCHIVE_MEMBERS = 10_000


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
    labels: list[str]
    timeout_sec: int
    max_steps: int | None
    difficulty: str
    instance_version: str
    updated_at: dt.datetime
    url: str = Field(alias="get_absolute_url")


class TaskDetailOut(TaskOut):
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
    response={200: ImportReportOut, 400: ErrorOut, 401: ErrorOut, 413: ErrorOut, 429: ErrorOut},
    auth=AUTHENTICATED,
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
    target = Path(settings.API_UPLOADS_ROOT) / "tasks" / uuid.uuid4().hex
    unpack_upload(file, target)
    try:
        report = tasks_import(directory=target)
    except TaskSpecError as exc:
        shutil.rmtree(target, ignore_errors=True)
        raise TaskSpecError([_relative(problem, target) for problem in exc.problems]) from None
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    audit_event_record(
        actor=request.user,
        action=AuditAction.TASKS_IMPORT,
        objects=[*report.created, *report.updated],
        object_type="tasks_app.task",
        request=request,
        details={
            "file": file.name,
            "directory": str(target),
            "summary": report.summary(),
            "suites": report.suites,
        },
    )
    return {
        "created": report.created,
        "updated": report.updated,
        "unchanged": report.unchanged,
        "suites": report.suites,
        "total": report.total,
    }


def _relative(problem: SpecProblem, root: Path) -> SpecProblem:
    # Name files as they are inside the archive: the unpack directory means nothing to a client.
    name = problem.file
    prefix = str(root) + "/"
    if name.startswith(prefix):
        name = name[len(prefix) :]
    return SpecProblem(name, problem.field, problem.message.replace(prefix, ""), problem.line)


def check_upload_size(upload: UploadedFile) -> None:
    if upload.size is not None and upload.size > settings.API_UPLOAD_MAX_BYTES:
        limit = settings.API_UPLOAD_MAX_BYTES
        raise ApiInputError("file", f"larger than API_UPLOAD_MAX_BYTES ({limit})", status=413)


def unpack_upload(upload: UploadedFile, target: Path) -> None:
    """Unpack an uploaded archive (or a single task.yaml) into ``target``, refusing any member
    that would land outside it, links and oversized contents."""
    check_upload_size(upload)
    name = (upload.name or "").lower()
    target.mkdir(parents=True, exist_ok=False)
    try:
        if name.endswith((".yaml", ".yml")):
            with open(target / "task.yaml", "wb") as out:
                for chunk in upload.chunks():
                    out.write(chunk)
        elif name.endswith(".zip"):
            _unzip(upload, target)
        elif name.endswith((".tar", ".tar.gz", ".tgz")):
            _untar(upload, target)
        else:
            raise ApiInputError(
                "file", f"expected a task.yaml or an archive ({', '.join(ARCHIVE_SUFFIXES)})"
            )
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise


def _safe_member(name: str) -> PurePosixPath:
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or "\x00" in name:
        raise ApiInputError("file", f"archive member {name!r} would land outside the archive")
    return path


def _unzip(upload: UploadedFile, target: Path) -> None:
    try:
        archive = zipfile.ZipFile(upload.file)
    except zipfile.BadZipFile as exc:
        raise ApiInputError("file", f"not a valid zip archive: {exc}") from None
    with archive:
        members = archive.infolist()
        if len(members) > MAX_ARCHIVE_MEMBERS:
            raise ApiInputError("file", f"more than {MAX_ARCHIVE_MEMBERS} files in the archive")
        if sum(m.file_size for m in members) > settings.API_UPLOAD_MAX_BYTES:
            raise ApiInputError("file", "unpacked size exceeds API_UPLOAD_MAX_BYTES", status=413)
        for member in members:
            relative = _safe_member(member.filename)
            if (member.external_attr >> 16) & 0o170000 == 0o120000:
                raise ApiInputError("file", f"archive member {member.filename!r} is a link")
            destination = target.joinpath(*relative.parts)
            if member.is_dir():
                destination.mkdir(parents=True, exist_ok=True)
                continue
            destination.parent.mkdir(parents=True, exist_ok=True)
            try:
                with archive.open(member) as src, open(destination, "wb") as out:
                    shutil.copyfileobj(src, out)
            except (zipfile.BadZipFile, NotImplementedError, OSError) as exc:
                raise ApiInputError("file", f"cannot read {member.filename!r}: {exc}") from None


def _untar(upload: UploadedFile, target: Path) -> None:
    try:
        archive = tarfile.open(fileobj=upload.file, mode="r:*")  # noqa: SIM115 (closed below)
    except tarfile.TarError as exc:
        raise ApiInputError("file", f"not a valid tar archive: {exc}") from None
    with archive:
        try:
            members = archive.getmembers()
        except (tarfile.TarError, EOFError, OSError) as exc:
            raise ApiInputError("file", f"not a valid tar archive: {exc}") from None
        if len(members) > MAX_ARCHIVE_MEMBERS:
            raise ApiInputError("file", f"more than {MAX_ARCHIVE_MEMBERS} files in the archive")
        if sum(m.size for m in members) > settings.API_UPLOAD_MAX_BYTES:
            raise ApiInputError("file", "unpacked size exceeds API_UPLOAD_MAX_BYTES", status=413)
        for member in members:
            _safe_member(member.name)
            if not (member.isfile() or member.isdir()):
                raise ApiInputError("file", f"archive member {member.name!r} is not a plain file")
        try:
            # The "data" filter also refuses absolute paths, escapes and special files.
            archive.extractall(target, members=members, filter="data")
        except (tarfile.TarError, EOFError, OSError) as exc:
            raise ApiInputError("file", f"cannot unpack the archive: {exc}") from None
