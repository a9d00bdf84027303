"""``ab build-environments``: build the Dockerfile environments of a suite's Harbor tasks.

Each line says whether the image was found built (a no-op) or built, in how long, and where
its build log is; a failure prints its named reason and the log's tail, and the command exits
1. Attempts build what is missing themselves: this is for doing it ahead of a run.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from benchsite.cli.main import CommandError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "build-environments",
        help="build (or find built) the Dockerfile environments of a suite's Harbor tasks",
    )
    p.add_argument("suite")
    p.add_argument(
        "--task", action="append", default=None, metavar="ID", help="only this task (repeatable)"
    )
    p.set_defaults(handler=cmd_build_environments)


def cmd_build_environments(args: argparse.Namespace) -> int:
    from sandbox.environments import dockerfile, eviction, harbor_image
    from tasks_app.harbor import DEFAULT_TIMEOUT_SEC
    from tasks_app.models import Task, TaskSource

    found = Task.objects.filter(suite__name=args.suite, source=TaskSource.HARBOR)
    if args.task:
        found = found.filter(task_id__in=args.task)
    tasks = list(found.order_by("task_id"))
    if not tasks:
        raise CommandError(f"no Harbor task in suite {args.suite!r} (ab import-tasks DIR)")
    try:
        budget = eviction.max_bytes_from_env()
    except eviction.BudgetError as exc:
        raise CommandError(str(exc)) from exc
    failed = 0
    for task in tasks:
        spec = task.spec
        timeout = float(spec.get("build_timeout_sec") or DEFAULT_TIMEOUT_SEC)
        try:
            image = harbor_image.build(
                Path(spec["folder"]),
                docker_image=spec.get("docker_image") or "",
                timeout_sec=timeout,
                max_bytes=budget,
            )
        except dockerfile.DockerfileBuildError as exc:
            failed += 1
            print(f"{task.task_id}: {exc}", flush=True)
            continue
        what = "found built" if image.reused else f"built in {image.build_seconds:.1f}s"
        print(
            f"{task.task_id}: {what}: {image.tag} ({eviction.human(image.bytes)}); "
            f"log: {image.log_path}",
            flush=True,
        )
    print(f"{len(tasks) - failed} ready, {failed} failed of {len(tasks)} task(s)")
    return 1 if failed else 0
