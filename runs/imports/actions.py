"""Imports of results produced elsewhere as a person asks for them, whatever the door (API,
admin page, ``ab``): each calls the import service and records the audit event itself, so
the entry points only call and format, and one import leaves the same record everywhere.

The import services themselves (``runs.imports.predictions``, ``.results``, ``.run_import``,
``.uploads``) stay unaudited: benchmarks, fixtures and the demo call them on no one's behalf.
The event is recorded once the import committed (an import commits in stages; a failed one
raises before and leaves nothing to record). A dry run stores nothing and is not recorded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.http import HttpRequest

from benchsite.accounts.models import Action, Door
from benchsite.accounts.services import audit_event_record
from runs.imports import predictions, results, run_import, uploads


def _record(
    action: Action,
    report: Any,
    *,
    file: str,
    suite: str,
    actor,
    door: Door,
    request: HttpRequest | None,
) -> None:
    audit_event_record(
        actor=actor,
        action=action,
        door=door,
        objects=[report.run_id],
        object_type="runs.run",
        request=request,
        details={"file": file, "suite": suite, "summary": report.summary()},
    )


def _file_name(options: dict, key: str) -> str:
    return options.get("filename") or Path(str(options.get(key) or "upload")).name


def predictions_import(
    *, actor, door: Door, request: HttpRequest | None = None, **options: Any
) -> predictions.PredictionsReport:
    """``runs.imports.predictions.predictions_import`` (same options), audited."""
    report = predictions.predictions_import(created_by=actor, **options)
    _record(
        Action.PREDICTIONS_IMPORT,
        report,
        file=_file_name(options, "source"),
        suite=options["suite_name"],
        actor=actor,
        door=door,
        request=request,
    )
    return report


def results_import(
    *, actor, door: Door, request: HttpRequest | None = None, **options: Any
) -> results.ResultsReport:
    """``runs.imports.results.results_import`` (same options), audited."""
    report = results.results_import(created_by=actor, **options)
    _record(
        Action.RESULTS_IMPORT,
        report,
        file=_file_name(options, "source"),
        suite=options["suite_name"],
        actor=actor,
        door=door,
        request=request,
    )
    return report


def run_import_upload(
    *, actor, door: Door, request: HttpRequest | None = None, **options: Any
) -> run_import.RunImportReport:
    """An uploaded run folder (``runs.imports.uploads.run_import_upload``), audited."""
    report = uploads.run_import_upload(created_by=actor, **options)
    if not report.dry_run:
        name = Path(options["upload"].name or "upload").name
        _record(
            Action.RUN_IMPORT,
            report,
            file=name,
            suite=options["suite_name"],
            actor=actor,
            door=door,
            request=request,
        )
    return report


def run_folder_import(
    *, actor, door: Door, request: HttpRequest | None = None, **options: Any
) -> run_import.RunImportReport:
    """A run folder on disk (``runs.imports.run_import.run_folder_import``), audited."""
    report = run_import.run_folder_import(created_by=actor, **options)
    if not report.dry_run:
        _record(
            Action.RUN_IMPORT,
            report,
            file=_file_name(options, "path"),
            suite=options["suite_name"],
            actor=actor,
            door=door,
            request=request,
        )
    return report
