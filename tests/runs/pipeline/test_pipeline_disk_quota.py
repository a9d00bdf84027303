"""A command that writes without end stops at the sandbox's disk quota: the attempt ends
SANDBOX_ERROR [disk-quota], and the host's disk use stays bounded by the quota."""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path

import pytest

from runs.taxonomy import Reason, Stage
from sandbox.disk import disk_root
from tests.support.pipeline_fixtures import (
    git_repo,
    import_tasks,
    run_attempt,
    run_json,
    write_task,
)

pytestmark = [pytest.mark.django_db, pytest.mark.docker, pytest.mark.bwrap]
QUOTA_MB = 64


def test_filling_the_disk_in_setup_is_a_named_sandbox_error(
    tmp_path: Path, backend: str, artifacts_root: Path, settings
) -> None:
    settings.SANDBOX_DISK_MB = QUOTA_MB
    commit = git_repo(tmp_path / "repo", {"test_x.py": "def test_x():\n    assert False\n"})
    write_task(
        tmp_path / "tasks",
        "fills_disk",
        f"""
        repo: {{url: {tmp_path / "repo"}, commit: {commit}}}
        environment: {{docker_image: agentbench/py-runner:0.1.0, workdir: /workspace,
                       timeout_sec: 60}}
        setup: {{commands: ["cat /dev/zero > /workspace/fill"], network: false}}
        run: {{command: "python3 -m pytest -q test_x.py"}}
        validation: {{enforce_clean_setup: false}}
        """,
    )
    import_tasks(tmp_path / "tasks", also=[tmp_path])
    from tasks_app.models import Task

    # The largest the quota's image ever gets on the host while the attempt runs.
    largest = [0]
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            for image in disk_root().glob("ab-attempt-*.img"):
                with contextlib.suppress(FileNotFoundError):
                    largest[0] = max(largest[0], image.stat().st_blocks * 512)
            time.sleep(0.02)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        attempt = run_attempt(Task.objects.get(task_id="fills_disk"), backend=backend)
    finally:
        done.set()
        watcher.join(5)
    assert attempt.failure_reason_id == Reason.SANDBOX_ERROR.value, attempt.error_text
    assert attempt.failure_stage == Stage.SETUP.value
    assert attempt.error_text.startswith("[disk-quota] SANDBOX_ERROR in setup")
    assert "No space left on device" in attempt.error_text
    assert 0 < largest[0] <= QUOTA_MB * 1024 * 1024
    record = run_json(attempt)
    assert record["sandbox"]["disk_quota"].startswith(f"ext4 image of {QUOTA_MB} MiB")
    assert list(disk_root().glob(f"*{attempt.public_id}*")) == []


def test_a_kept_workspace_comes_back_from_the_quota(
    tmp_path: Path, backend: str, artifacts_root: Path, settings
) -> None:
    from runs.pipeline.artifacts import folder_of
    from tasks_app.models import Task

    settings.SANDBOX_DISK_MB = QUOTA_MB
    commit = git_repo(tmp_path / "repo", {"test_x.py": "def test_x():\n    assert False\n"})
    write_task(
        tmp_path / "tasks",
        "keeps_ws",
        f"""
        repo: {{url: {tmp_path / "repo"}, commit: {commit}}}
        environment: {{docker_image: agentbench/py-runner:0.1.0, workdir: /workspace,
                       timeout_sec: 60}}
        setup: {{commands: ["echo made-inside > /workspace/made.txt"], network: false}}
        run: {{command: "python3 -m pytest -q test_x.py"}}
        validation: {{enforce_clean_setup: false, check_flaky: false}}
        """,
    )
    import_tasks(tmp_path / "tasks", also=[tmp_path])
    attempt = run_attempt(
        Task.objects.get(task_id="keeps_ws"), backend=backend, keep_workspace=True
    )
    assert attempt.failure_reason_id is None, attempt.error_text
    folder = folder_of(attempt.artifacts_dir)
    assert (folder / "workspace" / "made.txt").read_text() == "made-inside\n"
    assert (folder / "workspace" / "test_x.py").exists()
    assert (folder / "workspace.kept").exists()  # the reaper's clean-up leaves it
    assert list(disk_root().glob(f"*{attempt.public_id}*")) == []
