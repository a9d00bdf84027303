"""Runs, attempts, model configurations and failure reasons over the REST API.

Reads are querysets; writes call the same services as the pages, the admin and the CLI
(``runs.actions``, ``runs.model_configs``), which record the audit event themselves.
"""

import contextlib
import mimetypes
import uuid
from typing import Literal

from django.core.exceptions import PermissionDenied
from django.db.models import Q
from django.http import FileResponse, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from ninja import Query, Router, Status
from ninja.pagination import paginate

from benchsite.accounts.access import can_read_artifacts
from benchsite.accounts.auth import ARTIFACT_READ, PUBLIC_READ, write_auth, write_throttle
from benchsite.accounts.models import Action, Door
from benchsite.api.common import Pages, Text, refuse_unknown_params
from benchsite.api.errors import ApiConflict, ApiInputError, ErrorOut
from runs import actions, artifacts
from runs.api.results import router as results_router
from runs.api.schemas import (
    AttemptDetailOut,
    AttemptListQuery,
    AttemptPageOut,
    FailureReasonFilter,
    FailureReasonOut,
    ModelConfigFilter,
    ModelConfigIn,
    ModelConfigOut,
    RunActionOut,
    RunFilter,
    RunLaunchIn,
    RunOut,
)
from runs.api.transcript import TranscriptOut
from runs.exports import streamed
from runs.model_configs import model_config_by_ref, model_config_create
from runs.models import Attempt, FailureReason, ModelConfig, Run
from runs.results.attempt_list import (
    EXPORT_COLUMNS,
    FilterError,
    attempt_selection,
    export_records,
    list_rows,
)
from runs.services import LaunchError
from tasks_app.models import Suite

router = Router(tags=["runs"])
router.add_router("", results_router)

WRITE_ERRORS = {400: ErrorOut, 401: ErrorOut, 403: ErrorOut, 422: ErrorOut, 429: ErrorOut}
_ATTEMPT_RELATED = ("run", "suite", "task", "model_config")


def model_q(value: str | None, field: str = "model_config") -> Q:
    """Match a model configuration by name, slug or public id."""
    if not value:
        return Q()
    q = Q(**{f"{field}__name": value}) | Q(**{f"{field}__slug": value})
    with contextlib.suppress(ValueError):
        q |= Q(**{f"{field}__public_id": uuid.UUID(value)})
    return q


def suite_or_404(name: str) -> Suite:
    suite = Suite.objects.filter(name=name).first()
    if suite is None:
        raise ApiInputError("suite", f"no suite named {name!r}", status=404, location="query")
    return suite


def model_or_404(ref: str, field: str = "model") -> ModelConfig:
    config = model_config_by_ref(ref)
    if config is None:
        raise ApiInputError(field, f"no model configuration {ref!r}", status=404)
    return config


class _RunFilter(RunFilter):
    def filter_model(self, value: str | None) -> Q:
        return model_q(value)


# --- Failure reasons and model configurations ------------------------------------------------


@router.get(
    "/failure-reasons",
    response={200: list[FailureReasonOut]},
    auth=PUBLIC_READ,
    summary="The failure taxonomy, in precedence order",
)
@paginate(Pages)
def failure_reason_list(request: HttpRequest, filters: Query[FailureReasonFilter]):
    return filters.filter(FailureReason.objects.order_by("precedence"))


@router.get(
    "/model-configs",
    response={200: list[ModelConfigOut]},
    auth=PUBLIC_READ,
    summary="List model configurations",
)
@paginate(Pages)
def model_config_list(request: HttpRequest, filters: Query[ModelConfigFilter]):
    return filters.filter(ModelConfig.objects.order_by("name"))


@router.get(
    "/model-configs/{ref}",
    response={200: ModelConfigOut, 404: ErrorOut},
    auth=PUBLIC_READ,
    summary="One model configuration, by name, slug or public id",
)
def model_config_detail(request: HttpRequest, ref: Text):
    return model_or_404(ref, field="ref")


@router.post(
    "/model-configs",
    response={
        201: ModelConfigOut,
        400: ErrorOut,
        401: ErrorOut,
        403: ErrorOut,
        422: ErrorOut,
        429: ErrorOut,
    },
    auth=write_auth(Action.MODEL_CONFIG_CREATE),
    throttle=write_throttle,
    summary="Create a model configuration",
)
def model_config_create_endpoint(request: HttpRequest, payload: ModelConfigIn):
    # Setting base_url or api_key_env needs a superuser too (403 otherwise), and is audited.
    config = model_config_create(
        fields=payload.dict(), actor=request.user, door=Door.API, request=request
    )
    return Status(201, config)


