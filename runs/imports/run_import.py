"""Importing a run folder (trajectories, reports, predictions, Inspect logs) as a run.

The one import of results produced elsewhere: ``ab import-run``, ``ab import-results``
(``results.results_import``), their API endpoints and admin pages all come here.

``run_folder_import`` reads the folder (``run_folder.read_run_folder``), makes sure the suite
holds its instances (a dataset file in the folder, ``instances.jsonl``, creates or extends the
suite), decides each instance's outcome, copies each trajectory and report unchanged into the
attempt's artifact folder, and records one published run of an external model: every suite
instance gets an attempt (one with nothing is ``missing``: not attempted), so the leaderboard
rates it over the whole suite. Bad input raises ``SwebenchInputError`` before anything is
stored, unless ``skip_bad`` leaves the bad files out (and lists them).

The run's date is the folder's (``RunFolder.run_date``: metadata.yaml, an Inspect log, the
trajectories' timestamps), else the ``date`` given, else unknown: the run then carries its
first import's time, marked so (``Run.date_source`` "unknown").

Idempotent: each attempt's inputs have a digest (kept in ``Run.config_snapshot``); a second
import of the same folder writes nothing, and a changed file updates only its attempt, in
place (same attempt id and page).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import re
import uuid
import zipfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from django.core.files import File
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.db import transaction
from django.utils import timezone

from runs.imports import inspect_log
from runs.imports.bulk import insert_rows
from runs.imports.jsonfile import parse_json
from runs.imports.outcomes import KINDS, Kind, external_model, finished_attempt
from runs.imports.run_folder import (
    InstanceEntry,
    Progress,
    RunFolder,
    json_limits,
    read_run_folder,
)
from runs.imports.trajectories import ARTIFACT_NAMES, REPORT_ARTIFACT, TrajFormat
from runs.lifecycle import attempt_mark_not_evaluated, attempt_replace_with_import
from runs.models import (
    Attempt,
    AttemptStatus,
    ModelConfig,
    Run,
    RunDateSource,
    RunSource,
    RunStatus,
)
from runs.search.index import attempts_index_on_commit
from runs.services import run_refresh_totals
from runs.taxonomy import ExitStatusRule, Reason, Stage, from_exit_status
from runs.usage_fields import CostBasis
from tasks_app.models import Suite, Task
from tasks_app.swebench.errors import Problem, SwebenchInputError
from tasks_app.swebench.importer import swebench_import

SNAPSHOT_KIND = "run_folder"
TRIAL_VERDICTS = (TrajFormat.INSPECT, TrajFormat.ATIF)
# Outcomes of the exit-status rules replace only these: a result the agent's stop explains.
AGENT_EXPLAINED = frozenset({Kind.UNRESOLVED, Kind.EMPTY_PATCH, Kind.NO_GENERATION})
UPDATED_FIELDS = (
    "status",
    "failure_reason_id",
    "failure_stage",
    "is_infra",
    "is_timeout",
    "final_patch",
    "lines_changed",
    "error_text",
    "error_fingerprint",
    "test_results",
    "grade",
    "cost_usd",
    "cost_basis",
    "tool_calls",
    "steps",
    "tokens_in",
    "tokens_out",
    "duration_sec",
    "artifacts_dir",
    "task_revision",
    "started_at",
    "finished_at",
)


@dataclass
class RunImportReport:
    suite: str
    model: str
    plan: list[str] = field(default_factory=list)
    dry_run: bool = False
    run_id: str = ""
    created: bool = False
    suite_created: bool = False
    tasks_added: int = 0
    suite_size: int = 0
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0
    replaced_runs: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    ignored_unknown: list[str] = field(default_factory=list)  # ids not in the suite, dropped
    date: str = ""  # the run's date (ISO), "" when unknown
    date_source: str = ""  # runs.models.RunDateSource

    @property
    def resolved(self) -> int:
        return self.counts.get("resolved", 0)

    @property
    def missing(self) -> int:
        return self.counts.get("missing", 0)

    def summary(self) -> str:
        rate = f"{100 * self.resolved / self.suite_size:.1f}%" if self.suite_size else "n/a"
        outcomes = ", ".join(f"{k} {v}" for k, v in sorted(self.counts.items()))
        if self.dry_run:
            return (
                f"dry run: would import {self.resolved}/{self.suite_size} resolved ({rate}); "
                f"{outcomes}; nothing stored"
            )
        if not (self.added or self.updated or self.removed):
            return f"unchanged: run {self.run_id} already holds these results ({outcomes})"
        return (
            f"run {self.run_id}: {self.resolved}/{self.suite_size} resolved ({rate}); "
            f"{self.added} added, {self.updated} updated, {self.unchanged} unchanged; {outcomes}"
            + (f"; replaced {self.replaced_runs} earlier import(s)" if self.replaced_runs else "")
        )


@dataclass(frozen=True, slots=True)
class Outcome:
    kind: Kind | None  # None: not evaluated (a patch, no result)
    rule: ExitStatusRule | None = None
    note: str = ""


def decide(entry: InstanceEntry) -> Outcome:
    """One instance's outcome from its report and its trajectory (pure)."""
    traj = entry.trajectory
    status = traj.exit_status if traj else ""
    rule = from_exit_status(status) if traj else None
    # Only an unusual stop is worth a note: "Submitted" is every normal attempt's status.
    note = f"exit status {status!r}" if rule is not None else ""
    # Inspect's scorer and Harbor's verifier (an ATIF trial's result.json) decide by themselves.
    if traj is not None and traj.format in TRIAL_VERDICTS and entry.result is None:
        if traj.error:
            return Outcome(Kind.ERROR, note=f"sample error: {traj.error[:500]}")
        if traj.resolved is True:
            return Outcome(Kind.RESOLVED, note=note)
        if traj.resolved is False:
            return Outcome(Kind.UNRESOLVED, rule, note)
    if entry.result is not None:
        kind = entry.result.kind
        if kind is Kind.RESOLVED or kind not in AGENT_EXPLAINED:
            return Outcome(kind, note=note)
        return Outcome(kind, rule, note)
    patch = _patch_of(entry)
    if patch.strip():
        return Outcome(None, note=note)
    if traj is not None:
        return Outcome(Kind.EMPTY_PATCH, rule, note)
    return Outcome(Kind.MISSING)


