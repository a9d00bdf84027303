"""``/healthz``: 200 when the database and the broker answer, 503 naming the one that does
not. Each case runs in a fresh process, since the broker is chosen when Celery loads."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support.worker_stack import REDIS_URL, REPO_ROOT

pytestmark = [pytest.mark.services]

PROBE = """
from django.test import Client
response = Client().get("/healthz")
print(response.status_code, response.content.decode())
"""


def healthz(tmp_path, **env: str) -> tuple[int, dict]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "CELERY_"))}
    out = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", PROBE],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env=base | {"AB_VAR_DIR": str(tmp_path), "REQUEST_LOG_LEVEL": "WARNING"} | env,
    )
    status, body = out.stdout.strip().splitlines()[-1].split(" ", 1)
    return int(status), json.loads(body)


def test_it_answers_200_when_the_database_and_redis_answer(tmp_path):
    status, body = healthz(tmp_path, CELERY_BROKER_URL=REDIS_URL, CELERY_QUEUE="ab-health-empty")
    assert status == 200
    assert body["status"] == "ok" and body["database"]["ok"] and body["broker"]["ok"]


def test_it_answers_200_on_the_embedded_default(tmp_path):
    status, body = healthz(tmp_path)
    assert status == 200 and body["broker"]["ok"]


def test_it_answers_503_naming_the_broker_when_redis_is_down(tmp_path):
    status, body = healthz(tmp_path, CELERY_BROKER_URL="redis://127.0.0.1:1/0")
    assert status == 503
    assert body["status"] == "unavailable" and body["database"]["ok"]
    assert not body["broker"]["ok"] and "Connection refused" in body["broker"]["error"]


def test_it_answers_503_naming_the_database_when_postgresql_is_down(tmp_path):
    status, body = healthz(tmp_path, DATABASE_URL="postgres://nobody@127.0.0.1:1/none")
    assert status == 503
    assert not body["database"]["ok"] and body["broker"]["ok"]
