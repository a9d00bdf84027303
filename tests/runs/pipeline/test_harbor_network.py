"""A Harbor task's ``allow_internet`` on both backends: true gives its commands (the verifier's
here) the internet but never the host (the host fence stays); false gives no network at all.

The internet is the loopback stand-in of tests/support/netns_fixtures.py; the verifier reports what
it reached as metrics of ``reward.json``, and the attempt keeps them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.support.backends import backend_params
from tests.support.netns_fixtures import FakeInternet, Listener, host_address_for
from tests.support.pipeline_fixtures import run_attempt

EXAMPLES = REPO_ROOT / "examples" / "harbor"
pytestmark = [pytest.mark.django_db, pytest.mark.docker]

VERIFIER = """#!/bin/bash
python3 - <<'PY'
import json, os, socket

def reaches(host, port):
    try:
        with socket.create_connection((host, int(port)), timeout=5) as conn:
            conn.settimeout(5)
            return 1 if conn.recv(64) or True else 0
    except OSError:
        return 0

internet = reaches(os.environ["INTERNET_HOST"], os.environ["INTERNET_PORT"])
host = reaches(os.environ["HOST_ADDRESS"], os.environ["HOST_PORT"])
reward = 1 if internet and not host else 0
with open("/logs/verifier/reward.json", "w") as out:
    json.dump({"reward": reward, "internet": internet, "host": host}, out)
PY
"""


def _task(tmp_path: Path, *, allow: bool, env: dict[str, str]):
    from tasks_app.models import Task
    from tasks_app.services import tasks_import
    from tasks_app.spec import PathRules

    folder = tmp_path / "net" / "py-wordfreq"
    shutil.copytree(EXAMPLES / "py-wordfreq", folder)
    (folder / "tests" / "test.sh").write_text(VERIFIER)
    config = folder / "task.toml"
    pairs = ", ".join(f'{k} = "{v}"' for k, v in env.items())
    text = config.read_text().replace(
        "allow_internet = false", f"allow_internet = {str(allow).lower()}"
    )
    config.write_text(
        text.replace("timeout_sec = 120.0", f"timeout_sec = 120.0\nenv = {{ {pairs} }}", 1)
    )
    tasks_import(directory=folder.parent, rules=PathRules.local(folder.parent))
    return Task.objects.get(suite__name="net", task_id="py-wordfreq")


@pytest.mark.parametrize("backend", backend_params())
@pytest.mark.parametrize("allow", [True, False], ids=["internet", "offline"])
def test_allow_internet_gives_the_internet_never_the_host(
    tmp_path, backend, allow, artifacts_root, fake_internet: FakeInternet, listener: Listener
):
    env = {
        "INTERNET_HOST": fake_internet.address,
        "INTERNET_PORT": str(fake_internet.port),
        "HOST_ADDRESS": host_address_for(backend),
        "HOST_PORT": str(listener.port),
    }
    task = _task(tmp_path, allow=allow, env=env)

    attempt = run_attempt(task, variant="nop", backend=backend)

    metrics = attempt.test_results["REWARD"]
    assert metrics["host"] == "0" and listener.accepted == 0  # the host fence, either way
    if allow:
        assert metrics["internet"] == "1"
        assert attempt.failure_reason_id is None, attempt.error_text
    else:
        assert metrics["internet"] == "0"
        assert attempt.failure_reason_id == "TESTS_FAILED"
