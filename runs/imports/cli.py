"""``ab`` commands that import results produced elsewhere: import-predictions, import-results,
import-run (``ab import-swebench``, the dataset, is in ``tasks_app.cli.swebench_dataset``)."""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
from pathlib import Path

from benchsite.cli.main import CommandError
from tasks_app.cli.swebench_dataset import existing_file, nothing_imported
from tasks_app.swebench.errors import SwebenchInputError
from tasks_app.uploads.archives import ArchiveLimitError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "import-predictions",
        help="create a run evaluating predictions (instance_id, model_patch) on a suite",
    )
    p.add_argument("file", type=Path)
    p.add_argument("--suite", required=True)
    p.add_argument("--model", required=True, help="leaderboard name of the system")
    p.add_argument(
        "--run",
        action="store_true",
        help="evaluate now, one attempt after the other in this process",
    )
    p.add_argument(
        "--enqueue", action="store_true", help="send the attempts to the workers instead"
    )
    p.add_argument(
        "--wait",
        action="store_true",
        help="with --enqueue: wait until every attempt is done, then print the summary",
    )
    p.add_argument(
        "--worker",
        action="store_true",
        help="start a local worker for the duration of the command (implies --enqueue --wait)",
    )
    p.add_argument(
        "--concurrency",
        type=int,
        default=None,
        metavar="N",
        help="attempts the --worker runs at once (default: CELERY_WORKER_CONCURRENCY)",
    )
    p.add_argument("--poll", type=float, default=5.0, help="seconds between progress lines")
    p.set_defaults(handler=cmd_import_predictions)

    p = sub.add_parser(
        "import-results",
        help="import published results (a run report, report.json files, or a folder of them)",
    )
    p.add_argument("path", type=Path)
    p.add_argument("--suite", required=True)
    p.add_argument("--model", required=True, help="leaderboard name of the system")
    p.add_argument("--predictions", type=Path, default=None, help="add each instance's patch")
    p.add_argument(
        "--ignore-unknown",
        action="store_true",
        help="skip results for instances the suite does not hold (default: error)",
    )
    _shared_import_options(p)
    p.set_defaults(handler=cmd_import_results)

    p = sub.add_parser(
        "import-run",
        help="import a run folder: trajectories (mini-swe-agent, SWE-agent), reports, "
        "predictions, legacy reports, Inspect .eval logs",
    )
    p.add_argument(
        "path",
        type=Path,
        help="the run's folder (or one file of it), or a bundle (.tar.gz) of ab export-run",
    )
    p.add_argument("--suite", help="suite name; created from instances.jsonl (not for a bundle)")
    p.add_argument(
        "--model",
        help="leaderboard name of the system (a bundle: its configuration's name here, when "
        "the bundle's is taken by another)",
    )
    p.add_argument("--dry-run", action="store_true", help="print the plan, store nothing")
    _shared_import_options(p)
    p.set_defaults(handler=cmd_import_run)


def _shared_import_options(p: argparse.ArgumentParser) -> None:
    """import-run and import-results are one import: the same rules, the same options."""
    p.add_argument(
        "--skip-bad",
        action="store_true",
        help="leave bad files (and files of no known format) out and list them (default: error)",
    )
    p.add_argument(
        "--date",
        type=_date,
        default=None,
        help="when the run ran (YYYY-MM-DD or an ISO time), used when the folder's metadata "
        "says nothing; without either the run is shown as of unknown date",
    )


def _date(value: str) -> dt.datetime:
    try:
        when = dt.datetime.fromisoformat(value.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a date as YYYY-MM-DD or an ISO time, got {value!r}"
        ) from None
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


def cmd_import_predictions(args: argparse.Namespace) -> int:
    from benchsite.accounts.models import Door
    from runs.imports.actions import predictions_import
    from runs.imports.predictions import predictions_execute_inline

    enqueue = args.enqueue or args.worker
    if args.run and enqueue:
        raise CommandError("choose --run (inline) or --enqueue (workers), not both")
    if args.wait and not enqueue:
        raise CommandError("--wait goes with --enqueue (--run waits anyway)")
    try:
        report = predictions_import(
            actor=None,
            door=Door.CLI,
            source=existing_file(args.file),
            suite_name=args.suite,
            model_name=args.model,
            enqueue=enqueue,
            evaluate_inline=args.run,
        )
    except SwebenchInputError as exc:
        raise nothing_imported(exc) from exc
    for name in report.empty_patch:
        print(f"empty patch    {name}")
    for name in report.no_prediction:
        print(f"no prediction  {name}")
    print(report.summary())
    if args.run and report.attempt_ids:

        def progress(index: int, total: int, attempt) -> None:
            outcome = "resolved" if attempt.resolved else (attempt.failure_reason_id or "?")
            print(
                f"[{index}/{total}] {attempt.task.task_id}: {outcome}"
                + (f" (grade {attempt.grade})" if attempt.grade else ""),
                flush=True,
            )

        done = predictions_execute_inline(report.attempt_ids, progress=progress)
        resolved = sum(1 for a in done if a.resolved)
        print(f"evaluated {len(done)}: {resolved} resolved")
    elif enqueue and (args.wait or args.worker) and report.queued:
        _wait_for_workers(args, report)
    else:
        return 0
    from runs.cli.runs import summary_table
    from runs.models import Run

    print(summary_table(Run.objects.get(public_id=report.run_id)))
    return 0


