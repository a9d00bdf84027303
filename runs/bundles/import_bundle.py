"""A bundle (``runs.bundles.bundle``) read back as a run on this installation
(``ab import-run BUNDLE.tar.gz``, ``POST /api/imports/bundle``).

The bundle is verified first (every checksum of its manifest, the upload caps, no secret:
``runs.bundles.manifest``, ``.scrub``); then, in one transaction, the suite and the tasks it
lacks are created from the bundle's (a task already here is kept as it is, and a differing
revision is named), the model configuration is found by name (the same settings) or created,
and the run and its attempts are created with their public ids, columns, stages and files.
The leaderboard row, the comparisons and each task's outcome are then those of the
installation that exported it. The report names the environments a re-run would need.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import IO, Any

from django.core.exceptions import ValidationError
from django.core.files.base import ContentFile
from django.db import DatabaseError, transaction
from django.utils import timezone

from runs.artifacts import storage
from runs.bundles.bundle import ACTIVE
from runs.bundles.manifest import BundleError, read_bundle
from runs.bundles.records import fields_of
from runs.bundles.scrub import BundleSecretError, Scrubber, known_secrets
from runs.models import (
    Attempt,
    AttemptStage,
    FailureReason,
    ModelConfig,
    Run,
)
from runs.services import run_refresh_totals
from tasks_app.models import GoldValidation, Suite, Task
from tasks_app.uploads.archives import ArchiveLimits

# A configuration's columns that differ between installations without changing the agent.
CONFIG_LOCAL = frozenset({"public_id", "slug", "condition", "id"})


@dataclass
class BundleImportReport:
    run_id: str = ""
    suite: str = ""
    model: str = ""
    suite_created: bool = False
    tasks_added: int = 0
    attempts: int = 0
    files: int = 0
    notes: list[str] = field(default_factory=list)
    environments: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return (
            f"run {self.run_id}: {self.attempts} attempt(s) of {self.model} on {self.suite}, "
            f"{self.files} file(s); {self.tasks_added} task(s) added"
        )


def _json(files: dict[str, bytes], name: str, *, lines: bool = False) -> Any:
    if name not in files:
        raise BundleError(f"{name} is missing from the bundle", name)
    try:
        text = files[name].decode()
        if lines:
            return [json.loads(line) for line in text.splitlines() if line.strip()]
        return json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BundleError(f"{name}: not JSON ({exc})", name) from None


def run_bundle_import(
    *, source: IO[bytes], source_name: str = "", model_name: str = "", created_by=None
) -> BundleImportReport:
    """Import the bundle read from ``source``. Raises ``BundleError`` (naming the file) for a
    damaged, changed, oversized, secret-holding or conflicting bundle; nothing is stored then.
    ``model_name``: the configuration's name here, when the bundle's is taken by another."""
    _, files = read_bundle(source, ArchiveLimits.from_settings())
    try:
        Scrubber(known_secrets()).check(files)
    except BundleSecretError as exc:
        raise BundleError(f"{exc.name}: holds a key or token; refused", exc.name) from None
    head = _json(files, "run.json")
    tasks = _json(files, "tasks.jsonl", lines=True)
    attempts = _json(files, "attempts.jsonl", lines=True)
    environments = _json(files, "environments.json")
    _check_references(head, attempts)
    report = BundleImportReport()
    written: list[str] = []
    where = "run.json"  # the file whose records are being stored, for an error to name
    try:
        with transaction.atomic():
            where = "tasks.jsonl"
            suite, by_task_id = _suite_and_tasks(head["suite"], tasks, report)
            where = "run.json"
            config = _model_config(head["model_config"], model_name)
            run = _run(head["run"], suite, config, source_name, created_by)
            report.run_id, report.suite, report.model = str(run.public_id), suite.name, config.name
            where = "attempts.jsonl"
            for index, row in enumerate(attempts, start=1):
                where = f"attempts.jsonl line {index}"
                report.files += _attempt(row, run, by_task_id, files, written)
                report.attempts += 1
            run_refresh_totals(run)
    except BaseException as exc:
        store = storage()
        for name in written:  # the rows are rolled back: their files go too
            store.delete(name)
        if isinstance(exc, KeyError | TypeError | AttributeError | ValidationError | DatabaseError):
            raise BundleError(f"{where}: malformed record ({exc!r})", where) from None
        raise
    report.environments = _environments(environments, by_task_id)
    return report


def _check_references(head: dict, attempts: list[dict]) -> None:
    """What the rows name must exist here (a failure reason of this taxonomy), and no attempt
    may be queued or running: the workers here would take it up."""
    codes = set(FailureReason.objects.values_list("code", flat=True))
    for row in attempts:
        if row.get("status") in ACTIVE:
            raise BundleError(
                f"attempts.jsonl: attempt {row.get('public_id')} is {row['status']}; refused",
                "attempts.jsonl",
            )
        reason = row.get("failure_reason")
        if reason is not None and reason not in codes:
            raise BundleError(
                f"attempts.jsonl: failure reason {reason!r} is not in this taxonomy",
                "attempts.jsonl",
            )


def _suite_and_tasks(
    data: dict, tasks: list[dict], report: BundleImportReport
) -> tuple[Suite, dict[str, Task]]:
    suite, report.suite_created = Suite.objects.get_or_create(
        name=data["name"],
        defaults={"description": data.get("description", ""), "source": data.get("source", "")},
    )
    here = {t.task_id: t for t in Task.objects.for_suite(suite)}
    for row in tasks:
        existing = here.get(row["task_id"])
        if existing is not None:
            if existing.spec_hash != row.get("spec_hash"):
                report.notes.append(
                    f"task {existing.task_id}: kept this installation's (revision "
                    f"{existing.revision}; the bundle's is {row.get('revision')})"
                )
            continue
        values = fields_of(Task, row, keep=("task_id",))
        if Task.objects.filter(public_id=values.get("public_id")).exists():
            values.pop("public_id")
        task = Task.objects.create(suite=suite, **values)
        for gv in row.get("gold_validations") or []:
            GoldValidation.objects.create(task=task, **fields_of(GoldValidation, gv))
        here[task.task_id] = task
        report.tasks_added += 1
    return suite, here


def _model_config(data: dict, name: str) -> ModelConfig:
    values = fields_of(ModelConfig, data)
    if name:
        values |= {"name": name, "slug": ""}
    existing = ModelConfig.objects.filter(name=values["name"]).first()
    if existing is not None:
        differ = sorted(
            name
            for name, value in values.items()
            if name not in CONFIG_LOCAL and getattr(existing, name) != value
        )
        if differ:
            raise BundleError(
                f"run.json: model configuration {existing.name!r} exists here with other "
                f"settings ({', '.join(differ)}); import it under another name (--model)",
                "run.json",
            )
        return existing
    if ModelConfig.objects.filter(public_id=values.get("public_id")).exists():
        values.pop("public_id")
    if not values.get("slug") or ModelConfig.objects.filter(slug=values.get("slug")).exists():
        values.pop("slug", None)
    values.pop("condition", None)  # derived from workspace_files on save
    try:
        return ModelConfig.objects.create(**values)
    except ValidationError as exc:
        raise BundleError(f"run.json: model configuration: {exc}", "run.json") from None


def _run(data: dict, suite: Suite, config: ModelConfig, source_name: str, created_by) -> Run:
    values = fields_of(Run, data)
    public_id = values.get("public_id")
    if Run.objects.filter(public_id=public_id).exists():
        raise BundleError(f"run.json: run {public_id} is already on this installation", "run.json")
    created_at = values.pop("created_at", None)
    values.pop("imported_at", None)  # imported here, now
    run = Run.objects.create(
        suite=suite,
        model_config=config,
        imported_at=timezone.now(),
        imported_by=created_by,
        source_path=source_name[:1000],
        **values,
    )
    if created_at is not None:  # auto_now_add set it to now
        Run.objects.filter(pk=run.pk).update(created_at=created_at)
        run.created_at = created_at
    return run


def _attempt(
    row: dict, run: Run, tasks: dict[str, Task], files: dict[str, bytes], written: list[str]
) -> int:
    task = tasks.get(row.get("task", ""))
    if task is None:
        raise BundleError(f"attempts.jsonl: task {row.get('task')!r} is not in tasks.jsonl")
    values = fields_of(Attempt, row)
    public_id = values["public_id"]
    if Attempt.objects.filter(public_id=public_id).exists():
        raise BundleError(f"attempts.jsonl: attempt {public_id} is already here", "attempts.jsonl")
    folder = f"bundles/{run.public_id}/{public_id}" if row.get("files") else ""
    attempt = Attempt.objects.create(
        run=run,
        task=task,
        suite=run.suite,
        model_config=run.model_config,
        failure_reason_id=row.get("failure_reason"),
        artifacts_dir=folder,
        **values,
    )
    for stage in row.get("stages") or []:
        AttemptStage.objects.create(attempt=attempt, **fields_of(AttemptStage, stage))
    store = storage()
    for name in row.get("files") or []:
        key = f"attempts/{public_id}/{name}"
        if key not in files:
            raise BundleError(f"attempts.jsonl: {key} is listed but not in the bundle", key)
        written.append(store.save(f"{folder}/{name}", ContentFile(files[key])))
    return len(row.get("files") or [])


def _environments(records: list[dict], tasks: dict[str, Task]) -> list[str]:
    """One line per distinct environment a re-run of the run would need, saying whether this
    installation has the same one."""
    lines: dict[str, str] = {}
    for env in records:
        task = tasks.get(env.get("task_id", ""))
        digests = env.get("attempt_image_digests") or []
        if env.get("docker_image"):
            need = f"image {env['docker_image']}" + (f" ({digests[0]})" if digests else "")
            have = task is not None and bool(task.image_digest) and task.image_digest in digests
            lines[need] = "pulled here" if have else "not here: ab pull-images"
        elif env.get("repo_url"):
            commit = env.get("environment_setup_commit") or env.get("repo_commit") or ""
            python = f", Python {env['python_used']}" if env.get("python_used") else ""
            need = f"repository {env['repo_url']} at {commit[:12]}{python}"
            lines[need] = "built in the sandbox from the repository (clone or offline build)"
    return [f"{need}: {state}" for need, state in sorted(lines.items())]
