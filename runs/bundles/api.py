"""Exports and the bundle import over the REST API, through the same services as
``ab export-run`` and ``ab import-run``: ``GET /api/runs/{id}/export`` (readers only: a bundle
holds patches and logs) and ``POST /api/imports/bundle`` (the run-import right)."""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path
from typing import Literal

from django.core.exceptions import PermissionDenied
from django.http import FileResponse, HttpRequest
from django.shortcuts import get_object_or_404
from ninja import File, Form, Router, Schema, UploadedFile
from ninja.errors import HttpError

from benchsite.accounts.access import can_read_artifacts
from benchsite.accounts.auth import ARTIFACT_READ, write_auth, write_throttle
from benchsite.accounts.models import Action, Door
from benchsite.api.errors import ApiInputError, ErrorOut
from runs.bundles import actions
from runs.bundles.bundle import ExportRefused, run_bundle_write
from runs.bundles.manifest import BundleError
from runs.bundles.scrub import BundleSecretError
from runs.bundles.swebench import NotSwebench, run_swebench_export
from runs.models import Run

router = Router(tags=["runs"])


class BundleImportOut(Schema):
    run: str
    suite: str
    model: str
    attempts: int
    files: int
    tasks_added: int
    notes: list[str]
    environments: list[str]


@router.get(
    "/runs/{public_id}/export",
    response={200: bytes, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut, 422: ErrorOut},
    auth=ARTIFACT_READ,
    url_name="run_export",
    summary="Download a run as a reproducibility bundle or in the SWE-bench layout (.tar.gz)",
)
def run_export(
    request: HttpRequest, public_id: uuid.UUID, format: Literal["bundle", "swebench"] = "bundle"
):
    if not can_read_artifacts(request.user):
        raise PermissionDenied("exporting a run needs the readers group (runs.read_artifacts)")
    run = get_object_or_404(
        Run.objects.select_related("suite", "model_config"), public_id=public_id
    )
    short = str(run.public_id)[:8]
    out = tempfile.TemporaryFile()  # noqa: SIM115  # closed (and gone) with the response
    try:
        if format == "swebench":
            with tempfile.TemporaryDirectory() as folder:
                path = Path(folder) / f"{run.suite.name}-{short}.tar.gz"
                run_swebench_export(run=run, path=path)
                out.write(path.read_bytes())
        else:
            run_bundle_write(run=run, out=out)
    except (NotSwebench, BundleSecretError, ExportRefused) as exc:
        out.close()
        raise ApiInputError("format", str(exc), status=422, location="query") from None
    out.seek(0)
    name = f"run-{short}-{format}.tar.gz"
    return FileResponse(out, as_attachment=True, filename=name, content_type="application/gzip")


@router.post(
    "/imports/bundle",
    response={200: BundleImportOut, 401: ErrorOut, 403: ErrorOut, 422: ErrorOut},
    auth=write_auth(Action.RUN_IMPORT),
    throttle=write_throttle,
    summary="Import a run bundle (ab export-run --format bundle)",
)
def bundle_import_endpoint(request: HttpRequest, file: File[UploadedFile], model: Form[str] = ""):
    if file.file is None:
        raise ApiInputError("file", "no file uploaded", status=422)
    try:
        report = actions.bundle_import(
            source=file.file,
            source_name=file.name or "bundle.tar.gz",
            model_name=model[:200],
            actor=request.user,
            door=Door.API,
            request=request,
        )
    except BundleError as exc:
        raise ApiInputError("file", str(exc), status=422) from None
    if not report.run_id:
        raise HttpError(500, "the import stored no run")
    return {
        "run": report.run_id,
        "suite": report.suite,
        "model": report.model,
        "attempts": report.attempts,
        "files": report.files,
        "tasks_added": report.tasks_added,
        "notes": report.notes,
        "environments": report.environments,
    }
