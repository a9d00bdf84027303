"""Recognising what a run folder holds, one file at a time, before anything is imported.

``read_run_folder(path)`` walks the folder (or takes one file), tells each file's format from
its name and content, reads it (bounded by ``IMPORT_FILE_MAX_BYTES``; only one file is in
memory at a time) and gathers per instance: its trajectory's facts, its report's outcome, its
patch. Problems are collected, not raised, so a dry run can list them all and ``--skip-bad``
can leave their files out. Nothing is stored here.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from django.conf import settings

from runs.imports import inspect_log
from runs.imports.jsonfile import JsonFileError, JsonLimits, parse_json
from runs.imports.legacy import is_legacy_report, read_legacy_report
from runs.imports.numbers import BadValues
from runs.imports.outcomes import InstanceResult
from runs.imports.reports import (
    id_from_path,
    is_report,
    is_run_report,
    read_instance_report,
    read_predictions,
    read_run_report,
)
from runs.imports.trajectories import (
    NotThisFormat,
    TrajectoryFacts,
    is_harbor_trial_result,
    read_atif,
    read_inspect_sample,
    read_mini_swe_agent,
    read_swe_agent,
)
from runs.transcript import atif
from tasks_app.swebench.errors import Problem
from tasks_app.swebench.fields import INSTANCE_ID_RE

FORMATS_TRIED = (
    "mini-swe-agent trajectory (<id>.traj.json)",
    "ATIF trajectory (Harbor's <trial>/agent/trajectory.json, or <id>.atif.json)",
    "SWE-agent trajectory (<id>.traj)",
    "Inspect AI log (.eval, or .json with version, eval, samples)",
    "per-instance report.json (wrapped {id: report} or not)",
    "harness run report (resolved_ids, ...)",
    "legacy v1 report (resolved, no_generation, ... id lists)",
    "predictions (instance_id, model_patch)",
    "dataset (instances.jsonl)",
)
# JSON files that sit beside results and carry no outcome of their own: summaries and id lists
# the experiments repository, sb-cli and the harness's helpers write. They are skipped with a
# notice (the plan lists them); any other JSON of no known format is a problem naming it, so a
# result file of a format we do not read is never dropped silently (``--skip-bad`` leaves such
# files out and lists them). One rule for ``ab import-run`` and ``ab import-results``.
AUXILIARY_JSON = frozenset(
    {
        "resolved_by_repo.json",
        "resolved_by_time.json",
        "results_summary.json",
        "stats.json",
        "ids.json",
    }
)
# Harbor's job and trial configurations: how the run was set up, no outcome of their own.
CONFIG_JSON = frozenset({"config.json", "lock.json"})
# metadata.yaml is a few lines of a run's description: more is not one.
METADATA_MAX_BYTES = 1024 * 1024
URL_RE = re.compile(r"https?://[^\s)>\]\"']+")
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True, slots=True)
class SourceFile:
    """A file of the folder (``member``: a sample inside an .eval log), with its digest."""

    path: Path
    relative: str
    digest: str
    member: str = ""

    @property
    def label(self) -> str:
        return f"{self.relative}:{self.member}" if self.member else self.relative


@dataclass
class InstanceEntry:
    instance_id: str
    sample_index: int = 0
    trajectory: TrajectoryFacts | None = None
    trajectory_file: SourceFile | None = None
    result: InstanceResult | None = None
    report_file: SourceFile | None = None
    patch: str | None = None

    @property
    def key(self) -> str:
        return f"{self.instance_id}#{self.sample_index}"

    def digest(self, task_revision: int) -> str:
        """Changes whenever anything imported for this instance would change."""
        parts = {
            "trajectory": self.trajectory_file.digest if self.trajectory_file else None,
            "report": self.report_file.digest if self.report_file else None,
            "result": self._result_parts(),
            "patch": hashlib.sha256(self.patch.encode()).hexdigest() if self.patch else None,
            "revision": task_revision,
        }
        return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()

    def _result_parts(self) -> list[Any] | None:
        if self.result is None:
            return None
        parts: list[Any] = [self.result.kind.value, self.result.tests_status]
        usage = [self.result.cost_usd, self.result.api_calls]
        # Only when the entry says: results imported before usage was read keep their digest.
        return parts + usage if usage != [None, None] else parts


@dataclass
class RunFolder:
    root: Path
    entries: dict[tuple[str, int], InstanceEntry] = field(default_factory=dict)
    dataset: Path | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    formats: Counter[str] = field(default_factory=Counter)
    run_reports: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    auxiliary: list[str] = field(default_factory=list)  # AUXILIARY_JSON files met
    problems: list[Problem] = field(default_factory=list)
    bad_files: list[str] = field(default_factory=list)
    # The latest end among the trajectories that record when they ran (unix time).
    trajectories_ended: float | None = None

    def run_date(self) -> tuple[str, dt.datetime] | None:
        """When the run ran, as the folder says, and where that comes from: its metadata.yaml
        (``date``), an Inspect log's ``created``, else the trajectories' timestamps; None when
        nothing says. Source names are ``runs.models.RunDateSource`` values."""
        for key, source in (("date", "metadata"), ("inspect_created", "inspect")):
            when = _parse_date(self.metadata.get(key))
            if when is not None:
                return source, when
        if self.trajectories_ended is not None:
            return "trajectories", dt.datetime.fromtimestamp(self.trajectories_ended, dt.UTC)
        return None

    def entry(self, instance_id: str, sample_index: int = 0) -> InstanceEntry:
        key = (instance_id, sample_index)
        if key not in self.entries:
            self.entries[key] = InstanceEntry(instance_id, sample_index)
        return self.entries[key]

    def plan_lines(self) -> list[str]:
        """What was found, as the dry run prints it."""
        entries = list(self.entries.values())
        with_traj = Counter(e.trajectory.format.value for e in entries if e.trajectory)
        with_report = sum(1 for e in entries if e.result is not None)
        lines = [
            f"{self.root}: {len({e.instance_id for e in entries})} instance(s), "
            f"{sum(with_traj.values())} with a trajectory, {with_report} with a report",
        ]
        lines += [
            f"  format  {name}: {count} file(s)" for name, count in sorted(self.formats.items())
        ]
        lines += [f"  trajectories  {fmt}: {n}" for fmt, n in sorted(with_traj.items())]
        if self.dataset is not None:
            lines.append(f"  dataset  {self.dataset.relative_to(self.root).as_posix() or '.'}")
        if self.metadata:
            shown = ", ".join(f"{k}={v}" for k, v in self.metadata.items() if k != "links")
            lines.append(f"  metadata  {shown}")
        dated = self.run_date()
        if dated is not None:
            lines.append(f"  date  {dated[1].isoformat()} (from the {dated[0]})")
        lines += [
            f"  ignored  {name} (a known auxiliary file, no outcomes)" for name in self.auxiliary
        ]
        if self.ignored:
            lines.append(f"  ignored  {len(self.ignored)} other file(s) (logs, scripts, text)")
        # Problems are not listed here: the import raises them (or, with skip_bad, lists the
        # files it left out), so each is said once.
        return lines


def read_run_folder(path: Path, *, progress: Progress | None = None) -> RunFolder:
    """Everything ``path`` (a folder or one file) holds for an import; see the module doc."""
    path = Path(path)
    folder = RunFolder(root=path if path.is_dir() else path.parent)
    if not path.exists():
        folder.problems.append(Problem(str(path), "no such file or folder"))
        return folder
    files = sorted(_walk(path)) if path.is_dir() else [path]
    reader = _Reader(folder, settings.IMPORT_FILE_MAX_BYTES, json_limits())
    for index, file in enumerate(files, start=1):
        reader.read(file)
        if progress is not None:
            progress("reading", index, len(files))
    reader.finish()
    return folder


def json_limits() -> JsonLimits:
    """What one imported JSON file may hold, from the settings (IMPORT_JSON_*)."""
    return JsonLimits(
        settings.IMPORT_JSON_MAX_DEPTH,
        settings.IMPORT_JSON_MAX_ITEMS,
        settings.IMPORT_JSON_MAX_MEMORY_MB * 1024 * 1024,
    )


def _walk(root: Path):
    for directory, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in names:
            if not name.startswith("."):
                yield Path(directory) / name


class _Reader:
    def __init__(self, folder: RunFolder, max_bytes: int, limits: JsonLimits):
        self.folder = folder
        self.max_bytes = max_bytes
        self.limits = limits
        self.from_reports: dict[str, tuple[InstanceResult, SourceFile | None]] = {}
        self.from_run_reports: dict[str, InstanceResult] = {}
        self.patches: dict[str, str | None] = {}
        # The patches kept until the write (trajectories' submissions, patch.diff files,
        # predictions), in bytes of memory: the whole folder's are bounded, not each file's.
        self.patch_memory = 0
        self.patch_budget = settings.IMPORT_PATCHES_MAX_MB * 1024 * 1024

    # --- one file -----------------------------------------------------------------------

    def read(self, path: Path) -> None:
        relative = path.relative_to(self.folder.root).as_posix()
        name = path.name
        try:
            if name.endswith(".traj.json"):
                self._trajectory(path, relative, name.removesuffix(".traj.json"), mini=True)
            elif name.endswith(".traj"):
                self._trajectory(path, relative, name.removesuffix(".traj"), mini=False)
            elif name.endswith(".eval"):
                self._eval_log(path, relative)
            elif name in ("metadata.yaml", "metadata.yml"):
                self._metadata_yaml(path, relative)
            elif name == "README.md" and path.parent == self.folder.root:
                self._readme(path)
            elif name == "patch.diff":
                # Its size against what is left of the budget first: a patch that cannot be
                # kept is never read (a str takes at least its bytes).
                if self.patch_memory + path.stat().st_size > self.patch_budget:
                    raise _TooManyPatches
                content = self._bytes(path, relative)
                patch = content.decode("utf-8", "replace")
                del content
                self._keep_patches([patch])
                self.patches.setdefault(path.parent.name, patch)
                self.folder.formats["patch.diff"] += 1
            elif name.endswith(".jsonl"):
                self._jsonl(path, relative)
            elif name.endswith(".json"):
                self._json(path, relative)
            else:
                self.folder.ignored.append(relative)
        except JsonFileError as exc:
            self._bad(relative, exc.problem)
        except NotThisFormat as exc:
            self._bad(relative, exc.problem)
        except BadValues as exc:
            for problem in exc.problems:
                self._bad(relative, problem)
        except inspect_log.EvalLogError as exc:
            self._bad(relative, Problem(relative, str(exc)))
        except _TooLarge:
            self._bad(
                relative,
                Problem(relative, f"larger than IMPORT_FILE_MAX_BYTES ({self.max_bytes} bytes)"),
            )
        except _TooManyPatches:
            self._bad(
                relative,
                Problem(
                    relative,
                    "the folder's patches (submissions, patch.diff, predictions) pass "
                    f"IMPORT_PATCHES_MAX_MB ({self.patch_budget // (1024 * 1024)} MB) in all",
                ),
            )

    def _bad(self, relative: str, problem: Problem) -> None:
        self.folder.problems.append(problem)
        self.folder.bad_files.append(relative)

    def _bytes(self, path: Path, relative: str, max_bytes: int = 0) -> bytes:
        if path.stat().st_size > (max_bytes or self.max_bytes):
            raise _TooLarge
        return path.read_bytes()

    def _source(self, path: Path, relative: str, content: bytes, member: str = "") -> SourceFile:
        return SourceFile(path, relative, hashlib.sha256(content).hexdigest(), member)

    def _file_source(self, path: Path, relative: str, extra: bytes = b"") -> SourceFile:
        """The file's digest (and ``extra``'s after it), read in chunks: the same digest as
        ``_source`` of its bytes, without them in memory."""
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
        digest.update(extra)
        return SourceFile(path, relative, digest.hexdigest())

    def _parse(self, path: Path, relative: str) -> Any:
        """The JSON file, read from disk within the limits (never whole in memory)."""
        if path.stat().st_size > self.max_bytes:
            raise _TooLarge
        with path.open("rb") as handle:
            return parse_json(handle, relative, self.limits.fresh())

    def _trajectory(self, path: Path, relative: str, instance_id: str, *, mini: bool) -> None:
        data = self._parse(path, relative)
        if mini:
            facts = read_mini_swe_agent(data, relative, instance_id)
            self.folder.formats["mini-swe-agent trajectory"] += 1
        else:
            facts = read_swe_agent(data, relative, instance_id)
            self.folder.formats["SWE-agent trajectory"] += 1
        del data
        self._add_trajectory(facts, self._file_source(path, relative))

    def _keep_patches(self, patches: Iterable[str | None]) -> None:
        """Count patches to be kept against the folder's budget; ``_TooManyPatches`` past it."""
        memory = self.patch_memory + sum(sys.getsizeof(p) for p in patches if p)
        if memory > self.patch_budget:
            raise _TooManyPatches
        self.patch_memory = memory

    def _add_trajectory(self, facts: TrajectoryFacts, source: SourceFile) -> None:
        self._keep_patches([facts.submission])
        if facts.ended_at is not None:
            ended = self.folder.trajectories_ended
            self.folder.trajectories_ended = max(ended or facts.ended_at, facts.ended_at)
        entry = self.folder.entry(facts.instance_id, facts.epoch - 1)
        if entry.trajectory_file is not None:
            self._bad(
                source.label,
                Problem(
                    source.label,
                    f"second trajectory for {entry.key} (first in {entry.trajectory_file.label})",
                ),
            )
            return
        entry.trajectory, entry.trajectory_file = facts, source

    def _eval_log(self, path: Path, relative: str) -> None:
        members = inspect_log.sample_members(path)
        header = inspect_log.read_header(path, self.max_bytes)
        if header is not None:
            meta = parse_json(header, f"{relative}:header.json", self.limits.fresh())
            self._inspect_metadata(meta.get("eval", {}) if isinstance(meta, dict) else {})
        for info in members:
            where = f"{relative}:{info.filename}"
            try:
                content = inspect_log.read_member(path, info, self.max_bytes)
                facts = read_inspect_sample(parse_json(content, where, self.limits.fresh()), where)
            except JsonFileError as exc:
                self._bad(where, exc.problem)
                continue
            except NotThisFormat as exc:
                self._bad(where, exc.problem)
                continue
            except BadValues as exc:
                for problem in exc.problems:
                    self._bad(where, problem)
                continue
            self.folder.formats["Inspect AI sample"] += 1
            self._add_trajectory(facts, self._source(path, relative, content, info.filename))

    def _inspect_metadata(self, spec: Any) -> None:
        if isinstance(spec, dict):
            for key in ("task", "model", "created"):
                if isinstance(spec.get(key), str):
                    self.folder.metadata.setdefault(f"inspect_{key}", spec[key])

    def _json_log(self, data: dict, path: Path, relative: str) -> None:
        self._inspect_metadata(data["eval"])
        samples = data.get("samples") or []
        if not samples:
            self._bad(
                relative,
                Problem(
                    relative,
                    f"an Inspect log (status {data.get('status')!r}) without samples: "
                    "write it again without header_only, or import its .eval",
                ),
            )
            return
        for index, sample in enumerate(samples):
            member = inspect_log.json_member(index)
            where = f"{relative}:{member}"
            try:
                facts = read_inspect_sample(sample, where)
            except NotThisFormat as exc:
                self._bad(where, exc.problem)
                continue
            except BadValues as exc:
                for problem in exc.problems:
                    self._bad(where, problem)
                continue
            self.folder.formats["Inspect AI sample"] += 1
            content = inspect_log.sample_bytes(sample)
            self._add_trajectory(facts, self._source(path, relative, content, member))

    def _metadata_yaml(self, path: Path, relative: str) -> None:
        text = self._bytes(path, relative, METADATA_MAX_BYTES).decode("utf-8", "replace")
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            self._bad(relative, Problem(relative, f"invalid YAML{at}"))
            return
        except RecursionError:
            self._bad(relative, Problem(relative, "invalid YAML: nested too deep"))
            return
        if not isinstance(data, dict):
            self._bad(relative, Problem(relative, "metadata.yaml must be a mapping"))
            return
        info = data["info"] if isinstance(data.get("info"), dict) else {}
        for key in ("name", "date", "oss", "verified"):
            value = info.get(key, data.get(key))
            if isinstance(value, dt.date):  # YAML reads an unquoted 2025-11-18 as a date
                value = value.isoformat()
            if isinstance(value, str | bool | int):
                self.folder.metadata[key] = value
        # From the text, not the loaded data: YAML aliases would repeat a value without bound
        # (a "billion laughs" document) if it were written out.
        links = sorted(set(URL_RE.findall(text)))[:10]
        if links:
            self.folder.metadata["links"] = links
        self.folder.formats["metadata.yaml"] += 1

    def _readme(self, path: Path) -> None:
        with path.open("rb") as handle:
            text = handle.read(64 * 1024).decode("utf-8", "replace")
        title = next((ln[2:].strip() for ln in text.splitlines() if ln.startswith("# ")), "")
        if title:
            self.folder.metadata.setdefault("title", title[:200])
        links = URL_RE.findall(text)[:10]
        if links:
            self.folder.metadata.setdefault("links", links)
        self.folder.formats["README.md"] += 1

    def _jsonl(self, path: Path, relative: str) -> None:
        if path.stat().st_size > self.max_bytes:
            raise _TooLarge
        rows = []
        limits = self.limits.fresh()  # one budget for all the file's lines
        with path.open("rb") as handle:
            for number, line in enumerate(handle, 1):
                if line.strip():
                    rows.append(parse_json(line, f"{relative} line {number}", limits))
        first = rows[0] if rows else None
        if isinstance(first, dict) and "base_commit" in first and "problem_statement" in first:
            if self.folder.dataset is not None:
                self._bad(
                    relative, Problem(relative, f"second dataset (first {self.folder.dataset})")
                )
                return
            self.folder.dataset = path
            self.folder.formats["dataset (jsonl)"] += 1
            return
        problems: list[Problem] = []
        patches = read_predictions(rows, relative, problems)
        if patches is None or problems:
            self._bad(relative, problems[0] if problems else _none_of_these(relative))
            return
        self._keep_patches(patches.values())
        self.patches.update(patches)
        self.folder.formats["predictions"] += 1

    def _json(self, path: Path, relative: str) -> None:
        if path.name in AUXILIARY_JSON:
            self.folder.auxiliary.append(relative)
            return
        if path.name in CONFIG_JSON:
            self.folder.ignored.append(relative)
            return
        data = self._parse(path, relative)
        problems: list[Problem] = []
        if atif.is_atif(data):
            self._atif(path, relative, data)
        elif is_harbor_trial_result(data) or _is_harbor_job_result(data):
            # Read with the trial's trajectory (which comes first: agent/ sorts before it);
            # a trial without one (its agent never started) has nothing to show.
            self.folder.ignored.append(relative)
        elif inspect_log.is_json_log(data):
            self._json_log(data, path, relative)
        elif is_legacy_report(data):
            self.from_run_reports.update(read_legacy_report(data, relative, problems))
            self.folder.run_reports.append(relative)
            self.folder.formats["legacy v1 report"] += 1
        elif is_run_report(data):
            self.from_run_reports.update(read_run_report(data, relative, problems))
            self.folder.run_reports.append(relative)
            self.folder.formats["harness run report"] += 1
        elif isinstance(data, dict) and "trajectory_format" in data:
            self._add_trajectory(
                read_mini_swe_agent(data, relative, id_from_path(path.as_posix())),
                self._file_source(path, relative),
            )
            self.folder.formats["mini-swe-agent trajectory"] += 1
        elif is_report(data) or (
            isinstance(data, dict) and data and all(is_report(v) for v in data.values())
        ):
            self._reports(data, path, relative, problems)
        else:
            patches = read_predictions(data, relative, problems)
            if patches is None:
                problems.append(_none_of_these(relative))
            else:
                self._keep_patches(patches.values())
                self.patches.update(patches)
                self.folder.formats["predictions"] += 1
        if problems:
            for problem in problems:
                self._bad(relative, problem)

    def _atif(self, path: Path, relative: str, data: dict) -> None:
        """An ATIF trajectory: in a Harbor trial folder (``<trial>/agent/trajectory.json``,
        its ``result.json`` naming the task and holding the verdict), our own export (its
        ``extra.agentbench`` naming the task and sample), or ``<instance id>.atif.json``."""
        ours = (
            data.get("extra", {}).get(atif.OURS, {}) if isinstance(data.get("extra"), dict) else {}
        )
        trial = self._harbor_trial(path)
        if trial is not None:
            instance_id = str(trial["task_name"])
            sample = sum(1 for i, _ in self.folder.entries if i == instance_id)
        elif isinstance(ours, dict) and isinstance(ours.get("task_id"), str):
            instance_id = ours["task_id"]
            sample = ours["sample"] if isinstance(ours.get("sample"), int) else 0
        else:
            instance_id = path.name.removesuffix(".json").removesuffix(".atif")
            instance_id = instance_id.removesuffix(".trajectory")
            if instance_id == "trajectory":
                instance_id = path.parent.name
            sample = 0
        facts = read_atif(data, relative, instance_id, trial, sample)
        self.folder.formats["ATIF trajectory"] += 1
        # The trial's verdict is part of what this attempt imports: a new one is a change.
        verdict = json.dumps(trial, sort_keys=True).encode() if trial is not None else b""
        self._add_trajectory(facts, self._file_source(path, relative, verdict))

    def _harbor_trial(self, path: Path) -> dict | None:
        """Harbor's trial ``result.json`` for ``<trial>/agent/trajectory.json``, or None."""
        if path.parent.name != "agent":
            return None
        result = path.parent.parent / "result.json"
        if not result.is_file() or result.stat().st_size > self.max_bytes:
            return None
        try:
            with result.open("rb") as handle:
                data = parse_json(handle, str(result), self.limits.fresh())
        except JsonFileError:
            return None
        return data if is_harbor_trial_result(data) else None

    def _reports(self, data: Any, path: Path, relative: str, problems: list[Problem]) -> None:
        if is_report(data):
            # The id from the file's own path, not the folder-relative one: a report.json
            # imported alone still sits in its <instance_id>/ folder.
            pairs = [(id_from_path(path.as_posix()), data, relative)]
        else:
            pairs = [(k, v, f"{relative} key {k}") for k, v in data.items()]
        source = self._file_source(path, relative)
        for instance_id, report, where in pairs:
            if not INSTANCE_ID_RE.match(instance_id):
                problems.append(
                    Problem(
                        where,
                        f"cannot tell the instance id (got {instance_id!r}): put it in "
                        "logs/<instance_id>/report.json, name it <instance_id>.report.json "
                        "or wrap it as {instance_id: report}",
                    )
                )
                continue
            if instance_id in self.from_reports:
                first = self.from_reports[instance_id][0].where
                problems.append(
                    Problem(where, f"second report for {instance_id} (first in {first})")
                )
                continue
            result = read_instance_report(instance_id, report, where, problems)
            if result is not None:
                # Only a file holding one instance's report is that instance's artifact.
                self.from_reports[instance_id] = (result, source if len(pairs) == 1 else None)
        self.folder.formats["report.json"] += 1

    # --- after the last file ------------------------------------------------------------

    def finish(self) -> None:
        ids = {*self.from_run_reports, *self.from_reports, *self.patches}
        ids |= {instance_id for instance_id, _ in self.folder.entries}
        for instance_id in sorted(ids):
            entry = self.folder.entry(instance_id, 0)
            if instance_id in self.from_reports:
                entry.result, entry.report_file = self.from_reports[instance_id]
            elif instance_id in self.from_run_reports:
                entry.result = self.from_run_reports[instance_id]
            if instance_id in self.patches:
                entry.patch = self.patches[instance_id]
        if not self.folder.entries and not self.folder.problems:
            self.folder.problems.append(
                Problem(str(self.folder.root), "nothing to import: " + _tried())
            )


class _TooLarge(Exception):
    pass


class _TooManyPatches(Exception):
    pass


def _parse_date(value: Any) -> dt.datetime | None:
    """An ISO date or time (a metadata.yaml ``date``, an Inspect ``created``) as an aware time
    (UTC when it names no zone); None when it is not one."""
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        when = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


def _is_harbor_job_result(data: Any) -> bool:
    return isinstance(data, dict) and "n_total_trials" in data and "stats" in data


def _tried() -> str:
    return "formats tried: " + "; ".join(FORMATS_TRIED)


def _none_of_these(relative: str) -> Problem:
    return Problem(relative, "not a format this import reads; " + _tried())
