"""Writes to suites and tasks. Every import is atomic: all of it, or nothing."""

from __future__ import annotations

import enum
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction

from tasks_app import harbor
from tasks_app.models import Suite, Task, TaskRevision, TaskSource
from tasks_app.spec import LoadedTask, PathRules, SpecProblem, TaskSpecError, load_task_dir


class Upsert(enum.StrEnum):
    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"


@dataclass
class ImportReport:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    suites: list[str] = field(default_factory=list)

    def add(self, outcome: Upsert, task_id: str) -> None:
        getattr(self, outcome.value).append(task_id)

    @property
    def total(self) -> int:
        return len(self.created) + len(self.updated) + len(self.unchanged)

    def summary(self) -> str:
        return (
            f"created {len(self.created)}, updated {len(self.updated)}, "
            f"unchanged {len(self.unchanged)}, errors {len(self.errors)}"
        )


def fields_hash(fields: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode()).hexdigest()


def task_upsert(
    *,
    suite: Suite,
    task_id: str,
    fields: dict[str, Any],
    source_file: str = "",
    dataset_version: str = "",
) -> tuple[Task, Upsert]:
    """Create a task or update it in place, bumping its revision when anything changed.

    ``fields`` are Task column values (including ``spec``). Attempts keep pointing at the task
    and remember the revision they ran against, so a changed task keeps its history.
    """
    digest = fields_hash(fields)
    task = Task.objects.filter(suite=suite, task_id=task_id).first()
    if task is None:
        task = Task(suite=suite, task_id=task_id, spec_hash=digest, **fields)
        task.dataset_version = dataset_version or task.dataset_version
        task.save()
        TaskRevision.objects.create(
            task=task,
            revision=1,
            spec_hash=digest,
            changed_fields=[],
            source_file=source_file,
            dataset_version=dataset_version,
        )
        return task, Upsert.CREATED
    if task.spec_hash == digest:
        return task, Upsert.UNCHANGED
    changed = sorted(name for name, value in fields.items() if getattr(task, name) != value)
    previous = {name: getattr(task, name) for name in changed if name != "spec"}
    for name, value in fields.items():
        setattr(task, name, value)
    task.spec_hash = digest
    task.revision += 1
    if dataset_version:
        task.dataset_version = dataset_version
    task.save()
    TaskRevision.objects.create(
        task=task,
        revision=task.revision,
        spec_hash=digest,
        changed_fields=changed,
        previous_values=previous,
        source_file=source_file,
        dataset_version=dataset_version,
    )
    return task, Upsert.UPDATED


def task_fields_from_spec(loaded: LoadedTask) -> dict[str, Any]:
    spec = loaded.spec
    return {
        "source": TaskSource.TASK_YAML,
        "spec": loaded.raw,
        "spec_path": str(loaded.path.resolve()),
        "repo_url": loaded.repo_url,
        "repo_commit": spec.repo.commit,
        # A Dockerfile environment's image is named when an attempt builds it.
        "docker_image": spec.environment.docker_image or "",
        "workdir": spec.environment.workdir,
        "timeout_sec": spec.environment.timeout_sec,
        "setup_commands": list(spec.setup.commands),
        "setup_network": spec.setup.network,
        "test_command": spec.run.command,
        "labels": list(spec.labels),
        "max_steps": spec.agent.max_steps,
        "harness_min_version": spec.harness_min_version or "",
        "problem_statement": spec.description,
        "gold_patch": loaded.reference_patch,
    }


def task_fields_from_harbor(task: harbor.HarborTask) -> dict[str, Any]:
    """A Harbor folder as Task columns: the verifier is the test command, the instruction the
    problem; the environment is built (or named) when an attempt starts."""
    return {
        "source": TaskSource.HARBOR,
        "spec": task.spec(),
        "spec_path": str(task.folder / harbor.CONFIG_NAME),
        "repo_url": "",
        "repo_commit": "",
        "docker_image": task.docker_image,
        "workdir": "",
        "timeout_sec": max(int(task.verifier_timeout_sec), 1),
        "setup_commands": [],
        "setup_network": task.allow_internet,
        "test_command": f"bash {harbor.TESTS_DIR}/test.sh",
        "labels": task.labels,
        "max_steps": None,
        "harness_min_version": "",
        "problem_statement": task.instruction,
        "gold_patch": "",
    }


def local_path_rules(target: Path | str) -> PathRules:
    """Where a local import's task files may point: the folder imported (or the task file's),
    the repository's tasks/ and examples/, AB_TASKS_DIR and TASK_PATH_ROOTS."""
    return PathRules.local(target, [settings.AB_TASKS_DIR, *settings.TASK_PATH_ROOTS])


def tasks_import(*, directory: Path | str, rules: PathRules | None = None) -> ImportReport:
    """Import every task.yaml and every Harbor task folder (``tasks_app.harbor``) under
    ``directory``. Validates all first; imports all or none.

    ``rules`` say where the files' paths may lead (``PathRules.upload`` for an upload); by
    default, those of a local import (``local_path_rules``). Raises ``TaskSpecError`` (naming
    each file and field) when any file is invalid or names a path outside them.
    """
    rules = rules or local_path_rules(directory)
    problems: list[SpecProblem] = []
    loaded: list[LoadedTask] = []
    harbor_tasks: list[harbor.HarborTask] = []
    for load in (
        lambda: loaded.extend(load_task_dir(directory, rules=rules)),
        lambda: harbor_tasks.extend(harbor.load_harbor_dir(directory, rules=rules)),
    ):
        try:
            load()
        except TaskSpecError as exc:
            problems.extend(exc.problems)
    if problems:
        raise TaskSpecError(problems)
    report = ImportReport()
    with transaction.atomic():
        suites: dict[str, Suite] = {}
        for task in loaded:
            name = task.spec.suite
            if name not in suites:
                suites[name], _ = Suite.objects.get_or_create(
                    name=name, defaults={"source": TaskSource.TASK_YAML}
                )
            _, outcome = task_upsert(
                suite=suites[name],
                task_id=task.spec.id,
                fields=task_fields_from_spec(task),
                source_file=str(task.path),
            )
            report.add(outcome, f"{name}/{task.spec.id}")
        for found in harbor_tasks:
            name = harbor.suite_name(
                found.folder, upload_root=Path(directory) if rules.uploaded else None
            )
            if name not in suites:
                suites[name], _ = Suite.objects.get_or_create(
                    name=name, defaults={"source": TaskSource.HARBOR}
                )
            _, outcome = task_upsert(
                suite=suites[name],
                task_id=found.task_id,
                fields=task_fields_from_harbor(found),
                source_file=str(found.folder),
            )
            report.add(outcome, f"{name}/{found.task_id}")
        report.suites = sorted(suites)
    return report
