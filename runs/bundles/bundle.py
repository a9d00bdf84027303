"""A run as a reproducibility bundle, for any suite (``ab export-run --format bundle``).

What another installation needs to show the same figures and to run it again: the model
configuration with its sampling settings, the agent (variant; for an agent CLI its definition
file, version and install key), the LLM prompt version, the suite's tasks (the leaderboard
rates over all of them) with their gold validations and each one's environment (image, digest
the attempts ran on, repository and commits), every attempt with its stages and stored files
(patches, logs, ``model_calls.jsonl``, results; not the kept workspace), and the harness's
version. Layout of the .tar.gz::

    manifest.json          sha256 and size of every other file
    run.json               run, suite, model configuration, agent, sampling, harness
    tasks.jsonl            the suite's tasks, each with its gold validations
    environments.json      per task: what a re-run needs
    attempts.jsonl         each attempt's columns and stages
    attempts/<attempt id>/<file>   its stored files

Every file is scrubbed of keys and tokens and scanned again (``runs.bundles.scrub``).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from django.conf import settings
from django.utils import timezone

from runs.artifacts import list_artifacts, open_artifact
from runs.bundles import manifest
from runs.bundles.records import dumps, jsonl, record
from runs.bundles.scrub import Scrubber, known_secrets
from runs.models import AgentVariant, Attempt, AttemptStatus, Run
from tasks_app.models import GoldValidation, Task
from tasks_app.uploads.archives import ArchiveLimits

# The sandbox's working copy, kept only when asked: the repository, not a result.
LEFT_OUT_FOLDERS = ("workspace/",)
ACTIVE = (AttemptStatus.QUEUED, AttemptStatus.RUNNING)


@dataclass
class ExportReport:
    path: str
    files: int
    bytes: int
    attempts: int

    def summary(self) -> str:
        return f"{self.path}: {self.attempts} attempt(s), {self.files} file(s), {self.bytes} bytes"


def agent_record(run: Run) -> dict:
    """The agent as a re-run needs it: its variant, and for an agent CLI the definition."""
    config = run.model_config
    out: dict = {"variant": config.agent_variant, "cli_agent": config.cli_agent}
    if config.agent_variant == AgentVariant.LLM:
        from runs.agents.prompts import PROMPT_VERSION

        out["prompt_version"] = PROMPT_VERSION
    if config.agent_variant == AgentVariant.CLI and config.cli_agent:
        from runs.agent_clis import find_definition
        from runs.agents.cli.definition import DefinitionError

        try:
            definition = find_definition(config.cli_agent)
        except (DefinitionError, FileNotFoundError, KeyError) as exc:
            out["definition_error"] = str(exc)
        else:
            out |= {
                "definition": definition.text,
                "definition_file": f"{definition.name}.yaml",
                "definition_origin": definition.origin,
                "version": definition.spec.install.version,
                "install_key": definition.install_key,
            }
    return out


def environment_record(task: Task, digests: set[str]) -> dict:
    """What running ``task`` again needs: its image (and the digests its attempts ran on), or
    its repository and commits with the Python an offline build makes."""
    return {
        "task_id": task.task_id,
        "docker_image": task.docker_image,
        "image_digest": task.image_digest,
        "attempt_image_digests": sorted(d for d in digests if d),
        "repo_url": task.repo_url,
        "repo_commit": task.repo_commit,
        "environment_setup_commit": task.environment_setup_commit,
        "instance_version": task.instance_version,
        "python_used": task.python_used,
    }


def bundle_files(run: Run) -> dict[str, bytes]:
    """Every file of the bundle but the manifest, before scrubbing."""
    tasks = list(Task.objects.for_suite(run.suite).order_by("task_id"))
    validations: dict[int, list[dict]] = {}
    for gv in GoldValidation.objects.filter(task__in=tasks):
        validations.setdefault(gv.task_id, []).append(record(gv))
    attempts = list(
        Attempt.objects.filter(run=run)
        .select_related("task")
        .prefetch_related("stages")
        .order_by("task__task_id", "sample_index")
    )
    digests: dict[int, set[str]] = {}
    files: dict[str, bytes] = {}
    rows = []
    for attempt in attempts:
        digests.setdefault(attempt.task_id, set()).add(attempt.image_digest)
        row = record(attempt) | {"task": attempt.task.task_id}
        row["stages"] = [record(s) for s in attempt.stages.all()]
        row["files"] = []
        for found in list_artifacts(attempt):
            if found.is_link or found.name.startswith(LEFT_OUT_FOLDERS):
                continue
            handle = open_artifact(attempt, found.name)
            if handle is None:
                continue
            with handle:
                files[f"attempts/{attempt.public_id}/{found.name}"] = handle.read()
            row["files"].append(found.name)
        rows.append(row)
    config = run.model_config
    files["run.json"] = dumps(
        {
            "run": record(run),
            "suite": {
                "name": run.suite.name,
                "description": run.suite.description,
                "source": run.suite.source,
            },
            "model_config": record(config, leave_out=("created_at",)),
            "agent": agent_record(run),
            "sampling": config.sampling_params(),
        }
    )
    files["tasks.jsonl"] = jsonl(
        record(t) | {"gold_validations": validations.get(t.id, [])} for t in tasks
    )
    files["environments.json"] = dumps(
        [environment_record(t, digests.get(t.id, set())) for t in tasks]
    )
    files["attempts.jsonl"] = jsonl(rows)
    return files


class ExportRefused(ValueError):
    """A run that cannot be exported as it stands (still running, or over the caps)."""


def check_exportable(run: Run) -> None:
    """A run with attempts still queued or running is refused: they have no outcome yet, and
    imported as queued they would be work for the other installation's workers."""
    active = Attempt.objects.filter(run=run, status__in=ACTIVE).count()
    if active:
        raise ExportRefused(
            f"run {run.public_id} has {active} attempt(s) queued or running: "
            "export it once they end"
        )


