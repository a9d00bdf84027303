"""Imports of results produced elsewhere as a person asks for them, whatever the door (API,
admin page, ``ab``): each calls the import service and records the audit event itself, so
the entry points only call and format, and one import leaves the same record everywhere.

The import services themselves (``runs.imports.predictions``, ``.results``, ``.run_import``,
``.uploads``) stay unaudited: benchmarks, fixtures and the demo call them on no one's behalf.
The event is recorded once the import committed (an import commits in stages; a failed one
raises before and leaves nothing to record). A dry run stores nothing and is not recorded.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.http import HttpRequest

from benchsite.accounts.models import Action, Door
from benchsite.accounts.services import audit_event_record
from runs.imports import predictions, results, run_import, uploads
from runs.search.index import indexed_elsewhere
from runs.services import transcripts_index_in_background


def _audited(
    action: Action,
    service: Callable[..., Any],
    *,
    file: str,
    actor,
    door: Door,
    request: HttpRequest | None,
    options: dict[str, Any],
) -> Any:
    """``service(created_by=actor, **options)``, and its audit event once it committed (a dry
    run stores nothing: nothing to record)."""
    if door == Door.CLI:  # ab's own process: indexed as the import commits
        report = service(created_by=actor, **options)
    else:  # a web worker: a process of its own indexes the transcripts (runs.search.index)
        with indexed_elsewhere(lambda committed: None):
            report = service(created_by=actor, **options)
        if getattr(report, "run_id", None) and not getattr(report, "dry_run", False):
            transcripts_index_in_background(str(report.run_id))
    if not getattr(report, "dry_run", False):
        audit_event_record(
            actor=actor,
            action=action,
            door=door,
            objects=[report.run_id],
            object_type="runs.run",
            request=request,
            details={"file": file, "suite": options["suite_name"], "summary": report.summary()},
        )
    return report


def _file_name(options: dict, key: str) -> str:
    return options.get("filename") or Path(str(options.get(key) or "upload")).name


def predictions_import(
    *, actor, door: Door, request: HttpRequest | None = None, **options: Any
) -> predictions.PredictionsReport:
    """``runs.imports.predictions.predictions_import`` (same options), audited."""
    file = _file_name(options, "source")
    return _audited(
        Action.PREDICTIONS_IMPORT,
        predictions.predictions_import,
        file=file,
        actor=actor,
        door=door,
        request=request,
        options=options,
    )


def results_import(
    *, actor, door: Door, request: HttpRequest | None = None, **options: Any
) -> results.ResultsReport:
    """``runs.imports.results.results_import`` (same options), audited."""
    file = _file_name(options, "source")
    return _audited(
        Action.RESULTS_IMPORT,
        results.results_import,
        file=file,
        actor=actor,
        door=door,
        request=request,
        options=options,
    )


def run_import_upload(
    *, actor, door: Door, request: HttpRequest | None = None, **options: Any
) -> run_import.RunImportReport:
    """An uploaded run folder (``runs.imports.uploads.run_import_upload``), audited."""
    file = Path(options["upload"].name or "upload").name
    return _audited(
        Action.RUN_IMPORT,
        uploads.run_import_upload,
        file=file,
        actor=actor,
        door=door,
        request=request,
        options=options,
    )


def run_folder_import(
    *, actor, door: Door, request: HttpRequest | None = None, **options: Any
) -> run_import.RunImportReport:
    """A run folder on disk (``runs.imports.run_import.run_folder_import``), audited."""
    file = _file_name(options, "path")
    return _audited(
        Action.RUN_IMPORT,
        run_import.run_folder_import,
        file=file,
        actor=actor,
        door=door,
        request=request,
        options=options,
    )
