"""``ab`` commands for task specs: list-tasks, check-tasks, import-tasks."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from django.conf import settings

from benchsite.cli.main import CommandError
from tasks_app.spec import (
    PathRules,
    TaskSpecError,
    find_task_files,
    load_task_dir,
    load_task_file,
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("list-tasks", help="list the task ids of a suite in a tasks folder")
    p.add_argument("suite")
    p.add_argument("--tasks", type=Path, default=None, help="tasks folder (default: tasks/)")
    p.set_defaults(handler=cmd_list_tasks)

    p = sub.add_parser(
        "check-tasks",
        help="validate task.yaml files and Harbor task folders; exit 1 with one line each",
    )
    p.add_argument("directory", type=Path)
    p.set_defaults(handler=cmd_check_tasks)

    p = sub.add_parser(
        "import-tasks",
        help="import (or update) every task.yaml and Harbor task folder under a folder",
    )
    p.add_argument("directory", type=Path)
    p.set_defaults(handler=cmd_import_tasks)


def cmd_list_tasks(args: argparse.Namespace) -> int:
    directory = args.tasks or settings.AB_TASKS_DIR
    if not Path(directory).exists():
        raise CommandError(f"no such tasks folder: {directory}")
    found = 0
    broken = 0
    rules = _local_rules(directory)
    for path in find_task_files(directory):
        try:
            task = load_task_file(path, rules=rules)
        except TaskSpecError as exc:
            broken += 1
            for problem in exc.problems:
                print(f"warning: {problem}", file=sys.stderr)
            continue
        if task.spec.suite != args.suite:
            continue
        found += 1
        labels = f"  [{', '.join(task.spec.labels)}]" if task.spec.labels else ""
        print(f"{task.spec.id}{labels}")
    if found == 0:
        raise CommandError(f"no tasks in suite {args.suite!r} under {directory}")
    return 1 if broken else 0


def cmd_check_tasks(args: argparse.Namespace) -> int:
    from tasks_app import harbor

    rules = _local_rules(args.directory)
    problems = []
    counts = []
    for load, what in ((load_task_dir, "task file(s)"), (harbor.load_harbor_dir, "Harbor task(s)")):
        try:
            counts.append(f"{len(load(args.directory, rules=rules))} {what}")
        except TaskSpecError as exc:
            problems.extend(exc.problems)
    for problem in problems:
        print(problem)
    if problems:
        return 1
    print(", ".join(counts) + " OK")
    return 0


def cmd_import_tasks(args: argparse.Namespace) -> int:
    try:
        # Imported here: the services need Django's models, which list-tasks/check-tasks skip.
        from benchsite.accounts.models import Door
        from tasks_app.actions import tasks_import

        report = tasks_import(directory=args.directory, actor=None, door=Door.CLI)
    except TaskSpecError as exc:
        for problem in exc.problems:
            print(problem)
        raise CommandError("nothing imported: fix the errors above") from exc
    for name in report.created:
        print(f"created   {name}")
    for name in report.updated:
        print(f"updated   {name}")
    print(report.summary())
    return 0


def _local_rules(directory: Path) -> PathRules:
    # As tasks_app.services.local_path_rules, which these commands cannot import (no models).
    return PathRules.local(directory, [settings.AB_TASKS_DIR, *settings.TASK_PATH_ROOTS])