# --- Runs ------------------------------------------------------------------------------------


@router.get("/runs", response={200: list[RunOut]}, auth=PUBLIC_READ, summary="List runs")
@paginate(Pages)
def run_list(request: HttpRequest, filters: Query[_RunFilter]):
    runs = Run.objects.select_related("suite", "model_config", "created_by").order_by(
        "-created_at", "-id"
    )
    return filters.filter(runs)


def _run(public_id: uuid.UUID) -> Run:
    return get_object_or_404(
        Run.objects.select_related("suite", "model_config", "created_by"), public_id=public_id
    )


@router.get(
    "/runs/{public_id}", response={200: RunOut, 404: ErrorOut}, auth=PUBLIC_READ, summary="A run"
)
def run_detail(request: HttpRequest, public_id: uuid.UUID):
    return _run(public_id)


@router.post(
    "/runs",
    response={201: RunOut, **WRITE_ERRORS, 404: ErrorOut},
    auth=write_auth(Action.RUN_LAUNCH),
    throttle=write_throttle,
    summary="Launch a run: selected tasks of a suite x one model configuration x samples",
)
def run_launch_endpoint(request: HttpRequest, payload: RunLaunchIn):
    suite = suite_or_404(payload.suite)
    config = model_or_404(payload.model)
    try:
        run = actions.run_launch(
            suite=suite,
            model_config=config,
            actor=request.user,
            door=Door.API,
            request=request,
            samples=payload.samples,
            labels=payload.labels or None,
            task_ids=payload.task_ids or None,
            include_flaky=payload.include_flaky,
            backend=payload.backend,
        )
    except LaunchError as exc:
        message = str(exc)
        field = message.split(":", 1)[0] if message.startswith(("task_ids:", "samples")) else ""
        raise ApiInputError(field or "selection", message, location="body") from None
    return Status(201, _run(run.public_id))


@router.post(
    "/runs/{public_id}/cancel",
    response={
        200: RunActionOut,
        401: ErrorOut,
        403: ErrorOut,
        404: ErrorOut,
        409: ErrorOut,
        429: ErrorOut,
    },
    auth=write_auth(Action.RUN_CANCEL),
    throttle=write_throttle,
    summary="Cancel a run (queued attempts end cancelled, running ones are stopped)",
)
def run_cancel_endpoint(request: HttpRequest, public_id: uuid.UUID):
    run = _run(public_id)
    if run.is_final:
        raise ApiConflict(f"run {run.public_id} is already {run.status}")
    count = actions.run_cancel(run=run, actor=request.user, door=Door.API, request=request)
    return {"run": _run(public_id), "affected": count}


@router.post(
    "/runs/{public_id}/retry",
    response={200: RunActionOut, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut, 429: ErrorOut},
    auth=write_auth(Action.RUN_RETRY),
    throttle=write_throttle,
    summary="Re-queue every attempt of the run that ended for an infrastructure reason",
)
def run_retry_endpoint(request: HttpRequest, public_id: uuid.UUID):
    run = _run(public_id)
    count = actions.run_retry(run=run, actor=request.user, door=Door.API, request=request)
    return {"run": _run(public_id), "affected": count}


@router.post(
    "/runs/{public_id}/evaluate",
    response={200: RunActionOut, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut, 429: ErrorOut},
    auth=write_auth(Action.RUN_EVALUATE),
    throttle=write_throttle,
    summary="Queue the run's not-evaluated attempts (imported patches) for the workers",
)
def run_evaluate_endpoint(request: HttpRequest, public_id: uuid.UUID):
    run = _run(public_id)
    count = actions.run_evaluate(run=run, actor=request.user, door=Door.API, request=request)
    return {"run": _run(public_id), "affected": count}


# --- Attempts and their artifacts ------------------------------------------------------------


@router.get(
    "/attempts",
    response={200: AttemptPageOut, 404: ErrorOut, 422: ErrorOut},
    auth=PUBLIC_READ,
    url_name="attempt_list",
    summary="List attempts: the attempt list page's filters, order and CSV",
    description="The parameters of `/suites/<name>/attempts/` (same names, same selection, "
    "same order; `suite` names the suite). Outcomes only: logs and patches are on the "
    "detail. `format=csv` streams every attempt of the filter, as the page's CSV export. "
    "`model`, `run`, `failure_reason` and `task_id` are the deprecated old names of "
    "`models`, `runs`, `reason` and `task`; any other unknown parameter is a 422.",
)
def attempt_list(request: HttpRequest, query: Query[AttemptListQuery]):
    refuse_unknown_params(request, AttemptListQuery)
    suite = suite_or_404(query.suite) if query.suite else None
    readable = can_read_artifacts(request.user)
    try:
        filters = query.filters()
        attempts = attempt_selection(suite=suite, filters=filters, read_errors=readable)
        if query.format == "csv":
            detail = reverse("attempt-detail", args=[_ZERO]).replace(str(_ZERO), "{}")
            rows = list_rows(attempts, read_errors=readable).iterator(chunk_size=2000)
            name = f"attempts-{suite.name}" if suite else "attempts"
            return streamed("csv", name, EXPORT_COLUMNS, export_records(rows, detail), head={})
        count = attempts.count()
        start = (query.page - 1) * query.page_size
        items = list(attempts.select_related(*_ATTEMPT_RELATED)[start : start + query.page_size])
    except FilterError as exc:
        raise ApiInputError(
            exc.field, exc.message, status=404 if exc.not_found else 422, location="query"
        ) from None
    return {"items": items, "count": count}


