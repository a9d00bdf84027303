"""``ab export-run``: a run as a reproducibility bundle or in the SWE-bench experiments layout;
and the bundle half of ``ab import-run`` (``runs.imports.cli`` hands a .tar.gz here)."""

from __future__ import annotations

import argparse
from pathlib import Path

from benchsite.cli.main import CommandError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export-run",
        help="export a run: a reproducibility bundle (.tar.gz) or the SWE-bench experiments layout",
    )
    p.add_argument("run_id", help="the run's id (or its first 8+ characters)")
    p.add_argument(
        "--format",
        choices=("bundle", "swebench"),
        default="bundle",
        help="bundle: any suite, importable with ab import-run; swebench: all_preds.jsonl, "
        "logs/, trajs/, metadata.yaml (a folder, or a .tar.gz when --out ends so)",
    )
    p.add_argument("--out", type=Path, required=True, help="the file (bundle) or folder to write")
    p.set_defaults(handler=cmd_export_run)


def cmd_export_run(args: argparse.Namespace) -> int:
    from runs.bundles.bundle import ExportRefused, run_bundle_export
    from runs.bundles.scrub import BundleSecretError
    from runs.bundles.swebench import NotSwebench, run_swebench_export
    from runs.cli.runs import run_by_ref

    run = run_by_ref(args.run_id)
    if args.out.exists():
        raise CommandError(f"{args.out} exists: name a new file or folder")
    try:
        if args.format == "swebench":
            report = run_swebench_export(run=run, path=args.out)
        else:
            report = run_bundle_export(run=run, path=args.out)  # type: ignore[assignment]
    except (NotSwebench, BundleSecretError, ExportRefused) as exc:
        raise CommandError(f"nothing exported: {exc}") from exc
    print(report.summary())
    return 0


def is_bundle(path: Path) -> bool:
    """What ``ab import-run`` reads as a bundle: a .tar.gz or .tgz file."""
    return path.is_file() and path.name.endswith((".tar.gz", ".tgz"))


def import_bundle_file(path: Path, model_name: str = "") -> int:
    from benchsite.accounts.models import Door
    from runs.bundles.actions import bundle_import
    from runs.bundles.manifest import BundleError

    try:
        with path.open("rb") as source:
            report = bundle_import(
                source=source,
                source_name=path.name,
                model_name=model_name,
                actor=None,
                door=Door.CLI,
            )
    except BundleError as exc:
        raise CommandError(f"nothing imported: {path}: {exc}") from exc
    for note in report.notes:
        print(f"note  {note}")
    for line in report.environments:
        print(f"environment  {line}")
    print(report.summary())
    return 0
