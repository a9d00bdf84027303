"""Importing published SWE-bench results as a finished run of an external model.

Accepted inputs (a path, or an upload's bytes):

* a harness run report ``<model>.<run_id>.json`` (``resolved_ids``, ``unresolved_ids``,
  ``error_ids``, ``empty_patch_ids``, ... ``schema_version`` 2, maybe ``infra_failure_ids``);
* a legacy (v1) report of id lists per outcome (``legacy.py``);
* per-instance ``report.json`` files, wrapped ``{instance_id: {...}}`` or not (then the id
  comes from the name: ``<id>.report.json``, ``<id>.json`` or ``<id>/report.json``);
* a folder (or a .zip) holding any of these, plus predictions files and ``<id>/patch.diff``
  to keep each instance's patch.

Every suite instance gets one finished attempt; instances with no result count as unresolved
with ``is_missing`` (so % resolved = resolved / suite size). Importing the same results again
for the same model is a no-op; different results replace that model's published run.
"""

from __future__ import annotations

import hashlib
import io
import json
import posixpath
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db import transaction
from django.utils import timezone

from runs.models import Run, RunSource, RunStatus
from runs.services import run_refresh_totals
from tasks_app.models import Suite, Task
from tasks_app.swebench.bulk import insert_rows
from tasks_app.swebench.dataset import kind_of
from tasks_app.swebench.errors import Problem, SwebenchInputError
from tasks_app.swebench.fields import INSTANCE_ID_RE
from tasks_app.swebench.legacy import is_legacy_report, read_legacy_report
from tasks_app.swebench.outcomes import InstanceResult, Kind, external_model, finished_attempt
from tasks_app.swebench.predictions import read_predictions
from tasks_app.uploads.archives import ArchiveLimits, zip_budget

# Run-report lists, in the order that decides an id listed twice.
RUN_REPORT_LISTS: tuple[tuple[str, Kind], ...] = (
    ("resolved_ids", Kind.RESOLVED),
    ("infra_failure_ids", Kind.INFRA),
    ("error_ids", Kind.ERROR),
    ("empty_patch_ids", Kind.EMPTY_PATCH),
    ("unresolved_ids", Kind.UNRESOLVED),
    ("incomplete_ids", Kind.INCOMPLETE),
)
REPORT_KEYS = ("resolved", "tests_status", "patch_is_None", "patch_exists")


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

    @property
    def resolved(self) -> int:
        return self.counts.get(Kind.RESOLVED.value, 0)

    @property
    def missing(self) -> int:
        return self.counts.get(Kind.MISSING.value, 0) + self.counts.get(Kind.INCOMPLETE.value, 0)

    def summary(self) -> str:
        if self.unchanged:
            return f"unchanged: run {self.run_id} already holds these results"
        parts = ", ".join(f"{k} {v}" for k, v in sorted(self.counts.items()))
        rate = f"{100 * self.resolved / self.suite_size:.1f}%" if self.suite_size else "n/a"
        return (
            f"run {self.run_id}: {self.resolved}/{self.suite_size} resolved ({rate}); {parts}"
            + (f"; replaced {self.replaced_runs} earlier import(s)" if self.replaced_runs else "")
        )


# --- Reading ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _File:
    path: str  # relative, posix
    content: bytes


def _files_of(source: Path | bytes | str, filename: str) -> list[_File]:
    if isinstance(source, bytes):
        if filename.lower().endswith(".zip") or source[:2] == b"PK":
            return _files_of_zip(source, filename)
        return [_File(filename or "upload.json", source)]
    path = Path(source)
    if path.is_dir():
        return [
            _File(p.relative_to(path).as_posix(), p.read_bytes())
            for p in sorted(path.rglob("*"))
            if p.is_file() and p.suffix in (".json", ".jsonl", ".diff")
        ]
    if not path.exists():
        raise SwebenchInputError([Problem(str(path), "no such file or folder")])
    if path.suffix == ".zip":
        return _files_of_zip(path.read_bytes(), path.name)
    return [_File(path.name, path.read_bytes())]