def _patch_of(entry: InstanceEntry) -> str:
    if entry.trajectory is not None and entry.trajectory.submission:
        return entry.trajectory.submission
    return entry.patch or ""


def outcome_label(attempt: Attempt) -> str:
    if attempt.status == AttemptStatus.NOT_EVALUATED:
        return "not_evaluated"
    if attempt.status == AttemptStatus.MISSING:
        return "missing"
    return str(attempt.failure_reason_id or "resolved")


def run_folder_import(
    *,
    path: Path | str,
    suite_name: str,
    model_name: str,
    dry_run: bool = False,
    skip_bad: bool = False,
    ignore_unknown: bool = False,
    date: dt.date | dt.datetime | None = None,
    patches: dict[str, str | None] | None = None,
    source_name: str = "",
    progress: Progress | None = None,
    on_plan: Callable[[list[str]], None] | None = None,
    created_by=None,
) -> RunImportReport:
    """Import the run folder at ``path`` for ``model_name`` on suite ``suite_name``.

    See the module doc. ``dry_run`` reads and checks everything and returns the plan and the
    outcomes it would record, storing nothing (not even the suite). ``on_plan`` gets the plan
    (what was found, format by format) once the folder is read, before anything is stored.
    ``ignore_unknown``: results for instances the suite lacks are dropped and listed instead of
    being errors. ``date``: the run's date when the folder gives none. ``patches``: each
    instance's patch from a predictions file given apart. ``source_name``: what to call the
    source (an upload's name) instead of ``path``.
    """
    path = Path(path)
    # The file itself when one file was imported (seven runs from seven files in one folder
    # are seven sources, not one folder).
    shown = source_name or str(path)
    folder = read_run_folder(path, progress=progress)
    for instance_id, patch in (patches or {}).items():
        folder.entry(instance_id, 0).patch = patch
    report = RunImportReport(suite=suite_name, model=model_name, plan=folder.plan_lines())
    report.dry_run = dry_run
    if source_name:
        report.plan = [line.replace(str(folder.root), source_name) for line in report.plan]
    dated = folder.run_date() or _date_in_name(source_name or path.name)
    if dated is not None and date is not None:
        report.plan.append(f"  date  {date.isoformat()} not used: the folder gives its own")
    elif dated is None and date is not None:
        dated = (RunDateSource.GIVEN.value, _aware(date))
        report.plan.append(f"  date  {dated[1].isoformat()} (given)")
    elif dated is None:
        report.plan.append("  date  unknown: shown as the import's, out of date filters")
    if on_plan is not None:
        on_plan(report.plan)
    problems = list(folder.problems)
    if problems and not skip_bad:
        raise SwebenchInputError(problems, shown)
    # One transaction from here: a refusal or a failed write after the folder's dataset made
    # or extended the suite leaves no suite, task, model configuration, run or attempt.
    with transaction.atomic():
        suite, tasks = _suite_tasks(folder, suite_name, dry_run, report)
        by_id = {t.task_id: t for t in tasks}
        for key, entry in list(folder.entries.items()):
            if entry.instance_id not in by_id:
                if ignore_unknown:
                    report.ignored_unknown.append(entry.instance_id)
                else:
                    where = _where(entry)
                    problems.append(
                        Problem(where, f"instance {entry.instance_id} is not in suite {suite_name}")
                    )
                del folder.entries[key]
        report.ignored_unknown = sorted(set(report.ignored_unknown))
        if problems and not skip_bad:
            raise SwebenchInputError(problems, shown)
        report.skipped = [str(p) for p in problems]
        for task in tasks:
            folder.entry(task.task_id, 0)
        report.suite_size = len(tasks)
        if dated is not None:
            report.date_source, report.date = dated[0], dated[1].isoformat()
        else:
            report.date_source = RunDateSource.UNKNOWN.value
        if dry_run:
            for entry in folder.entries.values():
                label = _label(decide(entry))
                report.counts[label] = report.counts.get(label, 0) + 1
            return report
        return _write(folder, suite, by_id, model_name, report, progress, created_by, dated, shown)


