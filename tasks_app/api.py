"""Suites and tasks over the REST API: reads, and imports (task.yaml archives, SWE-bench
datasets, predictions, published results and run folders) through the same services as the
`ab` CLI."""

import datetime as dt
import re
import shutil
import uuid
from pathlib import Path
from typing import Annotated

from django.conf import settings
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
from benchsite.accounts.models import AuditAction
from benchsite.accounts.services import audit_event_record
from benchsite.api.common import Pages, Text
from benchsite.api.errors import ApiInputError, ErrorOut
from runs.access import Write
from runs.model_configs import slug_taken_by_other
from tasks_app.models import Suite, Task, TaskSource
from tasks_app.services import tasks_import
from tasks_app.spec import PathRules, SpecProblem, TaskSpecError, load_task_dir
from tasks_app.swebench.importer import swebench_import
from tasks_app.swebench.predictions import predictions_import
from tasks_app.swebench.results import results_import
from tasks_app.uploads.files import read_upload, unpack_upload, upload_source
from tasks_app.uploads.runs import run_import_upload

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
    environment: dict | None = Field(
        None,
        description="SWE-bench: the Python the specification asks for and the one used here "
        "(approximate when they differ) and each backend's gold validation",
    )

    @staticmethod
    def resolve_environment(obj: Task) -> dict | None:
        if obj.source != TaskSource.SWEBENCH:
            return None
        from sandbox.environments.envspec import approximate_pythons

        asked, used = approximate_pythons(
            str(obj.spec.get("repo", "")), str(obj.spec.get("version", ""))
        )
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
                for v in obj.gold_validations.order_by("backend")
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
    auth=write_auth(Write.TASKS_IMPORT),
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
    # Its task files may name files inside the upload only (never a host path, nor another
    # upload's), and a local repository only as a git bundle.
    rules = PathRules.upload(target)
    try:
        _check_suite_names(target, rules)
        report = tasks_import(directory=target, rules=rules)
    except TaskSpecError as exc:
        shutil.rmtree(target, ignore_errors=True)
        raise TaskSpecError([_relative(problem, target) for problem in exc.problems]) from None
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    if not (report.created or report.updated):
        # Nothing points into the unpacked files: keep none of them.
        shutil.rmtree(target, ignore_errors=True)
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


def _check_suite_names(directory: Path, rules: PathRules) -> None:
    # The spec allows dots in a suite name, but suite URLs take slugs only: a dotted suite
    # would import fine and then break every page and API answer that links to it.
    bad = [
        SpecProblem(str(t.path), "suite", f"{t.spec.suite!r}: use letters, digits, - and _")
        for t in load_task_dir(directory, rules=rules)
        if not re.fullmatch(r"[-a-zA-Z0-9_]+", t.spec.suite)
    ]
    if bad:
        raise TaskSpecError(bad)


def _relative(problem: SpecProblem, root: Path) -> SpecProblem:
    # Name files as they are inside the archive: the unpack directory means nothing to a client.
    name = problem.file
    prefix = str(root) + "/"
    if name.startswith(prefix):
        name = name[len(prefix) :]
    return SpecProblem(name, problem.field, problem.message.replace(prefix, ""), problem.line)


# --- SWE-bench: datasets, predictions, published results -------------------------------------

SuiteName = Annotated[Text, Field(min_length=1, max_length=100, pattern=r"^[-a-zA-Z0-9_]+$")]
ModelName = Annotated[Text, Field(min_length=1, max_length=200)]


class SwebenchImportIn(Schema):
    suite: SuiteName
    dataset_version: Text = Field("", max_length=100)
    image_template: Text = Field("", max_length=300)
    description: Text = ""


class PredictionsImportIn(Schema):
    suite: SuiteName
    model: ModelName
    enqueue: bool = Field(True, description="send the attempts to the workers for evaluation")


