"""Importing published SWE-bench results (``ab import-results``, ``POST /api/imports/results``,
the admin's results page): the run-folder import (``run_import.run_folder_import``) with a
predictions file on the side and unknown instances optionally ignored.

Accepted inputs (a path, or an upload's bytes): a harness run report
``<model>.<run_id>.json``, a legacy (v1) report, per-instance ``report.json`` files, a folder
or a .zip of them, with ``<id>/patch.diff`` or predictions for the patches; everything
``ab import-run`` reads, by the same rules (one code path: a JSON file of no known format is
an error naming it unless ``skip_bad``; known auxiliary files are skipped with a notice).

Every suite instance gets one attempt; an instance with no result is not attempted (status
``missing``: 0 in the whole-suite rate). Importing the same results again changes nothing;
different results for the same model update its published run in place.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import shutil
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from runs.imports.predictions import read_predictions
from runs.imports.run_import import run_folder_import
from tasks_app.swebench.errors import Problem, SwebenchInputError
from tasks_app.uploads.archives import ArchiveLimits, zip_budget


@dataclass
class ResultsReport:
    suite: str
    model: str
    run_id: str = ""
    suite_size: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    unchanged: bool = False
    replaced_runs: int = 0
    ignored_unknown: list[str] = field(default_factory=list)
    skipped_files: list[str] = field(default_factory=list)
    plan: list[str] = field(default_factory=list)
    summary_text: str = ""

    @property
    def resolved(self) -> int:
        return self.counts.get("resolved", 0)

    @property
    def missing(self) -> int:
        return self.counts.get("missing", 0)

    def summary(self) -> str:
        return self.summary_text


def results_import(
    *,
    source: Path | bytes | str,
    filename: str = "",
    suite_name: str,
    model_name: str,
    predictions: Path | bytes | str | None = None,
    ignore_unknown: bool = False,
    skip_bad: bool = False,
    date: dt.date | dt.datetime | None = None,
    created_by=None,
) -> ResultsReport:
    """Import published results for ``model_name`` on suite ``suite_name`` as a finished run.

    ``predictions`` (optional) adds each instance's patch. Ids not in the suite are errors
    unless ``ignore_unknown``. Raises ``SwebenchInputError``; stores nothing on bad input.
    """
    if not filename and not isinstance(source, bytes):
        filename = Path(source).name
    patches = None
    if predictions is not None:
        patches = {row.instance_id: row.patch for row in read_predictions(predictions)}
    with _as_folder(source, filename) as (path, name):
        imported = run_folder_import(
            path=path,
            suite_name=suite_name,
            model_name=model_name,
            skip_bad=skip_bad,
            ignore_unknown=ignore_unknown,
            date=date,
            patches=patches,
            source_name=name,
            created_by=created_by,
        )
    return ResultsReport(
        suite=suite_name,
        model=model_name,
        run_id=imported.run_id,
        suite_size=imported.suite_size,
        counts=imported.counts,
        unchanged=not (imported.added or imported.updated or imported.removed),
        replaced_runs=imported.replaced_runs,
        ignored_unknown=imported.ignored_unknown,
        skipped_files=imported.skipped,
        plan=imported.plan,
        summary_text=imported.summary(),
    )


@contextlib.contextmanager
def _as_folder(source: Path | bytes | str, filename: str) -> Iterator[tuple[Path, str]]:
    """``source`` as something ``run_folder_import`` reads: a folder or file as it is, a .zip
    unpacked (within the archive caps) into a temporary folder, bytes written to one, removed
    afterwards. Yields (path, the name errors call it by: "" for a path of the caller's).

    ``filename`` with a path: an upload Django spooled to a file of its own name; the zip is
    read from there, never whole in memory."""
    if not isinstance(source, bytes):
        path = Path(source)
        if not path.exists():
            raise SwebenchInputError([Problem(str(path), "no such file or folder")])
        if path.is_dir():
            yield path, ""
            return
        name = PurePosixPath(filename or path.name).name
        spooled = name != path.name  # as bytes were: a zip by its name or its first bytes
        zipped = name.lower().endswith(".zip") or (spooled and _starts_as_zip(path))
        if not zipped:
            if not spooled:
                yield path, ""
                return
            # An upload Django spooled under a name of its own: read under the upload's.
            tmp = Path(tempfile.mkdtemp(prefix="ab-results-"))
            try:
                shutil.copyfile(path, tmp / name)
                yield tmp / name, name
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            return
    tmp = Path(tempfile.mkdtemp(prefix="ab-results-"))
    try:
        name = PurePosixPath(filename or "upload.json").name
        if isinstance(source, bytes) and not (name.lower().endswith(".zip") or source[:2] == b"PK"):
            (tmp / name).write_bytes(source)
            yield tmp / name, name
        else:
            _unzip(source, name, tmp)
            yield tmp, name
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _starts_as_zip(path: Path) -> bool:
    if not path.is_file():
        return False
    with path.open("rb") as handle:
        return handle.read(2) == b"PK"


def _unzip(content: bytes | Path | str, name: str, target: Path) -> None:
    try:
        archive = zipfile.ZipFile(io.BytesIO(content) if isinstance(content, bytes) else content)
    except zipfile.BadZipFile as exc:
        raise SwebenchInputError([Problem(name, "not a readable zip file")]) from exc
    with archive:
        budget = zip_budget(archive, ArchiveLimits.from_settings())
        for info in archive.infolist():
            member = PurePosixPath(info.filename)
            if member.is_absolute() or ".." in member.parts:
                problem = Problem(f"{name}: {info.filename}", "would land outside the archive")
                raise SwebenchInputError([problem])
            if info.is_dir():
                continue
            destination = target.joinpath(*member.parts)
            destination.parent.mkdir(parents=True, exist_ok=True)
            try:
                with archive.open(info) as src, open(destination, "wb") as out:
                    budget.copy(info.filename, src, out)
            except (zipfile.BadZipFile, OSError, NotImplementedError) as exc:
                problem = Problem(f"{name}: {info.filename}", f"cannot read: {exc}")
                raise SwebenchInputError([problem]) from None