# SWE-bench's experiments name each submission by its date: 20250807_mini-v1.7.0_gpt-5.
_DATED_NAME = re.compile(r"^(\d{4})(\d{2})(\d{2})[_-]")


def _date_in_name(name: str) -> tuple[str, dt.datetime] | None:
    """The date a run's file or folder is named with (``YYYYMMDD_...``), where the folder says
    none itself; None for a name without one or with an impossible date."""
    match = _DATED_NAME.match(PurePosixPath(name).name)
    if match is None:
        return None
    try:
        day = dt.date(*(int(g) for g in match.groups()))
    except ValueError:
        return None
    return RunDateSource.FILENAME.value, _aware(day)


def _aware(date: dt.date | dt.datetime) -> dt.datetime:
    if not isinstance(date, dt.datetime):
        return dt.datetime.combine(date, dt.time.min, tzinfo=dt.UTC)
    return date if date.tzinfo else date.replace(tzinfo=dt.UTC)


def _where(entry: InstanceEntry) -> str:
    for source in (entry.trajectory_file, entry.report_file):
        if source is not None:
            return source.label
    return entry.result.where if entry.result else entry.instance_id


def _label(outcome: Outcome) -> str:
    if outcome.kind is None:
        return "not_evaluated"
    if outcome.kind in (Kind.MISSING, Kind.INCOMPLETE):
        return "missing"
    if outcome.kind is Kind.RESOLVED:
        return "resolved"
    reason = outcome.rule.reason if outcome.rule else _kind_reason(outcome.kind)
    return reason.value if reason else "resolved"


def _kind_reason(kind: Kind) -> Reason | None:
    return KINDS[kind].reason


def _suite_tasks(
    folder: RunFolder, suite_name: str, dry_run: bool, report: RunImportReport
) -> tuple[Suite | None, list[Task]]:
    """The suite and its tasks, after importing the folder's dataset into it (not in a dry
    run: there the dataset's ids stand in for the tasks it would add)."""
    suite = Suite.objects.filter(name=suite_name).first()
    if folder.dataset is None:
        if suite is None:
            raise SwebenchInputError(
                [
                    Problem(
                        "suite",
                        f"no suite named {suite_name!r}, and no instances.jsonl in the folder to "
                        "create it from (import the dataset first: ab import-swebench)",
                    )
                ]
            )
    elif dry_run:
        existing = (
            set(Task.objects.for_suite(suite).values_list("task_id", flat=True)) if suite else set()
        )
        new_ids = sorted(_dataset_ids(folder.dataset) - existing)
        report.tasks_added = len(new_ids)
        report.suite_created = suite is None
        report.plan.append(
            f"  suite {suite_name}: {'would be created with' if suite is None else 'would gain'} "
            f"{len(new_ids)} task(s) from {folder.dataset.name}"
        )
        tasks = (
            list(Task.objects.for_suite(suite).only("id", "task_id", "revision")) if suite else []
        )
        tasks += [Task(task_id=i, revision=1) for i in new_ids]
        return suite, sorted(tasks, key=lambda t: t.task_id)
    else:
        imported = swebench_import(source=folder.dataset, suite_name=suite_name)
        report.suite_created = suite is None
        report.tasks_added = len(imported.created)
        suite = Suite.objects.get(name=suite_name)
    assert suite is not None
    tasks = list(
        Task.objects.for_suite(suite).only("id", "task_id", "revision").order_by("task_id")
    )
    return suite, tasks


