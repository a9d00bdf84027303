"""``ab serve`` and ``ab worker`` as an operator runs them: real processes (gunicorn, Celery,
the reaper) on the embedded default (SQLite + the SQL-transport broker in a temp folder),
stopped with real signals. After each stop no process they started may be left."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from runs.models import Attempt, AttemptStatus
from tests.support.worker_stack import REPO_ROOT, create_stack, wait_until

pytestmark = [pytest.mark.slow]


@pytest.fixture
def stack(tmp_path, django_db_blocker):
    with django_db_blocker.unblock():
        stack = create_stack("sqlite+sqla", tmp_path, extra_env={"REQUEST_LOG_LEVEL": "INFO"})
        stack.connect()
        try:
            yield stack
        finally:
            stack.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_ab(stack, *args: str, shell_background: bool = False, env: dict | None = None):
    """Start ``ab ARGS`` with stdout and stderr in files; with ``shell_background`` as a
    background job of a non-interactive shell (which starts it with SIGINT ignored)."""
    out = open(stack.var_dir / "ab.out", "wb")  # noqa: SIM115 (kept by Popen)
    err = open(stack.var_dir / "ab.err", "wb")  # noqa: SIM115
    argv = [sys.executable, "-m", "benchsite.cli.main", *args]
    if shell_background:
        quoted = " ".join(f"'{a}'" for a in argv)
        argv = ["bash", "-c", f"{quoted} & echo $! > {stack.var_dir / 'ab.pid'}; wait"]
    proc = subprocess.Popen(
        argv,
        cwd=REPO_ROOT,
        env=stack.env | (env or {}),
        stdout=out,
        stderr=err,
        start_new_session=True,
    )
    if shell_background:
        pid = int(wait_until(lambda: _read(stack.var_dir / "ab.pid"), timeout=30, what="pid"))
    else:
        pid = proc.pid
    return proc, pid


def _read(path: Path) -> str:
    return path.read_text(errors="replace").strip() if path.exists() else ""


def wait_banner(stack, pid: int) -> None:
    """Wait for ``ab serve``'s banner; fail at once, with what it printed, if it exits first."""
    banner = stack.var_dir / "ab.out"
    try:
        wait_until(
            lambda: "AgentBench is up" in _read(banner) or _gone(pid),
            timeout=180,
            what="the banner",
        )
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{_printed(stack)}") from None
    assert "AgentBench is up" in _read(banner), (
        f"ab serve exited before its banner:\n{_printed(stack)}"
    )


def _printed(stack) -> str:
    out, err = _read(stack.var_dir / "ab.out"), _read(stack.var_dir / "ab.err")
    return f"--- ab.out ---\n{out[-4000:]}\n--- ab.err ---\n{err[-8000:]}"


def stop(pid: int, sig: signal.Signals) -> None:
    """Signal ``pid`` unless it is gone already (then the failure above says why)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def descendants(pid: int) -> dict[int, str]:
    """Every process below ``pid`` (by parent id), with its command line."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found: dict[int, str] = {}
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        for child, ppid in parents.items():
            if ppid == parent and child not in found:
                found[child] = cmdline(child)
                frontier.append(child)
    return found


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def still_running(processes: dict[int, str]) -> dict[int, str]:
    """Those of ``processes`` still alive (the same pid with the same command line)."""
    return {pid: cmd for pid, cmd in processes.items() if cmd and cmdline(pid) == cmd}


def wait_exit(proc: subprocess.Popen, pid: int, timeout: float = 90) -> None:
    wait_until(
        lambda: _gone(pid),
        timeout=timeout,
        what=f"ab (pid {pid}) to exit",
    )
    proc.wait(timeout=timeout)