def _wait_for_workers(args: argparse.Namespace, report) -> None:
    from benchsite.processes import Supervisor
    from runs.cli.pipeline import wait_for_attempts
    from runs.cli.worker import LocalWorker
    from runs.models import Attempt

    ids = list(Attempt.objects.filter(run__public_id=report.run_id).values_list("id", flat=True))
    worker = None
    if args.worker:
        worker = LocalWorker(Supervisor(), concurrency=args.concurrency)
    try:
        wait_for_attempts(ids, poll=args.poll)
    finally:
        if worker is not None:
            worker.shutdown()


def cmd_import_results(args: argparse.Namespace) -> int:
    from benchsite.accounts.models import Door
    from runs.imports.actions import results_import

    started = time.perf_counter()
    try:
        report = results_import(
            actor=None,
            door=Door.CLI,
            source=existing_file(args.path),
            suite_name=args.suite,
            model_name=args.model,
            predictions=existing_file(args.predictions) if args.predictions else None,
            ignore_unknown=args.ignore_unknown,
            skip_bad=args.skip_bad,
            date=args.date,
        )
    except SwebenchInputError as exc:
        raise nothing_imported(exc, SKIP_BAD_HINT) from exc
    except ArchiveLimitError as exc:  # a zip over the API_ARCHIVE_* caps
        raise CommandError(f"nothing imported: {args.path}: {exc}") from exc
    print("\n".join(report.plan))
    for name in report.ignored_unknown:
        print(f"ignored (not in suite)  {name}")
    for line in report.skipped_files:
        print(f"skipped  {line}")
    print(f"{report.summary()} in {time.perf_counter() - started:.2f}s")
    return 0


SKIP_BAD_HINT = ", or pass --skip-bad to leave those files out"


class ProgressBar:
    """A one-line progress bar on stderr (a terminal), or one line per stage otherwise."""

    WIDTH = 30

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()

    def __call__(self, stage: str, done: int, total: int) -> None:
        if self.tty:
            filled = self.WIDTH * done // max(total, 1)
            bar = "#" * filled + "." * (self.WIDTH - filled)
            end = "\n" if done == total else ""
            self.stream.write(f"\r{stage:<8} [{bar}] {done}/{total}{end}")
            self.stream.flush()
        elif done == total:
            self.stream.write(f"{stage}: {total} file(s)\n")


def cmd_import_run(args: argparse.Namespace) -> int:
    from benchsite.accounts.models import Door
    from runs.bundles.cli import import_bundle_file, is_bundle
    from runs.imports.actions import run_folder_import

    if is_bundle(args.path):
        if args.suite or args.dry_run:
            raise CommandError("a bundle names its suite: drop --suite (and --dry-run)")
        return import_bundle_file(args.path, model_name=args.model or "")
    if not (args.suite and args.model):
        raise CommandError("a run folder needs --suite and --model")
    started = time.perf_counter()
    try:
        report = run_folder_import(
            actor=None,
            door=Door.CLI,
            path=existing_file(args.path),
            suite_name=args.suite,
            model_name=args.model,
            dry_run=args.dry_run,
            skip_bad=args.skip_bad,
            date=args.date,
            progress=ProgressBar(),
            on_plan=lambda lines: print("\n".join(lines), flush=True),
        )
    except SwebenchInputError as exc:
        raise nothing_imported(exc, SKIP_BAD_HINT) from exc
    if args.dry_run:
        # The suite's part of the plan comes after the folder's.
        print("\n".join(line for line in report.plan if line.startswith("  suite ")))
    for line in report.skipped:
        print(f"skipped  {line}")
    print(f"{report.summary()} in {time.perf_counter() - started:.2f}s")
    return 0
