"""``ab import-swebench``: import (or update) a SWE-bench dataset file as a suite. The imports of
results produced elsewhere (import-predictions, import-results, import-run) are in
``runs.imports.cli``."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from benchsite.cli.main import CommandError
from tasks_app.swebench.errors import SwebenchInputError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "import-swebench",
        help="import (or update) a SWE-bench dataset file (.jsonl, .json list, .parquet)",
    )
    p.add_argument("file", type=Path)
    p.add_argument("--suite", required=True, help="suite name, e.g. swebench-lite")
    p.add_argument("--dataset-version", default="", help="recorded with each task revision")
    p.add_argument(
        "--image-template",
        default="",
        help="instance image name, e.g. 'registry/sweb.eval.{key}:v1' "
        "(placeholders {key} {instance_id} {repo} {version})",
    )
    p.add_argument(
        "--dockerfiles",
        type=Path,
        default=None,
        help="a folder holding <instance_id>/Dockerfile and <instance_id>/eval.sh for each "
        "instance: each task builds its own image and runs its own eval script",
    )
    p.set_defaults(handler=cmd_import_swebench)


def nothing_imported(exc: SwebenchInputError, hint: str = "") -> CommandError:
    """Every problem on its own line, then one error: nothing was stored."""
    for line in exc.lines():
        print(line)
    return CommandError(f"nothing imported: fix the errors above{hint}")


def existing_file(path: Path) -> Path:
    if not path.exists():
        raise CommandError(f"no such file: {path}")
    return path


def cmd_import_swebench(args: argparse.Namespace) -> int:
    from benchsite.accounts.models import Door
    from tasks_app.actions import swebench_import

    started = time.perf_counter()
    try:
        report = swebench_import(
            actor=None,
            door=Door.CLI,
            source=existing_file(args.file),
            suite_name=args.suite,
            dataset_version=args.dataset_version,
            image_template=args.image_template,
            dockerfiles=args.dockerfiles,
        )
    except SwebenchInputError as exc:
        raise nothing_imported(exc) from exc
    for name in report.created:
        print(f"created   {name}")
    for name in report.updated:
        print(f"updated   {name}")
    print(f"suite {args.suite}: {report.summary()} in {time.perf_counter() - started:.2f}s")
    return 0
