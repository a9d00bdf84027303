"""Artifacts never leave the artifact tree (issue 20, point 1).

An attempt's workspace lives in its artifact folder while it runs (and stays there with
--keep-workspace), and sandboxed code decides what is in it: links to host files included.
Here a task's setup plants ``leak -> /etc/shadow``, ``leak_root -> /``, a link to a folder of
this test, a FIFO and a link whose target text is markup, for real in Docker and bubblewrap,
and waits. While it waits, and again once the workspace is kept, every reader of an attempt's
files is tried: the API's artifact download (a reader's token; anonymously with
ANONYMOUS_READ_ARTIFACTS), the attempt page's listing and downloads, the API's listing, log
tails, the events and transcript readers, the publishing to another storage, and the
reaper's removal of the workspace. None may serve, list or touch anything outside.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest
from django.core.files.storage import storages
from django.test import Client
from django.urls import reverse

from tests.support.pipeline_fixtures import get_task, git_repo, import_tasks, write_task

pytestmark = [pytest.mark.docker, pytest.mark.bwrap, pytest.mark.slow]

XSS = "<script>alert(1)</script>"
SETUP = (
    "ln -s /etc/shadow leak && ln -s / leak_root && mkdir nest && ln -s /etc nest/etc"
    " && ln -s {sentinel} victim && ln -s '" + XSS + "' markup && mkfifo fifo"
    " && echo planted > planted"
    " && while [ ! -e release ]; do sleep 0.1; done"
)
LINKS = ["leak", "leak_root", "nest/etc", "victim", "markup"]
# Names a reader must never serve: the links, and files reached through them.
THROUGH_LINKS = [
    "leak",
    "leak_root/etc/hostname",
    "leak_root/etc/shadow",
    "nest/etc/hostname",
    "victim/secret.txt",
    "fifo",
]


@pytest.fixture
def local_artifacts(settings, tmp_path: Path) -> Path:
    """Artifacts in a temporary folder, configured as Django's plain FileSystemStorage (which
    follows links): the readers must not, whatever local storage is named."""
    root = tmp_path / "artifacts"
    root.mkdir()
    settings.ARTIFACTS_ROOT = root
    settings.STORAGES = settings.STORAGES | {
        "artifacts": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(root)},
        }
    }
    yield root
    storages._storages.pop("artifacts", None)


def artifact_api(attempt, name: str) -> str:
    return f"/api/attempts/{attempt.public_id}/artifacts/workspace/repo/{name}"


def check_every_reader(attempt, token: str, settings) -> None:
    from runs import artifacts

    api = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    # A real file of the workspace is served: the refusals below are about links only.
    served = api.get(artifact_api(attempt, "planted"))
    assert served.status_code == 200 and b"".join(served.streaming_content) == b"planted\n"
    for name in THROUGH_LINKS:
        response = api.get(artifact_api(attempt, name))
        assert response.status_code == 404, (name, response.status_code)

    settings.ANONYMOUS_READ_ARTIFACTS = True
    try:
        anonymous = Client()
        for name in THROUGH_LINKS:
            assert anonymous.get(artifact_api(attempt, name)).status_code == 404, name
    finally:
        settings.ANONYMOUS_READ_ARTIFACTS = False

    # The API's listing: links as links (their target's text, no URL), nothing behind them.
    detail = api.get(f"/api/attempts/{attempt.public_id}").json()
    listed = {a["name"]: a for a in detail["artifacts"]}
    leak = listed["workspace/repo/leak"]
    assert (leak["kind"], leak["target"], leak["url"]) == ("link", "/etc/shadow", None)
    assert listed["workspace/repo/planted"]["kind"] == "file"
    assert listed["workspace/repo/markup"]["target"] == XSS
    for name in LINKS:
        assert listed[f"workspace/repo/{name}"]["kind"] == "link", name
        behind = [n for n in listed if n.startswith(f"workspace/repo/{name}/")]
        assert behind == [], name
    assert "workspace/repo/fifo" not in listed

    # The attempt page (a reader's session) and its downloads.
    page = Client()
    page.force_login(attempt_reader())
    html = page.get(reverse("attempt-detail", args=[attempt.public_id])).content.decode()
    assert "workspace/repo/leak" in html and "/etc/shadow" in html
    assert XSS not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "leak_root/etc" not in html and "nest/etc/" not in html
    for name in THROUGH_LINKS:
        url = reverse("attempt-artifact", args=[attempt.public_id, f"workspace/repo/{name}"])
        assert url not in html, name
        assert page.get(url).status_code == 404, name

    # The file readers behind the log tails, the events and the transcript.
    for name in THROUGH_LINKS:
        relative = f"workspace/repo/{name}"
        assert artifacts.open_artifact(attempt, relative) is None, name
        assert artifacts.read_tail(attempt, relative) is None, name
        assert artifacts.read_bytes(attempt, relative, 1 << 20) is None, name
        assert artifacts.read_trajectory(attempt, relative) is None, name


def ended(outcome: list) -> object:
    """What an attempt that ended too early says about itself (its stage, reason and error)."""
    if outcome and hasattr(outcome[0], "failure_reason"):
        attempt = outcome[0]
        return (attempt.failure_stage, attempt.failure_reason, attempt.error_text)
    return outcome


def attempt_reader():
    from django.contrib.auth.models import User

    return User.objects.get(username="bob")


@pytest.mark.django_db(transaction=True)
def test_links_planted_by_a_sandbox_never_lead_a_reader_outside_the_attempt(
    backend: str, local_artifacts: Path, tmp_path: Path, bob_token: str, settings
) -> None:
    from runs.models import Attempt
    from runs.pipeline.adhoc import attempt_create_adhoc, model_config_for_variant
    from runs.pipeline.artifacts import folder_of
    from runs.pipeline.execute import attempt_execute
    from runs.workers.artifacts_sync import attempt_publish_artifacts
    from runs.workers.leftovers import KEEP_MARKER, leftovers_remove

    sentinel = tmp_path / "sentinel"
    sentinel.mkdir()
    (sentinel / "secret.txt").write_text("host secret\n")
    commit = git_repo(tmp_path / "repo", {"test_x.py": "def test_x():\n    assert False\n"})
    write_task(
        tmp_path / "tasks",
        "plants_links",
        f"""
        repo: {{url: {tmp_path / "repo"}, commit: {commit}}}
        environment: {{docker_image: agentbench/py-runner:0.1.0, workdir: /workspace/repo,
                       timeout_sec: 60}}
        setup: {{commands: [{json.dumps(SETUP.format(sentinel=sentinel))}], network: false,
                 timeout_sec: 600}}
        run: {{command: "python3 -m pytest -q test_x.py"}}
        validation: {{enforce_clean_setup: false, check_flaky: false}}
        """,
    )
    import_tasks(tmp_path / "tasks", also=[tmp_path])
    attempt = attempt_create_adhoc(
        task=get_task("plants_links", "pipeline-test"),
        model_config=model_config_for_variant("baseline"),
    )
    outcome: list = []

    def run() -> None:
        from django.db import connection

        try:
            outcome.append(attempt_execute(attempt, backend=backend, keep_workspace=True))
        except BaseException as exc:  # reported by the main thread
            outcome.append(exc)
        finally:
            connection.close()

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    try:
        # While the setup waits: the links are in the live workspace, inside the artifacts.
        deadline = time.monotonic() + 600
        while True:
            attempt.refresh_from_db()
            planted = attempt.artifacts_dir and (
                folder_of(attempt.artifacts_dir) / "workspace/repo/planted"
            )
            if planted and planted.exists():
                break
            assert worker.is_alive(), f"the attempt ended before planting: {ended(outcome)}"
            assert time.monotonic() < deadline, "the setup never planted its links"
            time.sleep(0.2)
        workspace = folder_of(attempt.artifacts_dir) / "workspace"
        assert os.readlink(workspace / "repo/leak") == "/etc/shadow"
        check_every_reader(attempt, bob_token, settings)
    finally:
        if attempt.artifacts_dir:
            (folder_of(attempt.artifacts_dir) / "workspace/repo/release").touch()
        worker.join(600)
    (finished,) = outcome
    assert isinstance(finished, Attempt), finished
    assert finished.failure_stage != "setup", finished.error_text

    # Kept: copied back from the disk quota with links as links, and read as safely.
    assert (workspace / "repo/leak").is_symlink()
    assert os.readlink(workspace / "repo/leak") == "/etc/shadow"
    check_every_reader(finished, bob_token, settings)

    # Published to another storage: the regular files only, nothing read through a link.
    shared = tmp_path / "shared"
    settings.STORAGES = settings.STORAGES | {
        "artifacts": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(shared)},
        }
    }
    assert attempt_publish_artifacts(finished) > 0
    published = shared / finished.artifacts_dir / "workspace/repo"
    assert (published / "planted").read_text() == "planted\n"
    assert [n for n in [*LINKS, "fifo"] if os.path.lexists(published / n)] == []
    assert [p for p in shared.rglob("*") if p.is_symlink()] == []

    # The reaper removes the workspace once it is no longer kept, never what a link names.
    (folder_of(finished.artifacts_dir) / KEEP_MARKER).unlink()
    assert leftovers_remove().workspaces == [finished.artifacts_dir]
    assert not workspace.exists()
    assert (sentinel / "secret.txt").read_text() == "host secret\n"
    assert Path("/etc/shadow").exists() and Path("/etc/hostname").exists()
