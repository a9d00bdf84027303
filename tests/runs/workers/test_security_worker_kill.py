"""``kill -9`` of an ``ab worker``'s process group loses no attempt.

The issue's reproduction: the Celery processes lived on (their parent-death signal was
SIGTERM, a warm stop), another worker's leftovers pass judged the folder's owner dead by the
``ab worker`` pid alone and deleted the temporary folder under them, and the attempt ended
UNKNOWN (a FileNotFoundError inside ``ab-worker-<pid>-*``) with requeues=0. Now the Celery
processes die with ``ab worker`` (SIGKILL), a worker's folder stays while any process holding
its lock lives, and the reaper requeues the attempt, which then runs to its own outcome.
Real processes: ``ab worker`` on the embedded default (SQLite + kombu's SQL transport), real
sandboxes on both backends.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from runs.models import FINAL_STATES, Attempt, AttemptStatus
from runs.workers.leftovers import leftovers_remove
from tests.benchsite.test_serve_lifecycle import descendants
from tests.conftest import REPO_ROOT
from tests.runs.workers.test_worker_recovery import (
    ACCOUNTS_ROOT,
    _kill_tree,
    _remove_leftovers,
    assert_nothing_left_of,
    fresh,
    start_ab_worker,
)
from tests.support.pipeline_fixtures import BACKENDS, leftover_processes
from tests.support.worker_stack import create_stack, wait_until

# Long enough to kill the worker while it sleeps; short enough for the second try.
NAPPING_TASK = """\
task_spec_version: "1.0"
id: setup_naps
suite: kill-group
repo: {{url: {bundle}, commit: ea49502485e69bba84235ee0547d109820a0688a}}
environment: {{docker_image: agentbench/py-runner:0.1.0, timeout_sec: 60}}
setup: {{network: false, timeout_sec: 120, commands: ["sleep 20"]}}
run: {{command: PYTHONPATH=src python -m pytest -q tests/test_calc.py}}
"""


# --- the leftovers pass judges a folder by its lock ------------------------------------

PLAYS_AB_WORKER = """
import os, subprocess, sys, time
from runs.workers.worker_dir import WORKER_DIR_ENV, worker_dir_create
folder = worker_dir_create()
celery = subprocess.Popen(
    [sys.executable, "-c", "import time; from runs.workers.worker_dir import worker_dir_join; "
     "assert worker_dir_join(); print('joined', flush=True); time.sleep(600)"],
    env=os.environ | {WORKER_DIR_ENV: str(folder)}, stdout=subprocess.PIPE, text=True,
)
assert celery.stdout.readline() == "joined\\n"
print(folder, celery.pid, flush=True)
time.sleep(600)
"""


@pytest.fixture
def own_tmpdir(tmp_path):
    saved = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(tmp_path)
    tempfile.tempdir = None  # read TMPDIR again
    try:
        yield tmp_path
    finally:
        if saved is None:
            del os.environ["TMPDIR"]
        else:
            os.environ["TMPDIR"] = saved
        tempfile.tempdir = None


@pytest.mark.django_db
def test_a_worker_folder_stays_while_any_process_of_its_worker_holds_its_lock(settings, own_tmpdir):
    settings.ARTIFACTS_ROOT = own_tmpdir / "artifacts"
    ab_worker = subprocess.Popen(
        [sys.executable, "-c", PLAYS_AB_WORKER],
        cwd=REPO_ROOT,
        env=os.environ | {"PYTHONPATH": str(REPO_ROOT)},
        stdout=subprocess.PIPE,
        text=True,
    )
    celery_pid = 0
    try:
        folder_text, pid_text = ab_worker.stdout.readline().split()
        folder, celery_pid = Path(folder_text), int(pid_text)
        (folder / "tmp" / "ab-git-x").mkdir(parents=True)  # an attempt's work folder
        ab_worker.kill()  # the folder's owner is gone, its Celery process is not
        ab_worker.wait()

        assert leftovers_remove().worker_dirs == []
        assert (folder / "tmp" / "ab-git-x").is_dir()

        os.kill(celery_pid, signal.SIGKILL)  # now every process of that worker is gone
        wait_until(
            lambda: not Path(f"/proc/{celery_pid}").exists() or _zombie(celery_pid),
            timeout=30,
            what="the Celery stand-in to die",
        )
        assert leftovers_remove().worker_dirs == [folder.name]
        assert not folder.exists()
    finally:
        for pid in (ab_worker.pid, celery_pid):
            with contextlib.suppress(ProcessLookupError):
                if pid:
                    os.kill(pid, signal.SIGKILL)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


# --- kill -9 of the whole process group, mid-attempt -----------------------------------


@pytest.fixture(params=BACKENDS)
def stack(request, tmp_path, django_db_blocker):
    tmp = tmp_path / "worker-tmp"
    tmp.mkdir()
    with django_db_blocker.unblock():
        env = {"TMPDIR": str(tmp), "SANDBOX_BACKEND": request.param}
        stack = create_stack("sqlite+sqla", tmp_path, extra_env=env)
        stack.tmp = tmp  # type: ignore[attr-defined]
        folder = tmp_path / "tasks" / "setup_naps"
        folder.mkdir(parents=True)
        bundle = REPO_ROOT / "examples" / "toy_repo.bundle"
        (folder / "task.yaml").write_text(NAPPING_TASK.format(bundle=bundle))
        stack.ab("import-tasks", str(tmp_path / "tasks"))
        stack.connect()
        stack.ab_workers = []  # type: ignore[attr-defined]
        try:
            yield stack
        finally:
            for proc in stack.ab_workers:
                _kill_tree(proc.pid)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=60)
            _remove_leftovers(stack)
            stack.close()


def _celery_processes(pid: int) -> list[int]:
    found = []
    for child in descendants(pid):
        with contextlib.suppress(OSError):
            if b"celery" in Path(f"/proc/{child}/cmdline").read_bytes():
                found.append(child)
    return found


def _alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists() and not _zombie(pid)


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.bwrap
def test_kill_9_of_a_workers_group_requeues_its_attempt_and_loses_nothing(stack):
    out = stack.ab("run-suite", "kill-group", "--variant", "nop")
    run_id = out.stdout.split("run ", 1)[1].split(":", 1)[0]
    attempt = Attempt.objects.using(stack.alias).get(run__public_id=run_id)
    first = start_ab_worker(stack, "first")

    def in_setup() -> Attempt | None:
        row = fresh(stack, attempt)
        running = row.status == AttemptStatus.RUNNING and row.worker.startswith("first@")
        sandbox = (ACCOUNTS_ROOT / f"ab-attempt-{row.public_id}").exists()
        return row if running and sandbox else None

    attempt = wait_until(in_setup, timeout=240, what="the attempt to sleep in its setup")
    celery = _celery_processes(first.pid)
    assert len(celery) >= 2, "Celery's main process and its pool process"
    folder = next(stack.tmp.glob("ab-worker-*"))

    os.killpg(first.pid, signal.SIGKILL)  # kill -9 of `ab worker`'s process group
    first.wait(timeout=30)
    # Nothing of that worker runs on unsupervised (it was a warm stop: the attempt ran on).
    wait_until(
        lambda: not any(_alive(pid) for pid in celery),
        timeout=30,
        what="the Celery processes to die with `ab worker`",
    )

    # Another worker on the machine: its reaper requeues the attempt (heartbeat stale),
    # its leftovers pass removes the dead worker's folder, and the attempt runs again.
    second = start_ab_worker(stack, "second")
    wait_until(
        lambda: not folder.exists(), timeout=120, what="the dead worker's folder to be removed"
    )
    attempt = wait_until(
        lambda: (row := fresh(stack, attempt)).status in FINAL_STATES and row,
        timeout=300,
        what="the requeued attempt to end",
    )
    assert attempt.requeue_count == 1
    assert attempt.worker.startswith("second@"), attempt.worker
    # Its own outcome: the nop agent leaves the tests failing. Never UNKNOWN.
    assert attempt.failure_reason_id == "TESTS_FAILED", attempt.error_text
    outcome = attempt.stages.using(stack.alias).get(name="try 1: outcome")
    assert "reason none (stopped before an outcome)" in outcome.command, outcome.command
    assert_nothing_left_of(attempt)
    assert leftover_processes(attempt) == []

    os.kill(second.pid, signal.SIGTERM)
    second.wait(timeout=120)
    assert second.returncode == 0
    assert list(stack.tmp.iterdir()) == []
