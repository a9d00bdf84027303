"""An uploaded run folder (an archive, or one log/trajectory file) imported like ``ab import-run``.

Shared by ``POST /api/imports/run`` and the admin page. The upload is unpacked with
``tasks_app.uploads.files`` (its limits and refusals) into a folder of its own under
``API_UPLOADS_ROOT`` and removed afterwards, whether the import was stored or refused: the
import copies what it keeps (trajectories, reports) into the attempts' artifact folders. A
folder a killed worker left (its ``finally`` never ran) is removed by the next upload once it
is older than any import takes (``STALE_AFTER_SECONDS``).
"""

from __future__ import annotations

import datetime as dt
import shutil
import time
import uuid
from pathlib import Path

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile

from runs.imports.run_import import RunImportReport, run_folder_import
from tasks_app.swebench.errors import SwebenchInputError
from tasks_app.uploads.files import check_upload_size, unpack_upload

# Files a run import takes as they are (not archives).
RUN_FILE_SUFFIXES = (".eval", ".json", ".jsonl", ".traj")
# An import runs inside one web request (gunicorn's timeout ends it long before this).
STALE_AFTER_SECONDS = 6 * 3600


def run_import_upload(
    *,
    upload: UploadedFile,
    suite_name: str,
    model_name: str,
    dry_run: bool = False,
    skip_bad: bool = False,
    date: dt.date | dt.datetime | None = None,
    created_by=None,
) -> RunImportReport:
    """Unpack ``upload`` and import it; errors name files as they are inside the upload.

    Raises ``SwebenchInputError`` (bad content) or ``ApiInputError`` (a bad archive).
    """
    _remove_stale(Path(settings.API_UPLOADS_ROOT) / "runs")
    target = Path(settings.API_UPLOADS_ROOT) / "runs" / uuid.uuid4().hex
    name = Path(upload.name or "upload").name
    try:
        if name.lower().endswith(RUN_FILE_SUFFIXES):
            check_upload_size(upload)  # type: ignore[arg-type]
            target.mkdir(parents=True)
            with open(target / name, "wb") as out:
                for chunk in upload.chunks():
                    out.write(chunk)
        else:
            unpack_upload(upload, target)  # type: ignore[arg-type]
        try:
            report = run_folder_import(
                path=target,
                suite_name=suite_name,
                model_name=model_name,
                dry_run=dry_run,
                skip_bad=skip_bad,
                date=date,
                source_name=name,
                created_by=created_by,
            )
        except SwebenchInputError as exc:
            raise SwebenchInputError(exc.problems, name) from None
    finally:
        shutil.rmtree(target, ignore_errors=True)
    return report


def _remove_stale(root: Path) -> None:
    """Remove the unpacked uploads no import has used for ``STALE_AFTER_SECONDS``."""
    if not root.is_dir():
        return
    cutoff = time.time() - STALE_AFTER_SECONDS
    for folder in root.iterdir():
        try:
            stale = folder.is_dir() and folder.lstat().st_mtime < cutoff
        except FileNotFoundError:
            continue
        if stale:
            shutil.rmtree(folder, ignore_errors=True)