RUN_DATE = Field(
    None,
    description="when the run ran, used when the files say nothing (metadata.yaml, an Inspect "
    "log, trajectories' timestamps); without either the run's date is unknown: shown as its "
    "import time and left out of date filters and the over-time chart unless asked",
)


class ResultsImportIn(Schema):
    suite: SuiteName
    model: ModelName
    ignore_unknown: bool = False
    skip_bad: bool = Field(False, description="leave bad files out (listed) instead of failing")
    date: dt.datetime | None = RUN_DATE


class RunImportIn(Schema):
    suite: SuiteName
    model: ModelName
    dry_run: bool = Field(False, description="read and check everything, store nothing")
    skip_bad: bool = Field(False, description="leave bad files out (listed) instead of failing")
    date: dt.datetime | None = RUN_DATE


class RunImportOut(Schema):
    run: str = Field(description="the run's public id; empty for a dry run")
    suite: str
    model: str
    dry_run: bool
    plan: list[str] = Field(description="what the folder holds, format by format")
    suite_size: int
    resolved: int
    counts: dict[str, int] = Field(description="attempts by outcome: resolved, a reason, ...")
    added: int
    updated: int
    unchanged: int
    skipped: list[str] = Field(description="bad files left out (skip_bad)")
    date: str = Field(description="the run's date (ISO); empty when unknown")
    date_source: str = Field(description="metadata, inspect, trajectories, given or unknown")


class PredictionsReportOut(Schema):
    run: str
    suite: str
    model: str
    queued: int
    # Patches kept without evaluation (``enqueue`` false): POST /api/runs/{id}/evaluate runs them.
    not_evaluated: int
    empty_patch: list[str]
    no_prediction: list[str]


class ResultsReportOut(Schema):
    run: str
    suite: str
    model: str
    suite_size: int
    resolved: int
    missing: int
    counts: dict[str, int]
    unchanged: bool
    replaced_runs: int
    ignored_unknown: list[str]
    skipped_files: list[str]
    plan: list[str] = Field(description="what the upload holds, format by format")


@router.post(
    "/imports/swebench",
    response={200: ImportReportOut, **IMPORT_ERRORS},
    auth=write_auth(Write.SWEBENCH_IMPORT),
    throttle=write_throttle,
    summary="Import a SWE-bench dataset file (.jsonl, .json, .parquet) as a suite",
)
def swebench_import_endpoint(
    request: HttpRequest, payload: Form[SwebenchImportIn], file: File[UploadedFile]
):
    report = swebench_import(
        source=upload_source(file),
        filename=file.name or "upload.jsonl",
        suite_name=payload.suite,
        dataset_version=payload.dataset_version,
        image_template=payload.image_template,
        description=payload.description,
    )
    audit_event_record(
        actor=request.user,
        action=AuditAction.SWEBENCH_IMPORT,
        objects=[*report.created, *report.updated],
        object_type="tasks_app.task",
        request=request,
        details={"file": file.name, "suite": payload.suite, "summary": report.summary()},
    )
    return {
        "created": report.created,
        "updated": report.updated,
        "unchanged": report.unchanged,
        "suites": report.suites,
        "total": report.total,
    }


def _check_external_name(name: str) -> None:
    other = slug_taken_by_other(name)
    if other is not None:
        raise ApiInputError(
            "model", f"{name!r} would share its slug {other.slug!r} with {other.name!r}"
        )


@router.post(
    "/imports/predictions",
    response={200: PredictionsReportOut, **IMPORT_ERRORS},
    auth=write_auth(Write.PREDICTIONS_IMPORT),
    throttle=write_throttle,
    summary="Import a predictions file: a run that evaluates each patch on the suite",
)
def predictions_import_endpoint(
    request: HttpRequest, payload: Form[PredictionsImportIn], file: File[UploadedFile]
):
    _check_external_name(payload.model)
    report = predictions_import(
        source=upload_source(file),
        filename=file.name or "predictions.jsonl",
        suite_name=payload.suite,
        model_name=payload.model,
        enqueue=payload.enqueue,
        created_by=request.user,
    )
    audit_event_record(
        actor=request.user,
        action=AuditAction.PREDICTIONS_IMPORT,
        objects=[report.run_id],
        object_type="runs.run",
        request=request,
        details={"file": file.name, "suite": payload.suite, "summary": report.summary()},
    )
    return {
        "run": report.run_id,
        "suite": report.suite,
        "model": report.model,
        "queued": report.queued,
        "not_evaluated": report.not_evaluated,
        "empty_patch": report.empty_patch,
        "no_prediction": report.no_prediction,
    }