def _dataset_ids(path: Path) -> set[str]:
    ids = set()
    with path.open("rb") as handle:
        for line in handle:
            if line.strip():
                row = json.loads(line)
                if isinstance(row, dict) and isinstance(row.get("instance_id"), str):
                    ids.add(row["instance_id"])
    return ids


# --- Writing -------------------------------------------------------------------------------


def _write(
    folder: RunFolder,
    suite: Suite | None,
    by_id: dict[str, Task],
    model_name: str,
    report: RunImportReport,
    progress: Progress | None,
    created_by,
    dated: tuple[str, dt.datetime] | None,
    source_path: str,
) -> RunImportReport:
    assert suite is not None
    # Nothing is created before the transaction below (a refused write must leave no model
    # configuration behind); an existing configuration of another kind is refused here.
    known = ModelConfig.objects.filter(name=model_name.strip()).first()
    if known is not None:
        _external(model_name)
    existing = (
        Run.objects.filter(suite=suite, model_config=known, source=RunSource.PUBLISHED)
        .filter(config_snapshot__kind=SNAPSHOT_KIND)
        .order_by("-created_at")
        .first()
        if known is not None
        else None
    )
    old_digests: dict[str, str] = (
        dict(existing.config_snapshot.get("digests", {})) if existing else {}
    )
    digests = {e.key: e.digest(by_id[e.instance_id].revision) for e in folder.entries.values()}
    changed = [e for e in folder.entries.values() if old_digests.get(e.key) != digests[e.key]]
    removed = sorted(set(old_digests) - set(digests))
    report.unchanged = len(digests) - len(changed)
    now = timezone.now()
    # An unknown date stays the first import's time: the run is "imported on" that day.
    date_source, when = dated or (
        RunDateSource.UNKNOWN.value,
        existing.finished_at
        if existing is not None
        and existing.date_source == RunDateSource.UNKNOWN
        and existing.finished_at
        else now,
    )
    same_date = existing is not None and (existing.date_source, existing.finished_at) == (
        date_source,
        when,
    )
    if existing is not None and not changed and not removed and same_date:
        report.run_id = str(existing.public_id)
        report.counts = dict(existing.config_snapshot.get("counts", {}))
        return report

    run_public_id = existing.public_id if existing else uuid.uuid4()
    folders = {e.key: _artifacts_dir(run_public_id, e) for e in changed}
    _copy_artifacts(changed, folders, progress)
    try:
        with transaction.atomic():
            # The model configuration too: a write that fails leaves none behind.
            model = _external(model_name)
            # Two imports of one model at once take turns here; a second creating import replaces
            # the first's run below rather than leaving two.
            ModelConfig.objects.select_for_update().filter(pk=model.pk).first()
            _name_the_model(model, folder)
            if existing is None:
                replaced = Run.objects.filter(
                    suite=suite, model_config=model, source=RunSource.PUBLISHED
                )
                report.replaced_runs = replaced.count()
                replaced.delete()
                run = Run.objects.create(
                    public_id=run_public_id,
                    suite=suite,
                    model_config=model,
                    source=RunSource.PUBLISHED,
                    status=RunStatus.FINISHED,
                    created_by=created_by,
                    started_at=when,
                    finished_at=when,
                    samples=max(e.sample_index for e in folder.entries.values()) + 1,
                    selection={"task_ids": sorted(by_id)},
                    notes=_notes(folder),
                    date_source=date_source,
                )
                report.created = True
            else:
                run = existing
            current = {
                f"{task_id}#{sample}": pk
                for pk, task_id, sample in run.attempts.values_list(
                    "id", "task__task_id", "sample_index"
                )
            }
            if not same_date:
                # Every finished attempt of the run ran when the run did.
                run.attempts.filter(status=AttemptStatus.FINISHED).update(
                    started_at=when, finished_at=when
                )
            fresh: list[Attempt] = []
            for entry in changed:
                attempt = _attempt(
                    entry, run, suite, model, by_id[entry.instance_id], when, folders[entry.key]
                )
                if entry.key in current:
                    attempt_replace_with_import(
                        pk=current[entry.key], imported=attempt, fields=UPDATED_FIELDS
                    )
                    report.updated += 1
                else:
                    fresh.append(attempt)
            insert_rows(fresh)
            report.added = len(fresh)
            stale = [current[key] for key in removed if key in current]
            Attempt.objects.filter(pk__in=stale).delete()
            report.removed = len(stale)
            counts: dict[str, int] = {}
            for attempt in run.attempts.only("status", "failure_reason_id"):
                label = outcome_label(attempt)
                counts[label] = counts.get(label, 0) + 1
            run.config_snapshot = {
                "kind": SNAPSHOT_KIND,
                "source_path": source_path,
                "formats": dict(folder.formats),
                "metadata": folder.metadata,
                "counts": counts,
                "skipped": report.skipped,
                "ignored_unknown": report.ignored_unknown,
                "digests": digests,
            }
            run.started_at = run.finished_at = when
            run.date_source = date_source
            run.source_path = source_path[:1000]
            run.imported_at = now
            run.imported_by = created_by if getattr(created_by, "pk", None) else None
            run.save(
                update_fields=[
                    "config_snapshot",
                    "started_at",
                    "finished_at",
                    "date_source",
                    "source_path",
                    "imported_at",
                    "imported_by",
                ]
            )
            run_refresh_totals(run)
            # The stored trajectories become searchable once the import commits.
            indexed = run.attempts.filter(artifacts_dir__in=[f for f in folders.values() if f])
            attempts_index_on_commit(list(indexed.values_list("id", flat=True)))
    except BaseException:
        # Nothing of a write that failed stays: the files copied for it go too.
        _remove_artifacts(changed, folders)
        raise
    report.run_id = str(run.public_id)
    report.counts = counts
    return report


