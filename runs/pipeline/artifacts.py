"""Where an attempt's files go, under fixed names, relative to ``settings.ARTIFACTS_ROOT``.

Layout (see README, "Running tasks")::

    <ARTIFACTS_ROOT>/<run folder>/run.json              the run's summary (suite validation)
    <ARTIFACTS_ROOT>/<run folder>/<task>__<k>/run.json  one attempt's versioned record
                                            logs/git_clone.txt, logs/setup.txt, ...
                                            final.patch
                                            eval.sh           (SWE-bench: the final tests)
                                            workspace/        (removed unless kept)
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils import timezone

from runs.models import Attempt, Run
from runs.pipeline.stages import StageResult

RUN_JSON = "run.json"
FINAL_PATCH = "final.patch"
# A SWE-bench attempt's final tests: the eval script it ran (its output is logs/final_test.txt).
EVAL_SCRIPT = "eval.sh"
WORKSPACE_DIR = "workspace"
LOG_NAMES: dict[str, str] = {
    "git_clone": "logs/git_clone.txt",
    "git_checkout": "logs/git_checkout.txt",
    "export_testbed": "logs/export_testbed.txt",
    "setup": "logs/setup.txt",
    "baseline_run": "logs/baseline.txt",
    "baseline_rerun": "logs/baseline_rerun.txt",
    "agent_run": "logs/agent.txt",
    # Attempts before the eval script applied the test patch in a stage of its own.
    "apply_test_patch": "logs/test_patch.txt",
    "final_test": "logs/final_test.txt",
}


# ``ab run-task --out DIR`` writes under DIR instead of ARTIFACTS_ROOT for one command.
_root_override: ContextVar[Path | None] = ContextVar("artifacts_root_override", default=None)


def artifacts_root() -> Path:
    return _root_override.get() or Path(settings.ARTIFACTS_ROOT)


@contextlib.contextmanager
def root_override(folder: Path | None) -> Iterator[None]:
    """Write artifacts under ``folder`` within this block (no-op for None)."""
    if folder is None:
        yield
        return
    token = _root_override.set(Path(folder).resolve())
    try:
        yield
    finally:
        _root_override.reset(token)


def run_folder_name(run: Run) -> str:
    """``<timestamp>__<suite>__<variant>``: sortable and readable (``_claim_run_folder``
    appends the run's short id when another run already took the name)."""
    stamp = (run.created_at or timezone.now()).strftime("%Y%m%dT%H%M%SZ")
    label = run.model_config.agent_variant
    if run.model_config.slug != label:
        label = f"{label}-{run.model_config.slug}"
    return f"{stamp}__{_safe(run.suite.name)}__{_safe(label)}"


def _claim_run_folder(run: Run) -> Path:
    """A folder for ``run``, made here: the readable name, or with the run's short id when
    that is taken. ``mkdir`` is the claim (atomic), so two runs created in the same second
    never share a folder, as they could when a name was checked free and made later."""
    root = artifacts_root()
    root.mkdir(parents=True, exist_ok=True)
    name = run_folder_name(run)
    for candidate in (name, f"{name}__{str(run.public_id)[:8]}"):
        try:
            (root / candidate).mkdir()
        except FileExistsError:
            continue
        return root / candidate
    # Both taken: the short-id name is this run's own (another worker of it made it).
    return root / f"{name}__{str(run.public_id)[:8]}"


def run_dir(run: Run) -> Path:
    """The run's folder, recorded on the run the first time any attempt of it needs it."""
    if not run.artifacts_dir:
        claimed = _claim_run_folder(run)
        name = relative(claimed)
        # Compare-and-set: concurrent workers of one run agree on the first name stored.
        Run.objects.filter(pk=run.pk, artifacts_dir="").update(artifacts_dir=name)
        run.artifacts_dir = Run.objects.values_list("artifacts_dir", flat=True).get(pk=run.pk)
        if run.artifacts_dir != name:
            # Another worker of this run stored its folder first: ours is empty, unused.
            with contextlib.suppress(OSError):
                claimed.rmdir()
    path = folder_of(run.artifacts_dir)
    path.mkdir(parents=True, exist_ok=True)
    return path


def folder_of(artifacts_dir: str) -> Path:
    """The folder a stored ``artifacts_dir`` names (relative to ARTIFACTS_ROOT, or absolute)."""
    return Path(settings.ARTIFACTS_ROOT) / artifacts_dir


def attempt_folder_name(attempt: Attempt) -> str:
    return f"{_safe(attempt.task.task_id)}__{attempt.sample_index}"


def relative(path: Path) -> str:
    """The name stored in the database: relative to ARTIFACTS_ROOT, or absolute when the
    folder lies elsewhere (``--out``)."""
    path = path.resolve()
    root = Path(settings.ARTIFACTS_ROOT).resolve()
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)


def write_text(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8", errors="replace")
    return path


def write_json(folder: Path, name: str, data: dict[str, Any]) -> Path:
    return write_text(folder, name, json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


def write_stage_log(folder: Path, stage: StageResult) -> str:
    """Write one stage's commands, exit codes, durations and output; return its relative name."""
    name = LOG_NAMES.get(stage.name, f"logs/{stage.name}.txt")
    write_text(folder, name, format_stage_log(stage))
    return name


def format_stage_log(stage: StageResult) -> str:
    lines = [f"# stage {stage.name} (started {stage.started_at.isoformat()})"]
    for run in stage.runs:
        lines.append(f"$ {run.command}")
        lines.append(
            f"# {run.where}: exit {run.exit_code} in {run.duration_sec:.2f}s"
            + (" (timed out)" if run.timed_out else "")
            + (" (output truncated)" if run.truncated else "")
        )
        if run.stdout:
            lines.append("--- stdout ---")
            lines.append(run.stdout.rstrip("\n"))
        if run.stderr:
            lines.append("--- stderr ---")
            lines.append(run.stderr.rstrip("\n"))
    if stage.detail:
        lines.append(stage.detail.rstrip("\n"))
    if stage.traceback:
        lines.append(stage.traceback.rstrip("\n"))
    reason = stage.reason.value if stage.reason else "none"
    lines.append(f"# result: {reason}" + (f" ({stage.note})" if stage.note else ""))
    return "\n".join(lines) + "\n"


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.\-]+", "-", text).strip("-") or "x"
