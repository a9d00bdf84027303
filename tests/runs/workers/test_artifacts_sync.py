"""Attempt artifacts written by a worker reach the artifacts storage the web app reads."""

from __future__ import annotations

import pytest
from django.core.files.storage import storages

from runs.models import Attempt
from runs.services import run_launch
from runs.workers.artifacts_sync import attempt_publish_artifacts


@pytest.fixture
def attempt(custom_dev, scripted, broker, settings, tmp_path) -> Attempt:
    settings.ARTIFACTS_ROOT = tmp_path / "worker-disk"
    run = run_launch(suite=custom_dev, model_config=scripted, task_ids=["toy_fail_pytest"])
    attempt = run.attempts.get()
    folder = settings.ARTIFACTS_ROOT / "20260101T000000Z__custom-dev__scripted" / "toy__0"
    (folder / "logs").mkdir(parents=True)
    (folder / "run.json").write_text('{"schema_version": "1.0.0"}')
    (folder / "logs" / "setup.txt").write_text("pytest 8.3\n")
    attempt.artifacts_dir = "20260101T000000Z__custom-dev__scripted/toy__0"
    attempt.save(update_fields=["artifacts_dir"])
    return attempt


def shared_storage(settings, location) -> None:
    settings.STORAGES = settings.STORAGES | {
        "artifacts": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(location)},
        }
    }


def test_it_copies_the_attempt_folder_to_a_storage_elsewhere(attempt, settings, tmp_path):
    shared_storage(settings, tmp_path / "shared")
    assert attempt_publish_artifacts(attempt) == 2
    storage = storages["artifacts"]
    with storage.open(f"{attempt.artifacts_dir}/logs/setup.txt") as fh:
        assert fh.read() == b"pytest 8.3\n"
    assert storage.exists(f"{attempt.artifacts_dir}/run.json")
    # Again (a retried attempt): the names are replaced, not suffixed.
    (settings.ARTIFACTS_ROOT / attempt.artifacts_dir / "run.json").write_text("{}")
    assert attempt_publish_artifacts(attempt) == 2
    _dirs, files = storage.listdir(attempt.artifacts_dir)
    assert sorted(files) == ["run.json"]
    with storage.open(f"{attempt.artifacts_dir}/run.json") as fh:
        assert fh.read() == b"{}"


def test_it_does_nothing_when_the_storage_is_the_worker_folder(attempt, settings):
    shared_storage(settings, settings.ARTIFACTS_ROOT)
    assert attempt_publish_artifacts(attempt) == 0


def test_it_ignores_a_folder_outside_the_artifacts_root(attempt, settings, tmp_path):
    shared_storage(settings, tmp_path / "shared")
    attempt.artifacts_dir = "../../etc"
    assert attempt_publish_artifacts(attempt) == 0
    assert not (tmp_path / "shared").exists()