def _external(model_name: str) -> ModelConfig:
    """The imported run's model configuration (created on first use); refuses the name of a
    configuration of another kind."""
    return external_model(
        name=model_name, description="External system: an imported run (trajectories, reports)."
    )


def _notes(folder: RunFolder) -> str:
    title = folder.metadata.get("name") or folder.metadata.get("title") or ""
    links = " ".join(folder.metadata.get("links", [])[:3])
    return " ".join(
        part for part in (f"Imported run folder {folder.root.name}.", str(title), links) if part
    )


def _artifacts_dir(run_public_id: uuid.UUID, entry: InstanceEntry) -> str:
    if entry.trajectory_file is None and entry.report_file is None:
        return ""
    return f"imports/{run_public_id}/{entry.instance_id}__{entry.sample_index}"


def _name_the_model(model: ModelConfig, folder) -> None:
    """The imported system's model as its trajectories name it (the configuration was created
    named after the row: "gem100" is no model), unless someone set one."""
    seen = Counter(
        e.trajectory.model
        for e in folder.entries.values()
        if e.trajectory is not None and e.trajectory.model
    )
    if seen and model.model_name in ("", model.name):
        model.model_name = seen.most_common(1)[0][0][:200]
        model.save(update_fields=["model_name"])


def _remove_artifacts(entries: list[InstanceEntry], folders: dict[str, str]) -> None:
    storage = storages["artifacts"]
    for entry in entries:
        root = folders[entry.key]
        for name in (*ARTIFACT_NAMES.values(), REPORT_ARTIFACT) if root else ():
            if storage.exists(f"{root}/{name}"):
                storage.delete(f"{root}/{name}")