_ZERO = uuid.UUID(int=0)


def _require_reader(request: HttpRequest) -> None:
    """A token or session of an account without the readers permission is refused (403)."""
    if not can_read_artifacts(request.user):
        raise PermissionDenied(
            "reading patches, logs and trajectories needs the readers group (runs.read_artifacts)"
        )


@router.get(
    "/attempts/{public_id}",
    response={200: AttemptDetailOut, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut},
    auth=ARTIFACT_READ,
    summary="One attempt with its error, patch, stages and artifact links",
)
def attempt_detail(request: HttpRequest, public_id: uuid.UUID):
    _require_reader(request)
    attempt = get_object_or_404(
        Attempt.objects.select_related(*_ATTEMPT_RELATED), public_id=public_id
    )
    return attempt


@router.get(
    "/attempts/{public_id}/transcript",
    response={200: TranscriptOut, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut},
    auth=ARTIFACT_READ,
    summary="An attempt's conversation, normalised as on the attempt page",
    description="Read from its trajectory (mini-swe-agent .traj.json, SWE-agent .traj, an "
    "Inspect sample, an imported ATIF trajectory), a CLI's model_calls.jsonl, or our agents' "
    "llm_messages.jsonl / events.jsonl, the first present. 404 when the attempt has none; a "
    "file that cannot be read gives 200 with `error` set. `format=atif`: the same turns as an "
    "ATIF trajectory (Harbor's Agent Trajectory Interchange Format, checked against its "
    "models), whole texts, as a JSON download.",
)
def attempt_transcript(
    request: HttpRequest, public_id: uuid.UUID, format: Literal["json", "atif"] = "json"
):
    _require_reader(request)
    attempt = get_object_or_404(Attempt, public_id=public_id)
    if format == "atif":
        return _atif_response(attempt)
    transcript = artifacts.read_transcript(attempt)
    if transcript is None:
        raise ApiInputError(
            "public_id", "this attempt has no transcript", status=404, location="path"
        )
    return transcript


def _atif_response(attempt: Attempt) -> HttpResponse:
    """The transcript as an ATIF trajectory, a JSON download (``runs.artifacts.attempt_atif``)."""
    document = artifacts.attempt_atif(attempt)
    if document is None:
        raise ApiInputError(
            "public_id", "this attempt has no readable transcript", status=404, location="path"
        )
    response = JsonResponse(document, json_dumps_params={"ensure_ascii": False})
    response["Content-Disposition"] = f'attachment; filename="{artifacts.atif_file_name(attempt)}"'
    return response


@router.get(
    "/attempts/{public_id}/artifacts/{path:path}",
    response={200: bytes, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut},
    auth=ARTIFACT_READ,
    url_name="attempt_artifact",
    summary="Download one artifact file of an attempt",
)
def attempt_artifact(request: HttpRequest, public_id: uuid.UUID, path: Text):
    _require_reader(request)
    attempt = get_object_or_404(Attempt, public_id=public_id)
    try:
        artifacts.artifact_name(attempt, path)
    except artifacts.ArtifactPathError as exc:
        raise ApiInputError("path", str(exc), status=404, location="path") from None
    # None as well for a link, or a name reached through one: sandboxed code plants them.
    handle = artifacts.open_artifact(attempt, path)
    if handle is None:
        raise ApiInputError("path", f"no artifact {path!r}", status=404, location="path")
    content_type, _ = mimetypes.guess_type(path)
    if content_type is None or content_type.startswith("text/") or path.endswith(".jsonl"):
        # Served as plain text whatever it holds: an artifact written by a sandboxed agent
        # must never render as HTML in the site's origin.
        content_type = "text/plain; charset=utf-8"
    response = FileResponse(handle, content_type=content_type, as_attachment=False)
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "sandbox"
    return response