def _gone(pid: int) -> bool:
    return not Path(f"/proc/{pid}").exists() or _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_it_serves_with_gunicorn_prints_the_url_last_and_stops_everything_on_sigterm(stack):
    port = free_port()
    proc, pid = start_ab(stack, "serve", "--addr", f"127.0.0.1:{port}")
    try:
        wait_banner(stack, pid)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as response:
            assert response.status == 200
            health = json.loads(response.read())
        assert health["database"]["ok"] and health["broker"]["ok"], health
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as response:
            assert response.status == 200
            assert response.headers["Server"].startswith("gunicorn")
        with urllib.request.urlopen(
            f"http://127.0.0.1:{port}/static/vendor/plotly-4.1.1.min.js", timeout=30
        ) as response:
            assert response.status == 200  # whitenoise, inside the production server
        children = descendants(pid)
        kinds = " ".join(children.values())
        assert "gunicorn" in kinds and "celery" in kinds and " reaper" in kinds, kinds
    finally:
        stop(pid, signal.SIGTERM)
        wait_exit(proc, pid)
    assert proc.returncode == 0
    assert still_running(children) == {}
    banner = _read(stack.var_dir / "ab.out").split("AgentBench is up", 1)[1]
    assert f"http://127.0.0.1:{port}/" in banner and "admin login" in banner
    assert "celery@" not in banner and "Booting worker" not in banner
    # Structured logs: one JSON object per request, on stderr.
    requests = [
        json.loads(line)
        for line in _read(stack.var_dir / "ab.err").splitlines()
        if line.startswith("{") and '"request"' in line
    ]
    home = [r for r in requests if r["path"] == "/"]
    assert home and home[0]["status"] == 200 and home[0]["method"] == "GET"
    assert isinstance(home[0]["ms"], float)


def test_it_stops_a_backgrounded_ab_serve_on_sigint(stack):
    port = free_port()
    proc, pid = start_ab(
        stack, "serve", "--addr", f"127.0.0.1:{port}", "--dev", shell_background=True
    )
    try:
        wait_banner(stack, pid)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as response:
            assert "WSGIServer" in response.headers["Server"]  # --dev: Django's own server
        children = descendants(pid)
        assert len(children) >= 3, children
    finally:
        stop(pid, signal.SIGINT)
        wait_exit(proc, pid)
    assert still_running(children) == {}


def test_it_leaves_no_celery_process_after_sigterm_to_ab_worker(stack):
    proc, pid = start_ab(stack, "worker", "--beat", "--concurrency", "2")
    try:
        # The Celery main process, its two pool processes and the reaper.
        wait_until(lambda: len(descendants(pid)) >= 4, timeout=120, what="the worker processes")
        children = descendants(pid)
    finally:
        stop(pid, signal.SIGTERM)
        wait_exit(proc, pid)
    assert proc.returncode == 0
    assert sum("celery" in cmd for cmd in children.values()) >= 3, children
    assert still_running(children) == {}


def test_it_hands_back_a_running_attempt_from_a_clean_workspace_when_stopped(stack):
    out = stack.ab("run-suite", "custom-dev", "--variant", "nop", "--task", "toy_setup_hangs")
    public_id = out.stdout.split("run ", 1)[1].split(":", 1)[0]
    attempt = Attempt.objects.using(stack.alias).get(run__public_id=public_id)
    # No grace: the worker is killed at once, mid-setup, and the attempt goes back.
    proc, pid = start_ab(stack, "worker", env={"WORKER_SHUTDOWN_GRACE_SEC": "0"})
    try:
        workspace = wait_until(
            lambda: _workspace_of(stack, attempt.pk), timeout=120, what="the workspace"
        )
        children = descendants(pid)
    finally:
        stop(pid, signal.SIGTERM)
        wait_exit(proc, pid)
    assert still_running(children) == {}
    assert "handed back 1 attempt(s)" in _read(stack.var_dir / "ab.out")
    attempt.refresh_from_db()
    assert attempt.status == AttemptStatus.QUEUED and attempt.requeue_count == 0
    outcome = attempt.stages.using(stack.alias).get(name="try 1: outcome")
    assert "handed back" in outcome.command
    assert not workspace.exists()  # the stopped try's workspace is gone, its logs stay
    assert (workspace.parent / "logs").is_dir() or (workspace.parent / "run.json").exists()

    stack.start_worker("w2")
    wait_until(
        lambda: Attempt.objects.using(stack.alias).get(pk=attempt.pk).is_final,
        timeout=180,
        what="the handed-back attempt to finish",
    )
    attempt.refresh_from_db()
    assert attempt.failure_reason_id == "SETUP_TIMEOUT"
    assert attempt.artifacts_dir.endswith("__try2")


def _workspace_of(stack, attempt_pk: int) -> Path | None:
    row = Attempt.objects.using(stack.alias).get(pk=attempt_pk)
    if row.status != AttemptStatus.RUNNING or not row.artifacts_dir:
        return None
    workspace = Path(stack.env["ARTIFACTS_ROOT"]) / row.artifacts_dir / "workspace"
    return workspace if (workspace / ".git").exists() or any(workspace.glob("*/.git")) else None
