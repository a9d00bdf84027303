"""Imports of tasks as a person asks for them, whatever the door (API, admin page, ``ab``):
each calls the import service and records the audit event itself, so the entry points only
call and format, and one import leaves the same record everywhere.

``tasks_app.services.tasks_import`` and ``tasks_app.swebench.importer.swebench_import`` stay
unaudited: fixtures, the demo and ``ab run-suite``'s import of a missing suite call them on no
one's behalf. A failed import raises before anything is stored or recorded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.http import HttpRequest

from benchsite.accounts.models import Action, Door
from benchsite.accounts.services import audit_event_record
from tasks_app import services
from tasks_app.services import ImportReport
from tasks_app.swebench import importer


def _record(
    action: Action,
    report: ImportReport,
    *,
    actor,
    door: Door,
    request: HttpRequest | None,
    details: dict,
) -> None:
    audit_event_record(
        actor=actor,
        action=action,
        door=door,
        objects=[*report.created, *report.updated],
        object_type="tasks_app.task",
        request=request,
        details={**details, "summary": report.summary()},
    )


def tasks_import(
    *,
    directory: Path | str,
    actor,
    door: Door,
    request: HttpRequest | None = None,
    file: str = "",
    **options: Any,
) -> ImportReport:
    """``tasks_app.services.tasks_import`` (same options), audited. ``file`` names the upload
    the directory was unpacked from, if any."""
    report = services.tasks_import(directory=directory, **options)
    details = {"file": file, "directory": str(directory), "suites": report.suites}
    _record(Action.TASKS_IMPORT, report, actor=actor, door=door, request=request, details=details)
    return report


def swebench_import(
    *, actor, door: Door, request: HttpRequest | None = None, **options: Any
) -> ImportReport:
    """``tasks_app.swebench.importer.swebench_import`` (same options), audited."""
    report = importer.swebench_import(**options)
    file = options.get("filename") or Path(str(options.get("source") or "")).name
    details = {"file": file, "suite": options["suite_name"]}
    _record(
        Action.SWEBENCH_IMPORT, report, actor=actor, door=door, request=request, details=details
    )
    return report