def _copy_artifacts(
    entries: list[InstanceEntry], folders: dict[str, str], progress: Progress | None
) -> None:
    """Each trajectory and report, byte for byte, streamed into the attempt's folder."""
    storage = storages["artifacts"]
    json_log = _JsonLogSamples()
    with_files = [e for e in entries if folders[e.key]]
    for index, entry in enumerate(with_files, start=1):
        root = folders[entry.key]
        for name in (*ARTIFACT_NAMES.values(), REPORT_ARTIFACT):
            if storage.exists(f"{root}/{name}"):
                storage.delete(f"{root}/{name}")
        if entry.trajectory_file is not None and entry.trajectory is not None:
            source = entry.trajectory_file
            name = f"{root}/{ARTIFACT_NAMES[entry.trajectory.format]}"
            json_index = inspect_log.json_member_index(source.member)
            if json_index is not None:
                storage.save(name, ContentFile(json_log.sample(source.path, json_index)))
            elif source.member:
                with zipfile.ZipFile(source.path) as archive:
                    info = archive.getinfo(source.member)
                with inspect_log.open_member(source.path, info) as handle:
                    storage.save(name, File(handle, name=ARTIFACT_NAMES[entry.trajectory.format]))
            else:
                with source.path.open("rb") as handle:
                    storage.save(name, File(handle, name=source.path.name))
        if entry.report_file is not None:
            with entry.report_file.path.open("rb") as handle:
                storage.save(f"{root}/{REPORT_ARTIFACT}", File(handle, name=REPORT_ARTIFACT))
        if progress is not None:
            progress("copying", index, len(with_files))


class _JsonLogSamples:
    """The samples of an Inspect .json log, parsed once for all its attempts (one log kept)."""

    def __init__(self) -> None:
        self._path: Path | None = None
        self._samples: list = []

    def sample(self, path: Path, index: int) -> bytes:
        if path != self._path:
            with path.open("rb") as handle:
                data = parse_json(handle, path.name, json_limits())
            self._path, self._samples = path, data["samples"]
        return inspect_log.sample_bytes(self._samples[index])


def _attempt(
    entry: InstanceEntry,
    run: Run,
    suite: Suite,
    model: ModelConfig,
    task: Task,
    now: dt.datetime,
    artifacts_dir: str,
) -> Attempt:
    outcome = decide(entry)
    patch = _patch_of(entry)
    result = entry.result
    attempt = finished_attempt(
        run=run,
        suite=suite,
        model=model,
        task=task,
        kind=outcome.kind or Kind.UNRESOLVED,
        now=now,
        tests_status=result.tests_status if result else None,
        patch=patch or None,
        note=outcome.note,
    )
    attempt.sample_index = entry.sample_index
    attempt.artifacts_dir = artifacts_dir
    traj = entry.trajectory
    if traj is not None and attempt.status != AttemptStatus.MISSING:
        # What the trajectory records; a report alone records no usage (NULL: "—").
        cost = traj.cost_usd
        attempt.cost_usd = None if cost is None else round(cost, 6)  # type: ignore[assignment]
        # The run's own figure: kept as reported, never re-priced here.
        attempt.cost_basis = "" if cost is None else CostBasis.REPORTED
        attempt.steps = traj.api_calls
        attempt.tool_calls = traj.tool_calls
        attempt.tokens_in = traj.tokens_in
        attempt.tokens_out = traj.tokens_out
        attempt.duration_sec = traj.duration_sec
        if traj.ended_at is not None and attempt.status == AttemptStatus.FINISHED:
            # Each attempt's own time, not the import's (or the run's last).
            with contextlib.suppress(OverflowError, ValueError, OSError):
                ended = dt.datetime.fromtimestamp(traj.ended_at, tz=dt.UTC)
                started = ended - dt.timedelta(seconds=traj.duration_sec or 0)
                attempt.started_at, attempt.finished_at = started, ended
    elif result is not None and attempt.status != AttemptStatus.MISSING:
        # A published entry with no trajectory may still say its cost and model calls;
        # tokens, tool calls and wall time stay unknown ("—").
        if result.cost_usd is not None:
            attempt.cost_usd = round(result.cost_usd, 6)  # type: ignore[assignment]
            attempt.cost_basis = CostBasis.REPORTED
        if result.api_calls is not None:
            attempt.steps = result.api_calls
    if outcome.kind is None:
        # A patch nobody evaluated: it waits for ``run_evaluate``, with no outcome.
        attempt_mark_not_evaluated(attempt, note=outcome.note)
    elif outcome.rule is not None:
        rule = outcome.rule
        attempt.failure_reason_id = rule.reason.value
        attempt.failure_stage = Stage.AGENT_RUN.value
        attempt.is_infra = rule.reason.is_infrastructure
        attempt.is_timeout = rule.reason is Reason.TIMEOUT
        attempt.error_text = f"[{rule.tag}] {outcome.note}: {rule.why}"
        attempt.error_fingerprint = f"exit:{rule.tag}"
    return attempt