@router.post(
    "/imports/results",
    response={200: ResultsReportOut, **IMPORT_ERRORS},
    auth=write_auth(Write.RESULTS_IMPORT),
    throttle=write_throttle,
    summary="Import published results (run report, report.json files or a zip of them)",
)
def results_import_endpoint(
    request: HttpRequest,
    payload: Form[ResultsImportIn],
    file: File[UploadedFile],
    predictions: File[UploadedFile | None] = None,
):
    _check_external_name(payload.model)
    report = results_import(
        source=read_upload(file),
        filename=file.name or "results.json",
        suite_name=payload.suite,
        model_name=payload.model,
        predictions=read_upload(predictions) if predictions is not None else None,
        ignore_unknown=payload.ignore_unknown,
        skip_bad=payload.skip_bad,
        date=payload.date,
        created_by=request.user,
    )
    audit_event_record(
        actor=request.user,
        action=AuditAction.RESULTS_IMPORT,
        objects=[report.run_id],
        object_type="runs.run",
        request=request,
        details={"file": file.name, "suite": payload.suite, "summary": report.summary()},
    )
    return {
        "run": report.run_id,
        "suite": report.suite,
        "model": report.model,
        "suite_size": report.suite_size,
        "resolved": report.resolved,
        "missing": report.missing,
        "counts": report.counts,
        "unchanged": report.unchanged,
        "replaced_runs": report.replaced_runs,
        "ignored_unknown": report.ignored_unknown,
        "skipped_files": report.skipped_files,
        "plan": report.plan,
    }


@router.post(
    "/imports/run",
    response={200: RunImportOut, **IMPORT_ERRORS},
    auth=write_auth(Write.RUN_IMPORT),
    throttle=write_throttle,
    summary="Import a run folder (trajectories, reports, predictions, Inspect logs)",
    description=(
        "Multipart field `file`: a .zip, .tar, .tar.gz or .tgz of the run's folder (or one "
        ".eval, .json, .jsonl or .traj file). The same import as `ab import-run`: the plan "
        "first, then one published run of `model` on `suite` (created or extended from an "
        "instances.jsonl in the folder). The unpacked upload is removed afterwards: "
        "trajectories and reports are copied into the attempts' artifact folders."
    ),
)
def run_import_endpoint(request: HttpRequest, payload: Form[RunImportIn], file: File[UploadedFile]):
    _check_external_name(payload.model)
    report = run_import_upload(
        upload=file,
        suite_name=payload.suite,
        model_name=payload.model,
        dry_run=payload.dry_run,
        skip_bad=payload.skip_bad,
        date=payload.date,
        created_by=request.user,
    )
    name = Path(file.name or "upload").name
    if not payload.dry_run:
        audit_event_record(
            actor=request.user,
            action=Write.RUN_IMPORT,
            objects=[report.run_id],
            object_type="runs.run",
            request=request,
            details={"file": name, "suite": payload.suite, "summary": report.summary()},
        )
    return {
        "run": report.run_id,
        "suite": report.suite,
        "model": report.model,
        "dry_run": report.dry_run,
        "plan": report.plan,
        "suite_size": report.suite_size,
        "resolved": report.resolved,
        "counts": report.counts,
        "added": report.added,
        "updated": report.updated,
        "unchanged": report.unchanged,
        "skipped": report.skipped,
        "date": report.date,
        "date_source": report.date_source,
    }
