"""A deployment on several machines, as separate processes on this one: the web app
(``ab serve --no-worker``, gunicorn), two ``ab worker`` processes (one with the reaper), one
PostgreSQL database and one Redis broker. Each worker writes to its own local ARTIFACTS_ROOT,
as on its own machine; the artifacts storage is a folder they share with the web app (as an
NFS mount or an S3 bucket would be). A suite runs across both workers and every attempt's
logs are read back through the web app's HTTP API."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request

import pytest

from runs.models import FINAL_STATES, Attempt, Run
from tests.benchsite.test_serve_lifecycle import descendants, free_port, still_running, wait_exit
from tests.support.worker_stack import REPO_ROOT, create_stack, wait_until

pytestmark = [pytest.mark.services, pytest.mark.slow]


@pytest.fixture
def stack(tmp_path, django_db_blocker):
    shared = tmp_path / "shared-artifacts"
    shared.mkdir()
    extra = {
        "ARTIFACTS_STORAGE_LOCATION": str(shared),
        "ANONYMOUS_READ_ARTIFACTS": "1",
        "REQUEST_LOG_LEVEL": "WARNING",
    }
    with django_db_blocker.unblock():
        stack = create_stack("postgres+redis", tmp_path, extra_env=extra)
        stack.connect()
        try:
            yield stack
        finally:
            stack.close()


def start(stack, name: str, *args: str, env: dict | None = None) -> subprocess.Popen:
    log = open(stack.var_dir / f"{name}.log", "wb")  # noqa: SIM115 (kept by Popen)
    return subprocess.Popen(
        [sys.executable, "-m", "benchsite.cli.main", *args],
        cwd=REPO_ROOT,
        env=stack.env | (env or {}),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.status, response.read()


def test_it_runs_a_suite_across_two_workers_and_serves_their_artifacts_from_the_web(stack):
    port = free_port()
    machines = {
        name: {"ARTIFACTS_ROOT": str(stack.var_dir / f"{name}-local-artifacts")}
        for name in ("w1", "w2")
    }
    processes = {
        "web": start(stack, "web", "serve", "--no-worker", "--addr", f"127.0.0.1:{port}"),
        "w1": start(stack, "w1", "worker", "--beat", "--hostname", "w1@%h", env=machines["w1"]),
        "w2": start(stack, "w2", "worker", "--hostname", "w2@%h", env=machines["w2"]),
    }
    children = {}
    try:
        wait_until(lambda: _up(stack, port), timeout=180, what="the web app")
        out = stack.ab("run-suite", "custom-dev", "--variant", "scripted", "--samples", "2")
        public_id = out.stdout.split("run ", 1)[1].split(":", 1)[0]
        run = Run.objects.using(stack.alias).get(public_id=public_id)
        attempts = Attempt.objects.using(stack.alias).filter(run_id=run.id)
        wait_until(
            lambda: not attempts.exclude(status__in=FINAL_STATES).exists(),
            timeout=600,
            what="the run's attempts",
        )
        for name, proc in processes.items():
            children[name] = descendants(proc.pid)

        assert {a.worker.split("@")[0] for a in attempts} == {"w1", "w2"}
        status, body = get(f"http://127.0.0.1:{port}/api/runs/{public_id}")
        assert status == 200
        assert json.loads(body)["status"] in ("finished", "running")
        for attempt in attempts.select_related("task"):
            # Written on the worker's own disk, uploaded to the shared storage, served by web.
            worker = attempt.worker.split("@")[0]
            local = stack.var_dir / f"{worker}-local-artifacts" / attempt.artifacts_dir
            clone_log = (local / "logs" / "git_clone.txt").read_text()
            status, body = get(
                f"http://127.0.0.1:{port}/api/attempts/{attempt.public_id}"
                "/artifacts/logs/git_clone.txt"
            )
            assert status == 200 and body.decode() == clone_log, attempt.task.task_id
        toy = attempts.get(task__task_id="toy_fail_pytest", sample_index=0)
        status, body = get(f"http://127.0.0.1:{port}/attempts/{toy.public_id}/")
        assert status == 200 and b"calc.py" in body
    finally:
        for proc in processes.values():
            os.kill(proc.pid, signal.SIGTERM)
        for proc in processes.values():
            wait_exit(proc, proc.pid)
    for name, found in children.items():
        assert still_running(found) == {}, name


def _up(stack, port: int) -> bool:
    try:
        status, body = get(f"http://127.0.0.1:{port}/healthz")
    except OSError:
        return False
    return status == 200 and json.loads(body)["broker"]["ok"]
