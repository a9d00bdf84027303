"""``ab swebench build``: build SWE-bench instances offline (see sandbox/environments/build.py).

Also the pieces ``ab validate-suite --variant oracle`` shares: the repositories folder, the
backend and a builder with a progress bar.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from django.conf import settings

from benchsite.cli.main import CommandError

BUILD_BACKENDS = ("auto", "docker", "bwrap")
# Task.image_source of an instance built here (``--source offline``, or ``auto``'s fallback).
OFFLINE_SOURCE = "offline build"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "swebench",
        help="SWE-bench instances offline: build their environments, the cache's disk use "
        "(du, prune)",
    )
    inner = p.add_subparsers(dest="swebench_command", metavar="SUBCOMMAND", required=True)
    b = inner.add_parser(
        "build",
        help="build the base, env and instance levels of a suite's instances (what is missing)",
    )
    b.add_argument("suite", help="an imported SWE-bench suite (ab import-swebench)")
    instance_args(b)
    b.add_argument(
        "--backend",
        choices=BUILD_BACKENDS,
        default=None,
        help="docker: the rootfs trees and the Docker images; bwrap: the trees only "
        "(default: SANDBOX_BACKEND; auto = docker when its engine answers)",
    )
    jobs_arg(b)
    from tasks_app.cli.swebench_images import source_args

    source_args(b)
    b.set_defaults(handler=cmd_build)

    from tasks_app.cli.swebench_cache import register_cache

    register_cache(inner)


def jobs_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--jobs",
        type=int,
        default=os.cpu_count() or 1,
        metavar="N",
        help="levels built at once (default: the cores, %(default)s); an env level several "
        "instances share is built once while they wait for it",
    )


def instance_args(p: argparse.ArgumentParser) -> None:
    """--instance, --repos and --backend, shared with validate-suite --variant oracle."""
    p.add_argument(
        "--instance",
        action="append",
        default=None,
        metavar="ID",
        help="only this instance (repeatable; default: every instance of the suite)",
    )
    p.add_argument(
        "--repos",
        type=Path,
        default=None,
        metavar="DIR",
        help="folder of <owner>__<name>.git.tar.gz archives or .git bare repositories "
        "(default: SWEBENCH_REPOS); a repository it lacks is fetched by commit from "
        "SWEBENCH_GIT_BASE",
    )


def resolve_backend(name: str | None) -> str:
    """docker or bwrap: ``auto``/None is Docker when its engine answers, else bubblewrap."""
    from sandbox.environments.docker_images import engine_available

    name = name or settings.SANDBOX_BACKEND
    if name == "auto":
        return "docker" if engine_available() else "bwrap"
    if name == "docker" and not engine_available():
        raise CommandError("the Docker engine does not answer (choose --backend bwrap)")
    return name


def make_builder(args: argparse.Namespace, backend: str):
    from sandbox.environments.build import Builder
    from sandbox.environments.eviction import BudgetError, max_bytes_from_env
    from sandbox.environments.repo_fetch import NetworkRepoSource
    from sandbox.environments.repos import RepoSource

    folder = args.repos or settings.SWEBENCH_REPOS
    base = settings.SWEBENCH_GIT_BASE.strip()
    fetching = base.lower() != "off"
    if not folder and not fetching:
        raise CommandError(
            "no repositories folder: set SWEBENCH_REPOS or pass --repos DIR "
            "(SWEBENCH_GIT_BASE=off: repositories are never fetched)"
        )
    if folder and not Path(folder).is_dir():
        raise CommandError(f"no such repositories folder: {folder}")
    try:
        budget = max_bytes_from_env()
    except BudgetError as exc:
        raise CommandError(str(exc)) from exc
    # A repository the folder lacks is fetched by commit from SWEBENCH_GIT_BASE.
    source = NetworkRepoSource(folder or None, base=base) if fetching else RepoSource(folder)
    return Builder(
        source,
        docker=backend == "docker",
        log=_Progress.note,
        max_bytes=budget,
        report=lambda line: print(f"cache: {line}", flush=True),
    )


class _Progress:
    """A one-line progress bar on stderr when it is a terminal (lines on stdout either way)."""

    current = ""
    WIDTH = 24

    @classmethod
    def note(cls, text: str) -> None:
        if sys.stderr.isatty():
            sys.stderr.write(f"\r\033[K{cls.current} {text}"[:400])
            sys.stderr.flush()

    @classmethod
    def levels(cls, progress) -> None:
        """The bar over levels: done / all, then what runs and the time left."""
        total = len(progress.done) + len(progress.running) + len(progress.left)
        filled = int(cls.WIDTH * len(progress.done) / max(total, 1))
        cls.current = f"[{'#' * filled}{'.' * (cls.WIDTH - filled)}] {progress.line()}"
        cls.note("")

    @classmethod
    def clear(cls) -> None:
        if sys.stderr.isatty():
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def build_line(index: int, total: int, outcome) -> str:
    line = f"[{index}/{total}] {outcome.line()}"
    if outcome.built and outcome.status == "built":
        times = ", ".join(f"{k} {v:.0f}s" for k, v in outcome.built.seconds.items() if v)
        line += f" ({times})" if times else ""
    if outcome.waited:
        waits = ", ".join(f"{k} {v:.0f}s" for k, v in outcome.waited.items())
        line += f" (waited for another build of: {waits})"
    return line


def record_offline(tasks: list, instance_ids: list[str]) -> None:
    """Keep on the tasks that they run on their offline build (not a registry's image)."""
    from tasks_app.models import Task

    ids = [t.pk for t in tasks if t.task_id in set(instance_ids)]
    Task.objects.filter(pk__in=ids).update(
        image_source=OFFLINE_SOURCE, image_digest="", image_pulled_at=None
    )


def cmd_build(args: argparse.Namespace) -> int:
    from tasks_app.swebench.own_dockerfile import own_dockerfile
    from tasks_app.swebench.suites import NotSwebenchSuite, swebench_suite_tasks

    if args.jobs < 1:
        raise CommandError(f"--jobs must be at least 1, got {args.jobs}")
    backend = resolve_backend(args.backend)
    try:
        tasks = swebench_suite_tasks(args.suite, args.instance)
    except NotSwebenchSuite as exc:
        raise CommandError(str(exc)) from exc
    # Instances with their own Dockerfile (import-swebench --dockerfiles) are built from it,
    # whatever --source says: the dataset names no other environment for them.
    own = [t for t in tasks if own_dockerfile(t) is not None]
    failed = build_own_dockerfiles(own) if own else 0
    rest = [t for t in tasks if own_dockerfile(t) is None]
    if not rest:
        return 1 if failed else 0
    return max(_build_the_rest(args, backend, rest), 1 if failed else 0)


def build_own_dockerfiles(tasks: list) -> int:
    """Build (or find built) each instance's own Dockerfile image with the engine, which
    both backends need for it (bubblewrap runs the image's tree); the failures' count."""
    from sandbox.environments.docker_images import engine_available
    from tasks_app.swebench.own_dockerfile import build_instance

    if not engine_available():
        for task in tasks:
            print(f"{task.task_id}: failed: its own Dockerfile needs the Docker engine to build")
        return len(tasks)
    failed = 0
    for index, task in enumerate(tasks, start=1):
        outcome, _ = build_instance(task)
        failed += outcome.status not in ("built", "cached")
        print(f"[{index}/{len(tasks)}] {outcome.line()}", flush=True)
        if outcome.log_tail:
            print("    " + outcome.log_tail.replace("\n", "\n    "), flush=True)
    print(f"{len(tasks) - failed} of {len(tasks)} instance(s) with their own Dockerfile ready")
    return failed


def _build_the_rest(args: argparse.Namespace, backend: str, tasks: list) -> int:
    """The instances built offline or pulled (``--source``)."""
    from sandbox.environments.parallel import build_all

    started = time.monotonic()
    counts: dict[str, int] = {}
    source = getattr(args, "source", "offline")
    if source != "offline":
        from tasks_app.cli.swebench_images import pull_official

        pulled, failed = pull_official(args, tasks, backend)
        counts["image"] = len(pulled)
        if source == "image" or not failed:
            if failed:
                counts["not pulled"] = len(failed)
            summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()) if n)
            print(
                f"{len(tasks)} instance(s) for {backend}: {summary} "
                f"in {time.monotonic() - started:.0f}s"
            )
            return 1 if failed else 0
        print(f"auto: building {len(failed)} instance(s) offline", flush=True)
        tasks = [task for task, _ in failed]
    builder = make_builder(args, backend)

    def outcome_line(index: int, outcome) -> None:
        from sandbox.environments.official_images import drop_official

        _Progress.clear()
        if outcome.ok:  # the last build says what the instance runs on
            drop_official(outcome.instance_id)
            offline.append(outcome.instance_id)
        counts[outcome.status] = counts.get(outcome.status, 0) + 1
        print(build_line(index, len(tasks), outcome), flush=True)
        if outcome.log_tail:
            print("    " + outcome.log_tail.replace("\n", "\n    "), flush=True)

    last: list[str] = []
    offline: list[str] = []  # built: recorded on their tasks here (builds run in threads)

    def on_progress(progress) -> None:
        _Progress.levels(progress)
        last[:] = [progress.line()]

    try:
        build_all(
            builder,
            [t.spec for t in tasks],
            jobs=args.jobs,
            on_outcome=outcome_line,
            on_progress=on_progress,
        )
    finally:
        builder.close()  # the dated index it served
        record_offline(tasks, offline)
    _Progress.clear()
    summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    print(f"{len(tasks)} instance(s) for {backend}: {summary} in {time.monotonic() - started:.0f}s")
    print("".join(last))
    unbuilt = sum(n for status, n in counts.items() if status not in ("built", "cached"))
    return 1 if unbuilt else 0
