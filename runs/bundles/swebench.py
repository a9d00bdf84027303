"""A run on a SWE-bench suite in the layout of the SWE-bench experiments repository
(``ab export-run --format swebench``), so it can be submitted there or imported elsewhere::

    all_preds.jsonl                   instance_id, model_name_or_path, model_patch
    logs/<instance>/patch.diff        the attempt's final patch
    logs/<instance>/report.json       {instance: {resolved, tests_status, ...}}, the harness's
    logs/<instance>/test_output.txt   the eval script's output (the final tests' log)
    trajs/<instance>.atif.json        the transcript, as an ATIF trajectory
    metadata.yaml, README.md

One attempt per instance (sample 0: the experiments hold one). An attempt that ended for
infrastructure has no report (the harness lists such instances as errors, not results); one
never attempted appears nowhere. The official package's grading reads ``test_output.txt`` to
the same verdicts as ours (tests/runs/bundles/test_bundles_swebench.py), and ``ab import-run`` reads
the folder back. Files are scrubbed of keys and tokens like a bundle's (``runs.bundles.scrub``).
"""

from __future__ import annotations

import io
import json
import tarfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from runs.artifacts import AtifExportError, attempt_atif, open_artifact
from runs.bundles.bundle import check_exportable
from runs.bundles.scrub import Scrubber, known_secrets
from runs.models import Attempt, AttemptStatus, Run
from tasks_app.models import TaskSource

FINAL_TEST_LOG = "logs/final_test.txt"
TEST_STATUS_KEYS = ("FAIL_TO_PASS", "PASS_TO_PASS", "FAIL_TO_FAIL", "PASS_TO_FAIL")


class NotSwebench(ValueError):
    """The run's suite is not a SWE-bench suite."""


@dataclass
class SwebenchExport:
    path: str
    predictions: int
    reports: int
    resolved: int

    def summary(self) -> str:
        return (
            f"{self.path}: {self.predictions} prediction(s), {self.reports} report(s), "
            f"{self.resolved} resolved"
        )


def instance_report(attempt: Attempt) -> dict:
    """The harness's per-instance report for one graded attempt."""
    results = attempt.test_results or {}
    patch = attempt.final_patch or ""
    tests_status = {
        key: {
            "success": list((results.get(key) or {}).get("success") or []),
            "failure": list((results.get(key) or {}).get("failure") or []),
        }
        for key in TEST_STATUS_KEYS
    }
    return {
        attempt.task.task_id: {
            "patch_is_None": False,
            "patch_exists": bool(patch.strip()),
            "patch_successfully_applied": bool(results) or attempt.resolved,
            "resolved": attempt.resolved,
            "tests_status": tests_status,
        }
    }


def swebench_files(run: Run) -> dict[str, bytes]:
    """Every file of the layout, by its relative name, before scrubbing."""
    check_exportable(run)
    if run.suite.source != TaskSource.SWEBENCH:
        raise NotSwebench(f"suite {run.suite.name} is not a SWE-bench suite ({run.suite.source})")
    attempts = (
        Attempt.objects.filter(run=run, sample_index=0)
        .exclude(status=AttemptStatus.MISSING)
        .select_related("task", "run", "suite", "model_config")
        .order_by("task__task_id")
    )
    name = run.model_config.name
    files: dict[str, bytes] = {}
    preds = []
    resolved = 0
    for attempt in attempts:
        iid = attempt.task.task_id
        preds.append(
            {"instance_id": iid, "model_name_or_path": name, "model_patch": attempt.final_patch}
        )
        if attempt.final_patch:
            files[f"logs/{iid}/patch.diff"] = attempt.final_patch.encode()
        if attempt.status == AttemptStatus.FINISHED and not attempt.is_infra:
            files[f"logs/{iid}/report.json"] = json.dumps(
                instance_report(attempt), indent=2
            ).encode()
            resolved += attempt.resolved
            handle = open_artifact(attempt, FINAL_TEST_LOG)
            if handle is not None:
                with handle:
                    files[f"logs/{iid}/test_output.txt"] = handle.read()
        try:
            trajectory = attempt_atif(attempt)
        except AtifExportError:
            trajectory = None
        if trajectory is not None:
            files[f"trajs/{iid}.atif.json"] = json.dumps(trajectory, indent=1).encode()
    files["all_preds.jsonl"] = b"".join(json.dumps(p).encode() + b"\n" for p in preds)
    date = run.finished_at or run.created_at
    files["metadata.yaml"] = yaml.safe_dump(
        {
            "info": {"name": name, "date": date.date().isoformat() if date else None},
            "tags": {
                "checked": False,
                "model": [run.model_config.model_name or name],
                "system": {"attempts": "1"},
            },
            "agentbench": {"run": str(run.public_id), "suite": run.suite.name},
        },
        sort_keys=False,
    ).encode()
    files["README.md"] = (
        f"# {name} on {run.suite.name}\n\n"
        f"Run {run.public_id}, exported by AgentBench {run.harness_version or ''}: "
        f"{resolved} of {len(preds)} predictions resolved (sample 0 of {run.samples}).\n"
    ).encode()
    return files


def run_swebench_export(*, run: Run, path: Path) -> SwebenchExport:
    """Write the layout to the folder ``path`` (created; must not exist), or to a .tar.gz
    when ``path`` ends so. Raises ``NotSwebench``, or ``BundleSecretError`` naming a file."""
    scrubber = Scrubber(known_secrets())
    files = {n: scrubber.scrub(d) for n, d in swebench_files(run).items()}
    scrubber.check(files)
    if path.name.endswith((".tar.gz", ".tgz")):
        with tarfile.open(path, "w:gz") as archive:
            for name, data in sorted(files.items()):
                info = tarfile.TarInfo(f"{path.name.split('.')[0]}/{name}")
                info.size, info.mode = len(data), 0o644
                archive.addfile(info, io.BytesIO(data))
    else:
        path.mkdir(parents=True, exist_ok=False)
        for name, data in files.items():
            (path / name).parent.mkdir(parents=True, exist_ok=True)
            (path / name).write_bytes(data)
    reports = [n for n in files if n.endswith("/report.json")]
    resolved = sum(next(iter(json.loads(files[n]).values()))["resolved"] for n in reports)
    preds = files["all_preds.jsonl"].count(b"\n")
    return SwebenchExport(str(path), preds, len(reports), resolved)
