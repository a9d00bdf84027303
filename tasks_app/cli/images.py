"""``ab pull-images``: pull the images the tasks of a suite name (``environment.docker_image``)
with progress on the terminal, and record on each task what was pulled (tasks_app/images.py).
A failure is one line naming its reason (not found, unauthorized, wrong architecture, over the
disk budget, ...), never a traceback; the command exits 1 when any pull failed."""

from __future__ import annotations

import argparse
import sys
import time

from benchsite.cli.main import CommandError

# A line of progress at most this often when stdout is not a terminal.
LINE_EVERY_SEC = 5.0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "pull-images",
        help="pull the images a suite's tasks name (progress, retries, mirrors, disk budget)",
    )
    p.add_argument("suite")
    p.add_argument("--task", action="append", default=[], help="only this task id (repeatable)")
    p.set_defaults(handler=cmd_pull_images)


def cmd_pull_images(args: argparse.Namespace) -> int:
    from django.conf import settings

    from sandbox.environments.image_trees import ImageTreeError
    from sandbox.environments.registry import PullError
    from tasks_app.images import task_image_pull
    from tasks_app.models import Suite, Task

    suite = Suite.objects.filter(name=args.suite).first()
    if suite is None:
        raise CommandError(f"no suite {args.suite!r} (import its tasks first)")
    named = Task.objects.filter(suite=suite).exclude(docker_image="")
    named = named.exclude(docker_image=settings.SANDBOX_IMAGE).exclude(source="swebench")
    if args.task:
        named = named.filter(task_id__in=args.task)
    tasks = list(named.order_by("task_id"))
    if not tasks:
        print(f"{args.suite}: no task names an image of its own")
        return 0
    from sandbox.environments import oci_trees

    # No engine (or IMAGE_TREES_FROM=registry): bubblewrap's trees, straight from the registry.
    try:
        fetch = oci_trees.pull_tree if oci_trees.from_registry_wanted() else None
    except ValueError as exc:
        raise CommandError(str(exc)) from exc
    failed = 0
    for task in tasks:
        show = _Progress(task.task_id)
        try:
            pulled = task_image_pull(task=task, progress=show, fetch=fetch)
        except (PullError, ImageTreeError) as exc:
            show.end()
            print(f"{task.task_id}: {task.docker_image}: {exc}", file=sys.stderr)
            failed += 1
            continue
        show.end()
        how = (
            f"pulled from {pulled.source} in {pulled.seconds:.1f} s"
            if pulled.seconds or pulled.layers
            else ("already on the engine" if fetch is None else "its tree already made")
        )
        print(
            f"{task.task_id}: {task.docker_image} -> {pulled.repo_digest or pulled.image_id} "
            f"({how})"
        )
    return 1 if failed else 0


class _Progress:
    """One line per pull, rewritten in place on a terminal, else every LINE_EVERY_SEC."""

    def __init__(self, label: str):
        self.label = label
        self.tty = sys.stdout.isatty()
        self.last = 0.0
        self.shown = False

    def __call__(self, state) -> None:
        now = time.monotonic()
        if self.tty:
            sys.stdout.write(f"\r\033[K{self.label}: {state.line()}")
            sys.stdout.flush()
            self.shown = True
        elif now - self.last >= LINE_EVERY_SEC or state.status.startswith("retrying"):
            self.last = now
            print(f"{self.label}: {state.line()}", flush=True)

    def end(self) -> None:
        if self.tty and self.shown:
            sys.stdout.write("\r\033[K")