def check_sizes(files: dict[str, bytes]) -> None:
    """The caps an import reads under (``API_ARCHIVE_*``): a bundle no installation with the
    same settings could import is not written."""
    limits = ArchiveLimits.from_settings()
    if len(files) + 1 > limits.members:
        raise ExportRefused(f"{len(files)} files: over API_ARCHIVE_MAX_MEMBERS ({limits.members})")
    for name, data in files.items():
        if len(data) > limits.member_bytes:
            raise ExportRefused(
                f"{name}: {len(data)} bytes, over API_ARCHIVE_MEMBER_MAX_BYTES "
                f"({limits.member_bytes})"
            )
    total = sum(len(d) for d in files.values())
    if total > limits.total_bytes:
        raise ExportRefused(
            f"{total} bytes in all: over API_ARCHIVE_TOTAL_MAX_BYTES ({limits.total_bytes})"
        )


def run_bundle_write(*, run: Run, out: IO[bytes]) -> tuple[int, int]:
    """Write ``run``'s bundle to ``out``; returns (files, attempts). Raises ``ExportRefused``
    and ``BundleSecretError`` (naming the file that still holds a secret) before writing."""
    check_exportable(run)
    scrubber = Scrubber(known_secrets())
    files = {name: scrubber.scrub(data) for name, data in bundle_files(run).items()}
    scrubber.check(files)
    check_sizes(files)
    meta = {
        "exported_at": timezone.now().isoformat(),
        "harness_version": settings.HARNESS_VERSION,
        "run": str(run.public_id),
    }
    count = manifest.write_bundle(out, files, meta)
    return count, Attempt.objects.filter(run=run).count()


def run_bundle_export(*, run: Run, path: Path) -> ExportReport:
    """``run``'s bundle written to ``path`` (a .tar.gz), through a temporary file so a refused
    export leaves nothing at ``path``."""
    partial = path.with_name(f".{path.name}.{dt.datetime.now().timestamp():.0f}.part")
    try:
        with partial.open("wb") as out:
            files, attempts = run_bundle_write(run=run, out=out)
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)
    return ExportReport(str(path), files, path.stat().st_size, attempts)
