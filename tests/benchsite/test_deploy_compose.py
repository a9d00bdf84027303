"""docker/compose.yaml for real: the image built offline (docker/app/build-offline.sh, cached
under /var/lib/agentbench/compose), then web + two workers + the reaper + PostgreSQL + Redis
as containers under docker-compose, a run across both workers, and its artifacts read back
through the web app. Sandboxes are containers on the host's engine, started by the workers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.request
import uuid
from pathlib import Path

import pytest

from tests.benchsite.test_serve_lifecycle import free_port
from tests.support.worker_stack import REPO_ROOT, wait_until

pytestmark = [pytest.mark.docker, pytest.mark.slow]

COMPOSE_FILE = REPO_ROOT / "docker" / "compose.yaml"


@pytest.fixture(scope="module")
def app_image() -> str:
    out = subprocess.run(
        ["bash", str(REPO_ROOT / "docker" / "app" / "build-offline.sh")],
        capture_output=True,
        text=True,
        timeout=2400,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip().splitlines()[-1]


@pytest.fixture
def deployment(app_image):
    name = f"abtest{uuid.uuid4().hex[:8]}"
    # A host path: workers bind-mount workspaces from it into sandboxes on the host engine.
    artifacts = Path(f"/var/lib/agentbench/compose-test/{name}")
    artifacts.mkdir(parents=True)
    port = free_port()
    env = os.environ | {
        "AB_APP_IMAGE": app_image,
        "AB_ARTIFACTS": str(artifacts),
        "AB_PORT": str(port),
        "ANONYMOUS_READ_ARTIFACTS": "1",
        "POSTGRES_PASSWORD": uuid.uuid4().hex,
    }

    def compose(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["docker-compose", "-p", name, "-f", str(COMPOSE_FILE), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    compose.port = port  # type: ignore[attr-defined]
    compose.password = env["POSTGRES_PASSWORD"]  # type: ignore[attr-defined]
    try:
        up = compose("up", "-d", "--scale", "worker=2")
        assert up.returncode == 0, up.stderr[-3000:]
        yield compose
    finally:
        logs = compose("logs", "--no-color", "--tail", "60")
        print(logs.stdout[-20000:])
        compose("down", "-v", "--remove-orphans", "-t", "60")
        shutil.rmtree(artifacts, ignore_errors=True)


def get(port: int, path: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as response:
        return response.status, response.read()


def _healthy(port: int) -> bool:
    try:
        return get(port, "/healthz")[0] == 200
    except OSError:
        return False


def test_it_runs_a_suite_on_the_compose_deployment(deployment):
    port = deployment.port
    wait_until(lambda: _healthy(port), timeout=300, what="the web container")
    out = deployment(
        "exec",
        "-T",
        "web",
        "ab",
        "run-suite",
        "custom-dev",
        "--variant",
        "scripted",
        "--task",
        "toy_fail_pytest",
        "--samples",
        "4",
        "--wait",
        "--poll",
        "2",
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert out.stdout.rstrip().endswith("finished")
    public_id = out.stdout.split("run ", 1)[1].split(":", 1)[0]

    status, body = get(port, f"/api/attempts?run={public_id}")
    attempts = json.loads(body)["items"]
    assert status == 200 and len(attempts) == 4
    assert all(a["status"] == "finished" and a["failure_reason"] is None for a in attempts), (
        attempts
    )
    workers = deployment(
        "exec",
        "-T",
        "-e",
        f"PGPASSWORD={deployment.password}",
        "db",
        "psql",
        "-U",
        "agentbench",
        "-h",
        "127.0.0.1",
        "-d",
        "agentbench",
        "-At",
        "-c",
        "select distinct split_part(worker, ':', 1) from runs_attempt",
    )
    assert len(set(workers.stdout.split())) == 2, workers.stdout + workers.stderr
    for attempt in attempts:
        path = f"/api/attempts/{attempt['public_id']}/artifacts/logs/final_test.txt"
        status, body = get(port, path)
        assert status == 200 and b"passed" in body
