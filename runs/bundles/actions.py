"""The bundle import as a person asks for it, whatever the door (``ab import-run``, the API):
the import and its audit event (``run.import``, the right the run-folder import needs) in
one transaction, so a refused bundle records nothing and one import leaves one record; then
its transcripts indexed and its attempts checked, as every import's."""

from __future__ import annotations

from typing import IO

from django.db import transaction
from django.http import HttpRequest

from benchsite.accounts.models import Action, Door
from benchsite.accounts.services import audit_event_record
from runs.bundles.import_bundle import BundleImportReport, run_bundle_import
from runs.search.index import indexed_elsewhere
from runs.services import imported_run_read, imported_run_read_in_background


def bundle_import(
    *,
    source: IO[bytes],
    source_name: str,
    actor,
    model_name: str = "",
    door: Door,
    request: HttpRequest | None = None,
) -> BundleImportReport:
    """``runs.bundles.import_bundle.run_bundle_import``, audited."""
    with indexed_elsewhere(lambda committed: None), transaction.atomic():
        report = run_bundle_import(
            source=source, source_name=source_name, model_name=model_name, created_by=actor
        )
        audit_event_record(
            actor=actor,
            action=Action.RUN_IMPORT,
            door=door,
            objects=[report.run_id],
            object_type="runs.run",
            request=request,
            details={"file": source_name, "suite": report.suite, "summary": report.summary()},
        )
    # Searchable and checked for integrity flags like any import (runs.imports.actions).
    if door == Door.CLI:
        imported_run_read(str(report.run_id))
    else:
        imported_run_read_in_background(str(report.run_id))
    return report
