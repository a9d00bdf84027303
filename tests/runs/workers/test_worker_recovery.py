"""``ab worker`` alone recovers what kills leave, and nothing of a killed or stopped worker stays.

Real processes on the embedded default (SQLite + kombu's SQL transport in a temp folder) and
real Docker sandboxes: an attempt whose setup sleeps, so it is mid-attempt (container up,
passwd/group files under /run/agentbench/accounts, a disk quota mounted) when a process is
killed. Each ``ab worker`` gets a temporary directory of the test's own (``TMPDIR``), which
must be empty once it stopped.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from runs.models import FINAL_STATES, Attempt, AttemptStatus
from tests.conftest import REPO_ROOT
from tests.support.worker_stack import create_stack, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.docker]

SLEEPY_TASK = """\
task_spec_version: "1.0"
id: setup_sleeps
suite: recovery
repo: {{url: {bundle}, commit: ea49502485e69bba84235ee0547d109820a0688a}}
environment: {{docker_image: agentbench/py-runner:0.1.0, timeout_sec: 60}}
setup: {{network: false, timeout_sec: 900, commands: ["sleep 900"]}}
run: {{command: PYTHONPATH=src python -m pytest -q tests/test_calc.py}}
"""
ACCOUNTS_ROOT = Path("/run/agentbench/accounts")


@pytest.fixture
def stack(tmp_path, django_db_blocker):
    tmp = tmp_path / "worker-tmp"
    tmp.mkdir()
    with django_db_blocker.unblock():
        stack = create_stack("sqlite+sqla", tmp_path, extra_env={"TMPDIR": str(tmp)})
        stack.tmp = tmp  # type: ignore[attr-defined]
        folder = tmp_path / "tasks" / "setup_sleeps"
        folder.mkdir(parents=True)
        bundle = REPO_ROOT / "examples" / "toy_repo.bundle"
        (folder / "task.yaml").write_text(SLEEPY_TASK.format(bundle=bundle))
        stack.ab("import-tasks", str(tmp_path / "tasks"))
        stack.connect()
        procs: list[subprocess.Popen] = []
        stack.ab_workers = procs  # type: ignore[attr-defined]
        try:
            yield stack
        finally:
            for proc in procs:
                _kill_tree(proc.pid)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=60)
            _remove_leftovers(stack)
            stack.close()


def start_ab_worker(stack, name: str, env: dict | None = None) -> subprocess.Popen:
    """``ab worker`` (no --beat), its output in a file."""
    log = open(stack.var_dir / f"ab-worker-{name}.log", "ab")  # noqa: SIM115 (kept by Popen)
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchsite.cli.main", "worker", "--hostname", f"{name}@%h"],
        cwd=REPO_ROOT,
        env=stack.env | (env or {}),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    stack.ab_workers.append(proc)
    return proc


def launch_sleepy(stack) -> Attempt:
    out = stack.ab("run-suite", "recovery", "--variant", "nop")
    public_id = out.stdout.split("run ", 1)[1].split(":", 1)[0]
    return Attempt.objects.using(stack.alias).get(run__public_id=public_id)


def fresh(stack, attempt: Attempt) -> Attempt:
    return Attempt.objects.using(stack.alias).get(pk=attempt.pk)


def containers_of(attempt: Attempt) -> list:
    import docker

    client = docker.from_env()
    try:
        return client.containers.list(
            all=True,
            filters={"label": f"agentbench.attempt={attempt.public_id}"},
            ignore_removed=True,
        )
    finally:
        client.close()


def quota_mounts(attempt: Attempt) -> list[str]:
    name = f"ab-attempt-{attempt.public_id}"
    return [line for line in Path("/proc/self/mountinfo").read_text().splitlines() if name in line]


def sandbox_files(attempt: Attempt) -> list[Path]:
    name = f"ab-attempt-{attempt.public_id}"
    roots = [ACCOUNTS_ROOT, Path("/run/agentbench/docker"), Path("/run/agentbench/ws")]
    return [root / name for root in roots if (root / name).exists()]


def wait_mid_attempt(stack, attempt: Attempt, worker: str) -> Attempt:
    """Until the attempt runs its sleeping setup on ``worker``: container up, files written."""

    def in_setup() -> Attempt | None:
        row = fresh(stack, attempt)
        if row.status != AttemptStatus.RUNNING or not row.worker.startswith(f"{worker}@"):
            return None
        running = [c for c in containers_of(row) if c.status == "running"]
        return row if running and (ACCOUNTS_ROOT / f"ab-attempt-{row.public_id}").exists() else None

    return wait_until(in_setup, timeout=240, what=f"the attempt to run its setup on {worker}")


def assert_nothing_left_of(attempt: Attempt) -> None:
    wait_until(lambda: not containers_of(attempt), timeout=60, what="the container to go")
    # The reaper removes the host files just after it commits the attempt's end (the
    # container goes on that commit), so they may outlive the container by a moment.
    wait_until(
        lambda: not sandbox_files(attempt) and not quota_mounts(attempt),
        timeout=30,
        what="the sandbox's host files and quota mounts to go",
    )


def stop(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 120) -> None:
    os.kill(proc.pid, sig)
    proc.wait(timeout=timeout)


def test_a_lone_worker_ends_an_attempt_whose_celery_process_was_killed(stack):
    """No --beat, no `ab reaper` anywhere: the worker's own reaper pass takes it back."""
    attempt = launch_sleepy(stack)
    # One try only, so the reaper ends it instead of running the 15-minute setup again.
    worker = start_ab_worker(stack, "alone", env={"ATTEMPT_MAX_REQUEUES": "0"})
    attempt = wait_mid_attempt(stack, attempt, "alone")
    had_quota = bool(quota_mounts(attempt))
    child_pid = int(attempt.worker.rsplit(":", 1)[1])
    os.kill(child_pid, signal.SIGKILL)  # the Celery pool process running the attempt

    attempt = wait_until(
        lambda: (row := fresh(stack, attempt)).status in FINAL_STATES and row,
        timeout=180,
        what="the reaper of the lone worker to end the attempt",
    )
    assert attempt.status == AttemptStatus.FINISHED
    assert attempt.failure_reason_id == "SANDBOX_ERROR" and attempt.is_infra
    assert attempt.error_text.startswith("[worker-lost]"), attempt.error_text
    assert_nothing_left_of(attempt)
    print(f"\nquota mounted before the kill: {had_quota}")
    stop(worker)
    assert worker.returncode == 0
    assert list(stack.tmp.iterdir()) == []


