"""Imports of results produced elsewhere over the REST API: predictions to evaluate, published
results and run folders, through the same services as ``ab import-predictions``,
``ab import-results`` and ``ab import-run`` and the admin's upload pages
(``runs.imports.actions``, which record the audit event).

The paths, tags and operation ids are those these endpoints had under ``tasks_app.api``, so the
schema and generated clients stay the same."""

import datetime as dt

from django.http import HttpRequest
from ninja import Field, File, Form, Router, Schema, UploadedFile

from benchsite.accounts.auth import write_auth, write_throttle
from benchsite.accounts.models import Action, Door
from benchsite.api.errors import ApiInputError
from runs.imports import actions
from runs.model_configs import slug_taken_by_other
from tasks_app.api import IMPORT_ERRORS, ModelName, SuiteName
from tasks_app.uploads.files import read_upload, upload_source

router = Router(tags=["tasks"])


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


def _check_external_name(name: str) -> None:
    other = slug_taken_by_other(name)
    if other is not None:
        raise ApiInputError(
            "model", f"{name!r} would share its slug {other.slug!r} with {other.name!r}"
        )


@router.post(
    "/imports/predictions",
    operation_id="tasks_app_api_predictions_import_endpoint",
    response={200: PredictionsReportOut, **IMPORT_ERRORS},
    auth=write_auth(Action.PREDICTIONS_IMPORT),
    throttle=write_throttle,
    summary="Import a predictions file: a run that evaluates each patch on the suite",
)
def predictions_import_endpoint(
    request: HttpRequest, payload: Form[PredictionsImportIn], file: File[UploadedFile]
):
    _check_external_name(payload.model)
    report = actions.predictions_import(
        actor=request.user,
        door=Door.API,
        request=request,
        source=upload_source(file),
        filename=file.name or "predictions.jsonl",
        suite_name=payload.suite,
        model_name=payload.model,
        enqueue=payload.enqueue,
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
    operation_id="tasks_app_api_results_import_endpoint",
    response={200: ResultsReportOut, **IMPORT_ERRORS},
    auth=write_auth(Action.RESULTS_IMPORT),
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
    report = actions.results_import(
        actor=request.user,
        door=Door.API,
        request=request,
        source=upload_source(file),  # a large upload is read from where Django spooled it
        filename=file.name or "results.json",
        suite_name=payload.suite,
        model_name=payload.model,
        predictions=read_upload(predictions) if predictions is not None else None,
        ignore_unknown=payload.ignore_unknown,
        skip_bad=payload.skip_bad,
        date=payload.date,
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
    operation_id="tasks_app_api_run_import_endpoint",
    response={200: RunImportOut, **IMPORT_ERRORS},
    auth=write_auth(Action.RUN_IMPORT),
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
    report = actions.run_import_upload(
        actor=request.user,
        door=Door.API,
        request=request,
        upload=file,
        suite_name=payload.suite,
        model_name=payload.model,
        dry_run=payload.dry_run,
        skip_bad=payload.skip_bad,
        date=payload.date,
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
