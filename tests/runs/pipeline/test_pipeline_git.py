"""Getting the code: clone from every kind of source, pin the commit, time out, and never run
anything shipped with a repository or set in the user's git configuration."""

from __future__ import annotations

import socket
import stat
import subprocess
import threading
from pathlib import Path

import pytest

from runs.models import AttemptStatus
from tests.support.pipeline_fixtures import (
    attempt_folder,
    get_task,
    git_repo,
    import_tasks,
    run_attempt,
    write_task,
)

pytestmark = [pytest.mark.django_db, pytest.mark.docker]

# Valid baseline (exit 1) only when the pinned first commit is checked out, not the tip.
PINNED_CHECK = "grep -q first version.txt && exit 1 || exit 0"


def two_commit_repo(folder: Path) -> str:
    first = git_repo(folder, {"version.txt": "first\n"})
    (folder / "version.txt").write_text("second\n")
    subprocess.run(
        [
            "git",
            "-C",
            str(folder),
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@e.invalid",
            "commit",
            "-q",
            "-am",
            "second",
        ],
        check=True,
    )
    return first


def task_for(tmp_path: Path, task_id: str, url: str, commit: str, command: str = PINNED_CHECK):
    write_task(
        tmp_path / "tasks",
        task_id,
        f"""
        repo: {{url: "{url}", commit: "{commit}"}}
        environment: {{docker_image: agentbench/py-runner:0.1.0, timeout_sec: 20}}
        run: {{command: "{command}"}}
        validation: {{check_flaky: false}}
        """,
    )
    import_tasks(tmp_path / "tasks", also=[tmp_path])
    return get_task(task_id, "pipeline-test")


@pytest.mark.parametrize("kind", ["path", "file_url", "bundle"])
def test_it_clones_local_sources_at_the_pinned_commit(kind, tmp_path, artifacts_root):
    source = tmp_path / "src-repo"
    first = two_commit_repo(source)
    url = {
        "path": str(source),
        "file_url": f"file://{source}",
        "bundle": str(tmp_path / "repo.bundle"),
    }[kind]
    if kind == "bundle":
        subprocess.run(
            ["git", "-C", str(source), "bundle", "create", "-q", url, "main"], check=True
        )

    attempt = run_attempt(task_for(tmp_path, f"src_{kind}", url, first), backend="docker")

    assert attempt.failure_reason_id is None, attempt.error_text
    checkout = (attempt_folder(attempt) / "logs/git_checkout.txt").read_text()
    assert f"HEAD is {first}" in checkout


@pytest.mark.parametrize(
    # A local path inside the tasks folder that holds no repository, and an unknown server.
    "url",
    ["../missing/repo.git", "https://example.invalid/nobody/nothing.git"],
)
def test_a_bad_url_is_git_clone_failed(url, tmp_path, artifacts_root):
    attempt = run_attempt(task_for(tmp_path, "bad_url", url, "0" * 40), backend="docker")

    assert attempt.status == AttemptStatus.FINISHED
    assert attempt.failure_reason_id == "GIT_CLONE_FAILED"
    assert attempt.failure_stage == "git_clone"
    assert attempt.is_infra is True
    assert attempt.exit_code == 128
    assert list(attempt.stages.values_list("name", flat=True)) == ["git_clone"]
    assert "fatal:" in attempt.error_text
    assert "fatal:" in (attempt_folder(attempt) / "logs/git_clone.txt").read_text()


@pytest.mark.parametrize("commit", ["1234567890abcdef1234567890abcdef12345678", "no-such-branch"])
def test_a_bad_commit_is_git_checkout_failed(commit, tmp_path, artifacts_root):
    source = tmp_path / "src-repo"
    two_commit_repo(source)

    attempt = run_attempt(task_for(tmp_path, "bad_commit", str(source), commit), backend="docker")

    assert attempt.failure_reason_id == "GIT_CHECKOUT_FAILED"
    assert attempt.failure_stage == "git_checkout"
    assert attempt.is_infra is True
    assert list(attempt.stages.values_list("name", flat=True)) == ["git_clone", "git_checkout"]


def test_a_clone_that_hangs_times_out(tmp_path, settings, artifacts_root):
    # A server that accepts the connection and never answers: git waits until we kill it.
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    held = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    settings.GIT_CLONE_TIMEOUT_SEC = 2
    try:
        task = task_for(tmp_path, "hang", f"git://127.0.0.1:{port}/repo.git", "0" * 40)
        attempt = run_attempt(task, backend="docker")
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        server.close()

    assert held, "git never connected"
    assert attempt.failure_reason_id == "TIMEOUT"
    assert attempt.failure_stage == "git_clone"
    assert attempt.is_timeout is True
    assert attempt.exit_code == 124
    assert attempt.error_text.startswith("[timeout] TIMEOUT in git_clone")
    assert attempt.duration_sec < 30


def test_no_hook_runs_on_the_host(tmp_path, monkeypatch, artifacts_root):
    marker = tmp_path / "hook-ran"
    hooks = tmp_path / "evil-hooks"
    hooks.mkdir()
    for name in ("post-checkout", "post-merge", "reference-transaction", "pre-commit"):
        hook = hooks / name
        hook.write_text(f"#!/bin/sh\necho {name} >> {marker}\n")
        hook.chmod(hook.stat().st_mode | stat.S_IEXEC)
    template = tmp_path / "template"
    (template / "hooks").mkdir(parents=True)
    for hook in hooks.iterdir():
        (template / "hooks" / hook.name).write_bytes(hook.read_bytes())
        (template / "hooks" / hook.name).chmod(0o755)
    gitconfig = tmp_path / "gitconfig"
    gitconfig.write_text(f"[core]\n\thooksPath = {hooks}\n")
    # What a user's environment or a hostile machine might set: none of it may take effect.
    monkeypatch.setenv("GIT_TEMPLATE_DIR", str(template))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
    source = tmp_path / "src-repo"
    first = two_commit_repo(source)
    # The hook must really run when git is not locked down, or this test proves nothing.
    probe = tmp_path / "probe"
    subprocess.run(["git", "clone", "-q", str(source), str(probe)], check=True)
    assert marker.exists()
    marker.unlink()

    attempt = run_attempt(task_for(tmp_path, "hooks", str(source), first), backend="docker")

    assert attempt.failure_reason_id is None, attempt.error_text
    assert not marker.exists()
