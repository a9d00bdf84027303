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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.http import HttpRequest

from benchsite.accounts.models import Action, Door
from benchsite.accounts.services import audit_event_record
from runs.imports import predictions, results, run_import, uploads
from runs.search.index import indexed_elsewhere
from runs.services import imported_run_read, imported_run_read_in_background


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
    # Once committed, the run's transcripts are indexed for search and its attempts checked
    # for integrity flags: in ab's own process, or in one of their own for a web worker
    # (each reads every transcript back; runs.search.index, runs.integrity).
    with indexed_elsewhere(lambda committed: None):
        report = service(created_by=actor, **options)
    if getattr(report, "run_id", None) and not getattr(report, "dry_run", False):
        if door == Door.CLI:
            imported_run_read(str(report.run_id))
        else:
            imported_run_read_in_background(str(report.run_id))
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


@dataclass(frozen=True)
class _AuditedImport:
    """One import as a door calls it: ``(actor=, door=, request=, **the service's options)``
    runs ``service`` and records ``action`` naming the file ``file_of(options)`` gives."""

    action: Action
    service: Callable[..., Any]
    file_of: Callable[[dict[str, Any]], str]
    what: str  # what it imports, for a reader of this table

    def __call__(
        self, *, actor, door: Door, request: HttpRequest | None = None, **options: Any
    ) -> Any:
        return _audited(
            self.action,
            self.service,
            file=self.file_of(options),
            actor=actor,
            door=door,
            request=request,
            options=options,
        )


def _named_by(key: str) -> Callable[[dict[str, Any]], str]:
    """The file's name: the ``filename`` given, else the last part of ``options[key]``."""
    return lambda options: options.get("filename") or Path(str(options.get(key) or "upload")).name


predictions_import = _AuditedImport(
    Action.PREDICTIONS_IMPORT,
    predictions.predictions_import,
    _named_by("source"),
    "runs.imports.predictions.predictions_import (same options), audited.",
)
results_import = _AuditedImport(
    Action.RESULTS_IMPORT,
    results.results_import,
    _named_by("source"),
    "runs.imports.results.results_import (same options), audited.",
)
run_import_upload = _AuditedImport(
    Action.RUN_IMPORT,
    uploads.run_import_upload,
    lambda options: Path(options["upload"].name or "upload").name,
    "An uploaded run folder (runs.imports.uploads.run_import_upload), audited.",
)
run_folder_import = _AuditedImport(
    Action.RUN_IMPORT,
    run_import.run_folder_import,
    _named_by("path"),
    "A run folder on disk (runs.imports.run_import.run_folder_import), audited.",
)
