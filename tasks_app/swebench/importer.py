"""Importing a SWE-bench dataset file as a suite of tasks (one task per instance).

Same contract as ``tasks_app.services.task_upsert`` (same hash of the Task column values,
revision bumped and a ``TaskRevision`` recorded for each change, unchanged rows untouched), but
in bulk: one query fetches the suite's tasks, then one ``bulk_create`` / ``bulk_update`` each,
so a 500-instance file imports in well under the 3 s target.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import validate_slug
from django.db import transaction
from django.utils import timezone

from tasks_app.models import Suite, Task, TaskRevision, TaskSource
from tasks_app.services import ImportReport, fields_hash
from tasks_app.swebench.dataset import read_records
from tasks_app.swebench.errors import Problem, SwebenchInputError
from tasks_app.swebench.fields import Instance, check_instances


@dataclass(frozen=True, slots=True)
class _Planned:
    instance: Instance
    fields: dict[str, Any]
    digest: str
    # (Python asked, Python used): stored on the task, outside ``fields`` and their hash, so
    # that tasks imported before these columns existed do not all count as changed.
    python: tuple[str, str] = ("", "")


def load_instances(
    source: Path | bytes | str, filename: str = "", *, dockerfiles: Path | None = None
) -> list[Instance]:
    """Read and check every row of a dataset file; raise ``SwebenchInputError`` on any problem.

    ``dockerfiles``: the folder of per-instance build contexts and eval scripts
    (``task_folders``); without it a row may not name one."""
    from tasks_app.swebench import task_folders

    if not filename and not isinstance(source, bytes):
        filename = Path(source).name
    records = read_records(source, filename)
    if dockerfiles is None:
        problems = task_folders.refuse_reserved(records)
    else:
        problems = task_folders.attach(records, dockerfiles)
    if problems:
        raise SwebenchInputError(problems, filename)
    instances, problems = check_instances(records)
    if problems:
        raise SwebenchInputError(problems, filename)
    return instances


def swebench_import(
    *,
    source: Path | bytes | str,
    filename: str = "",
    suite_name: str,
    dataset_version: str = "",
    image_template: str = "",
    description: str = "",
    dockerfiles: Path | None = None,
) -> ImportReport:
    """Import (or update) every instance of a SWE-bench file into suite ``suite_name``.

    ``source`` is a path or the file's bytes (an upload); ``filename`` names it in errors and
    picks the format (.jsonl, .json list, .parquet). Everything is checked first; then one
    transaction writes it all, or nothing. Raises ``SwebenchInputError`` (line and field).
    ``dockerfiles``: a folder with each instance's Dockerfile and eval.sh (``task_folders``).
    """
    if not filename and not isinstance(source, bytes):
        filename = Path(source).name
    _check_suite_name(suite_name, filename)
    instances = load_instances(source, filename, dockerfiles=dockerfiles)
    try:
        planned = [_plan(instance, image_template=image_template) for instance in instances]
    except ValueError as exc:  # a bad image template
        raise SwebenchInputError([Problem("image_template", str(exc))], filename) from exc

    report = ImportReport(suites=[suite_name])
    with transaction.atomic():
        suite, created = Suite.objects.get_or_create(
            name=suite_name,
            defaults={"source": TaskSource.SWEBENCH, "description": description},
        )
        if not created and suite.source != TaskSource.SWEBENCH:
            raise SwebenchInputError(
                [Problem("suite", f"{suite_name!r} holds task.yaml tasks, not SWE-bench ones")],
                filename,
            )
        if description and suite.description != description:
            suite.description = description
            suite.save(update_fields=["description", "updated_at"])
        existing = {task.task_id: task for task in Task.objects.filter(suite=suite)}
        _write(suite, planned, existing, report, filename, dataset_version)
    return report


def _check_suite_name(name: str, filename: str) -> None:
    try:
        validate_slug(name)
    except ValidationError as exc:
        raise SwebenchInputError(
            [Problem("suite", f"{name!r} is not a valid suite name (letters, digits, - and _)")],
            filename,
        ) from exc


def _plan(instance: Instance, *, image_template: str) -> _Planned:
    fields = instance.task_fields(image_template=image_template)
    return _Planned(instance, fields, fields_hash(fields), instance.pythons())


def _write(
    suite: Suite,
    planned: list[_Planned],
    existing: dict[str, Task],
    report: ImportReport,
    filename: str,
    dataset_version: str,
) -> None:
    new_tasks: list[Task] = []
    changed: list[tuple[Task, list[str], dict[str, Any]]] = []
    refreshed: list[Task] = []  # unchanged tasks whose stored Pythons differ
    for plan in planned:
        task_id = plan.instance.instance_id
        task = existing.get(task_id)
        if task is None:
            task = Task(
                suite=suite,
                task_id=task_id,
                spec_hash=plan.digest,
                spec_path=filename,
                dataset_version=dataset_version,
                **plan.fields,
            )
            task.python_asked, task.python_used = plan.python
            task.labels_text = _labels_text(task.labels)
            new_tasks.append(task)
            report.created.append(task_id)
            continue
        if task.spec_hash == plan.digest:
            report.unchanged.append(task_id)
            if (task.python_asked, task.python_used) != plan.python:
                task.python_asked, task.python_used = plan.python
                refreshed.append(task)
            continue
        names = sorted(n for n, v in plan.fields.items() if getattr(task, n) != v)
        previous = {n: getattr(task, n) for n in names if n != "spec"}
        for name, value in plan.fields.items():
            setattr(task, name, value)
        task.python_asked, task.python_used = plan.python
        task.labels_text = _labels_text(task.labels)
        task.spec_hash = plan.digest
        task.spec_path = filename
        task.revision += 1
        if dataset_version:
            task.dataset_version = dataset_version
        changed.append((task, names, previous))
        report.updated.append(task_id)

    Task.objects.bulk_create(new_tasks, batch_size=200)
    if any(task.pk is None for task in new_tasks):
        # A database that cannot return ids from a bulk insert: fetch them.
        ids = dict(
            Task.objects.filter(
                suite=suite, task_id__in=[t.task_id for t in new_tasks]
            ).values_list("task_id", "pk")
        )
        for task in new_tasks:
            task.pk = ids[task.task_id]
    if changed:
        columns = sorted(
            {
                *planned[0].fields,
                "labels_text",
                "spec_hash",
                "spec_path",
                "revision",
                "dataset_version",
                "updated_at",
                "python_asked",
                "python_used",
            }
        )
        now = timezone.now()
        for task, _, _ in changed:
            task.updated_at = now
        Task.objects.bulk_update([t for t, _, _ in changed], columns, batch_size=200)
    if refreshed:
        Task.objects.bulk_update(refreshed, ["python_asked", "python_used"], batch_size=200)
    revisions = [
        TaskRevision(
            task=task,
            revision=1,
            spec_hash=task.spec_hash,
            changed_fields=[],
            source_file=filename,
            dataset_version=dataset_version,
        )
        for task in new_tasks
    ]
    revisions += [
        TaskRevision(
            task=task,
            revision=task.revision,
            spec_hash=task.spec_hash,
            changed_fields=names,
            previous_values=previous,
            source_file=filename,
            dataset_version=dataset_version,
        )
        for task, names, previous in changed
    ]
    TaskRevision.objects.bulk_create(revisions, batch_size=500)


def _labels_text(labels: list[str]) -> str:
    # Task.save() keeps this in step; bulk writes skip save(), so we do the same here.
    return "," + ",".join(labels) + "," if labels else ""