def test_nothing_of_a_killed_worker_or_a_handed_back_attempt_is_left(stack):
    attempt = launch_sleepy(stack)
    first = start_ab_worker(stack, "first")
    attempt = wait_mid_attempt(stack, attempt, "first")
    first_folders = list(stack.tmp.glob("ab-worker-*"))
    assert len(first_folders) == 1
    assert list(first_folders[0].glob("tmp/pymp-*")), "Celery's temporary folder is in it"
    # Everything of that worker dies at once (the OOM killer, kill -9 of its unit).
    _kill_tree(first.pid)
    first.wait(timeout=60)
    assert first_folders[0].exists() and sandbox_files(attempt)

    # A new worker on the machine: its reaper takes the attempt back (one requeue) and
    # removes the dead worker's folder; the attempt starts again on it.
    second = start_ab_worker(stack, "second", env={"WORKER_SHUTDOWN_GRACE_SEC": "0"})
    wait_until(
        lambda: not first_folders[0].exists(),
        timeout=120,
        what="the dead worker's folder to be removed",
    )
    attempt = wait_mid_attempt(stack, attempt, "second")
    assert attempt.requeue_count == 1
    outcome = attempt.stages.using(stack.alias).get(name="try 1: outcome")
    assert "reason none (stopped before an outcome)" in outcome.command, outcome.command

    # Stopped with no grace: the attempt is handed back, and nothing of it or of the worker
    # stays behind.
    stop(second)
    assert second.returncode == 0
    attempt = fresh(stack, attempt)
    assert attempt.status == AttemptStatus.QUEUED
    outcome = attempt.stages.using(stack.alias).get(name="try 2: outcome")
    assert "handed back" in outcome.command and "success" not in outcome.command
    assert_nothing_left_of(attempt)
    assert list(stack.tmp.iterdir()) == []


def _kill_tree(pid: int) -> None:
    """SIGKILL ``pid`` and every process below it."""
    from tests.benchsite.test_serve_lifecycle import descendants

    for child in [pid, *descendants(pid)]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)


def _remove_leftovers(stack) -> None:
    """What a failed test may leave of its attempts: containers, mounts, sandbox files."""
    import docker

    from sandbox.leftovers import remove_host_leftovers

    rows = Attempt.objects.using(stack.alias).values_list("public_id", "artifacts_dir")
    client = docker.from_env()
    try:
        for public_id, artifacts_dir in rows:
            for container in client.containers.list(
                all=True,
                filters={"label": f"agentbench.attempt={public_id}"},
                ignore_removed=True,
            ):
                container.remove(force=True)
            workspace = Path(stack.env["ARTIFACTS_ROOT"]) / artifacts_dir / "workspace"
            remove_host_leftovers(f"ab-attempt-{public_id}", workspace if artifacts_dir else None)
    finally:
        client.close()