def _files_of_zip(content: bytes, filename: str) -> list[_File]:
    try:
        archive = zipfile.ZipFile(io.BytesIO(content))
    except zipfile.BadZipFile as exc:
        raise SwebenchInputError([Problem(filename, "not a readable zip file")]) from exc
    with archive:
        budget = zip_budget(archive, ArchiveLimits.from_settings())
        files = []
        for info in archive.infolist():
            if info.is_dir() or not info.filename.endswith((".json", ".jsonl", ".diff")):
                continue
            try:
                with archive.open(info) as src:
                    files.append(_File(info.filename, budget.read(info.filename, src)))
            except (zipfile.BadZipFile, OSError, NotImplementedError) as exc:
                raise SwebenchInputError([Problem(f"{filename}: {info.filename}",
                                                  f"cannot read: {exc}")]) from None  # fmt: skip
        return files


def _id_from_path(path: str) -> str:
    name = posixpath.basename(path)
    if name == "report.json":
        return posixpath.basename(posixpath.dirname(path))
    return name.removesuffix(".json").removesuffix(".report")


def _load_json(file: _File, problems: list[Problem]) -> Any:
    try:
        return json.loads(file.content.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        detail = f"line {exc.lineno}: {exc.msg}" if isinstance(exc, json.JSONDecodeError) else ""
        problems.append(Problem(file.path, f"invalid JSON ({detail or 'not UTF-8'})"))
        return None


def _is_report(value: Any) -> bool:
    return isinstance(value, dict) and "resolved" in value and any(k in value for k in REPORT_KEYS)


@dataclass
class _Collected:
    from_reports: dict[str, InstanceResult] = field(default_factory=dict)
    from_run_report: dict[str, InstanceResult] = field(default_factory=dict)
    patches: dict[str, str | None] = field(default_factory=dict)
    run_reports: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def _read_instance_report(
    instance_id: str, report: dict[str, Any], where: str, problems: list[Problem]
) -> InstanceResult | None:
    bad = False
    for key in ("resolved", "patch_is_None", "patch_exists", "patch_successfully_applied"):
        if key in report and not isinstance(report[key], bool):
            got = kind_of(report[key])
            problems.append(Problem(where, f"must be true or false, got {got}", key))
            bad = True
    tests_status = report.get("tests_status")
    if tests_status is not None and not _valid_tests_status(tests_status):
        problems.append(
            Problem(
                where, "must map FAIL_TO_PASS/PASS_TO_PASS to success/failure lists", "tests_status"
            )
        )
        bad = True
    if bad:
        return None
    if report.get("resolved"):
        kind = Kind.RESOLVED
    elif report.get("patch_is_None") or report.get("patch_exists") is False:
        kind = Kind.EMPTY_PATCH
    elif report.get("patch_successfully_applied") is False:
        kind = Kind.APPLY_FAILED
    else:
        kind = Kind.UNRESOLVED
    return InstanceResult(instance_id, kind, where, tests_status=tests_status)


def _valid_tests_status(value: Any) -> bool:
    if not isinstance(value, dict):
        return False
    for lists in value.values():
        if not isinstance(lists, dict):
            return False
        for name in ("success", "failure"):
            items = lists.get(name, [])
            if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
                return False
    return True


def _read_run_report(
    data: dict[str, Any], where: str, problems: list[Problem]
) -> dict[str, InstanceResult]:
    found: dict[str, InstanceResult] = {}
    for key, kind in RUN_REPORT_LISTS:
        ids = data.get(key, [])
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            problems.append(Problem(where, "must be a list of instance ids", key))
            continue
        for instance_id in ids:
            found.setdefault(instance_id, InstanceResult(instance_id, kind, f"{where} {key}"))
    return found


def _read_predictions(
    data: Any, where: str, problems: list[Problem]
) -> dict[str, str | None] | None:
    """Patches by id when ``data`` looks like predictions, else None."""
    if (
        isinstance(data, dict)
        and data
        and all(isinstance(v, dict) and "model_patch" in v for v in data.values())
    ):
        rows = [(f"key {k}", {"instance_id": k, **v}) for k, v in data.items()]
    elif (
        isinstance(data, list)
        and data
        and all(isinstance(v, dict) and "model_patch" in v for v in data)
    ):
        rows = [(f"index {i}", v) for i, v in enumerate(data)]
    else:
        return None
    patches: dict[str, str | None] = {}
    for row_where, row in rows:
        instance_id, patch = row.get("instance_id"), row.get("model_patch")
        if not isinstance(instance_id, str):
            problems.append(Problem(f"{where} {row_where}", "must be a string", "instance_id"))
        elif patch is not None and not isinstance(patch, str):
            problems.append(
                Problem(f"{where} {row_where}", "must be a string or null", "model_patch")
            )
        else:
            patches[instance_id] = patch
    return patches


def _jsonl_rows(file: _File, problems: list[Problem]) -> list[Any]:
    rows = []
    for number, line in enumerate(file.content.decode("utf-8-sig").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            problems.append(Problem(f"{file.path} line {number}", f"invalid JSON ({exc.msg})"))
    return rows


def collect_results(
    source: Path | bytes | str, filename: str = ""
) -> tuple[dict[str, InstanceResult], dict[str, str | None], list[str]]:
    """Read every result file in ``source``: (results by id, patches by id, skipped files).

    Raises ``SwebenchInputError`` naming each bad file and field; nothing is stored.
    """
    problems: list[Problem] = []
    got = _Collected()
    files = _files_of(source, filename)
    for file in files:
        if file.path.endswith(".diff"):
            if posixpath.basename(file.path) == "patch.diff":
                got.patches.setdefault(
                    _id_from_path(file.path.replace("patch.diff", "report.json")),
                    file.content.decode("utf-8", errors="replace"),
                )
            continue
        data = (
            _jsonl_rows(file, problems)
            if file.path.endswith(".jsonl")
            else _load_json(file, problems)
        )
        if data is None:
            continue
        _classify(file, data, got, problems)
    if not problems and not got.from_reports and not got.from_run_report:
        problems.append(
            Problem(filename or str(source), "no run report or report.json results found")
        )
    if len(got.run_reports) > 1:
        problems.append(
            Problem(", ".join(got.run_reports), "more than one run report; import one at a time")
        )
    if problems:
        raise SwebenchInputError(problems)
    results = {**got.from_run_report, **got.from_reports}
    return results, got.patches, got.skipped


def _classify(file: _File, data: Any, got: _Collected, problems: list[Problem]) -> None:
    if is_legacy_report(data):
        got.run_reports.append(file.path)
        got.from_run_report.update(read_legacy_report(data, file.path, problems))
        return
    if isinstance(data, dict) and ("resolved_ids" in data or "schema_version" in data):
        got.run_reports.append(file.path)
        got.from_run_report.update(_read_run_report(data, file.path, problems))
        return
    reports: list[tuple[str, dict[str, Any], str]] = []
    if _is_report(data):
        reports.append((_id_from_path(file.path), data, file.path))
    elif isinstance(data, dict) and data and all(_is_report(v) for v in data.values()):
        reports.extend((k, v, f"{file.path} key {k}") for k, v in data.items())
    if reports:
        for instance_id, report, where in reports:
            if not INSTANCE_ID_RE.match(instance_id):
                problems.append(
                    Problem(
                        where,
                        f"cannot tell the instance id (got {instance_id!r}); "
                        "name it <instance_id>.report.json or wrap it as {id: report}",
                    )
                )
                continue
            if instance_id in got.from_reports:
                problems.append(
                    Problem(
                        where,
                        f"second report for {instance_id} "
                        f"(first in {got.from_reports[instance_id].where})",
                    )
                )
                continue
            result = _read_instance_report(instance_id, report, where, problems)
            if result is not None:
                got.from_reports[instance_id] = result
        return
    patches = _read_predictions(data, file.path, problems)
    if patches is not None:
        for instance_id, patch in patches.items():
            got.patches[instance_id] = patch
        return
    got.skipped.append(file.path)


# --- Writing ---------------------------------------------------------------------------------


def results_import(
    *,
    source: Path | bytes | str,
    filename: str = "",
    suite_name: str,
    model_name: str,
    predictions: Path | bytes | str | None = None,
    ignore_unknown: bool = False,
    created_by=None,
) -> ResultsReport:
    """Import published results for ``model_name`` on suite ``suite_name`` as a finished run.

    ``predictions`` (optional) adds each instance's patch. Ids not in the suite are errors
    unless ``ignore_unknown``. Raises ``SwebenchInputError``; stores nothing on bad input.
    """
    if not filename and not isinstance(source, bytes):
        filename = Path(source).name
    results, patches, skipped = collect_results(source, filename)
    if predictions is not None:
        patches.update(_patches_from(predictions))
    suite = Suite.objects.filter(name=suite_name).first()
    if suite is None:
        raise SwebenchInputError([Problem("suite", f"no suite named {suite_name!r}")])
    # Only what the attempts need: the full rows carry every patch and test list.
    tasks = list(
        Task.objects.for_suite(suite).only("id", "task_id", "revision").order_by("task_id")
    )
    by_id = {task.task_id: task for task in tasks}
    unknown = sorted(set(results) - set(by_id))
    if unknown and not ignore_unknown:
        raise SwebenchInputError(
            [
                Problem(results[i].where, f"instance {i} is not in suite {suite_name}")
                for i in unknown
            ],
            filename,
        )
    report = ResultsReport(
        suite=suite_name,
        model=model_name,
        suite_size=len(tasks),
        ignored_unknown=unknown,
        skipped_files=skipped,
    )
    digest = _digest(results, patches, tasks)
    with transaction.atomic():
        model = external_model(
            name=model_name, description="External system: imported published results."
        )
        earlier = Run.objects.filter(suite=suite, model_config=model, source=RunSource.PUBLISHED)
        same = next((r for r in earlier if r.config_snapshot.get("results_hash") == digest), None)
        if same is not None:
            report.unchanged = True
            report.run_id = str(same.public_id)
            report.counts = dict(same.config_snapshot.get("counts", {}))
            return report
        report.replaced_runs = earlier.count()
        earlier.delete()
        now = timezone.now()
        run = Run.objects.create(
            suite=suite,
            model_config=model,
            source=RunSource.PUBLISHED,
            status=RunStatus.FINISHED,
            created_by=created_by,
            started_at=now,
            finished_at=now,
            selection={"task_ids": [t.task_id for t in tasks]},
            notes=f"Imported published results from {filename or 'upload'}.",
        )
        attempts = []
        counts: dict[str, int] = {}
        for task in tasks:
            result = results.get(task.task_id)
            kind = result.kind if result else Kind.MISSING
            counts[kind.value] = counts.get(kind.value, 0) + 1
            attempts.append(
                finished_attempt(
                    run=run,
                    suite=suite,
                    model=model,
                    task=task,
                    kind=kind,
                    now=now,
                    tests_status=result.tests_status if result else None,
                    patch=patches.get(task.task_id),
                )
            )
        insert_rows(attempts)
        run.config_snapshot = {
            "results_hash": digest,
            "source_file": filename,
            "counts": counts,
            "missing": counts.get(Kind.MISSING.value, 0) + counts.get(Kind.INCOMPLETE.value, 0),
            "ignored_unknown": len(unknown),
        }
        run.save(update_fields=["config_snapshot"])
        run_refresh_totals(run)
        report.run_id = str(run.public_id)
        report.counts = counts
    return report


def _patches_from(source: Path | bytes | str) -> dict[str, str | None]:
    return {row.instance_id: row.patch for row in read_predictions(source)}


def _digest(
    results: dict[str, InstanceResult], patches: dict[str, str | None], tasks: list[Task]
) -> str:
    payload = {
        "results": {i: [r.kind.value, r.tests_status] for i, r in sorted(results.items())},
        "patches": {i: p for i, p in sorted(patches.items())},
        # A changed dataset (a task's revision) makes the same results a new import.
        "tasks": [[t.task_id, t.revision] for t in tasks],
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
