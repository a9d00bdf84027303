"""``ab run-suite``, ``cancel-run``, ``retry-run``, ``resume-run`` through the real console
script on the embedded default (SQLite database and SQL-transport broker in a temp folder).
No worker runs here: these check launching, bad input and control of queued work; the
attempts themselves run in tests/runs/workers/test_run_workers.py."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT
from tests.support.ab_cli import ab as run_ab
from tests.support.ab_cli import ab_env


@pytest.fixture
def ab(tmp_path):
    """``ab`` in processes of their own sharing one fresh folder (database and broker)."""
    var = tmp_path / "var"

    def _ab(*args: str) -> subprocess.CompletedProcess:
        return run_ab(*args, var_dir=var, timeout=120)

    _ab.var = var  # type: ignore[attr-defined]
    return _ab


def queued_messages(var) -> int:
    with sqlite3.connect(var / "broker.sqlite3") as db:
        return db.execute("select count(*) from kombu_message where visible = 1").fetchone()[0]


def attempt_statuses(var, run_id: str) -> list[str]:
    with sqlite3.connect(var / "db.sqlite3") as db:
        rows = db.execute(
            "select a.status from runs_attempt a join runs_run r on a.run_id = r.id "
            "where r.public_id = ? order by a.id",
            (run_id.replace("-", ""),),
        )
        return [status for (status,) in rows]


def launched_id(out: subprocess.CompletedProcess) -> str:
    assert out.returncode == 0, out.stderr
    return out.stdout.split("run ", 1)[1].split(":", 1)[0]


def test_it_launches_a_run_on_a_fresh_database_and_queues_one_message_per_attempt(ab):
    out = ab("run-suite", "custom-dev", "--variant", "scripted", "--samples", "2")
    run_id = launched_id(out)
    assert "imported tasks from" in out.stdout
    assert "12 attempt(s) queued" in out.stdout
    assert attempt_statuses(ab.var, run_id) == ["queued"] * 12
    assert queued_messages(ab.var) == 12


@pytest.mark.slow
def test_cancel_retry_and_resume_steer_queued_work(ab):
    run_id = launched_id(
        ab("run-suite", "custom-dev", "--variant", "nop", "--task", "toy_no_tests")
    )
    out = ab("cancel-run", run_id[:8])
    assert out.returncode == 0 and "1 queued attempt(s) cancelled" in out.stdout
    assert attempt_statuses(ab.var, run_id) == ["cancelled"]
    out = ab("cancel-run", run_id)
    assert "already cancelled" in out.stdout

    out = ab("retry-run", run_id)
    assert out.returncode == 0 and "1 attempt(s) queued again" in out.stdout
    assert attempt_statuses(ab.var, run_id) == ["queued"]
    out = ab("resume-run", run_id)
    assert out.returncode == 0 and "re-sent 1 queued attempt(s)" in out.stdout
    assert queued_messages(ab.var) == 3  # launch, retry, resume: duplicates are harmless


BAD_INPUT = [
    (("run-suite", "nope", "--variant", "scripted"), "no suite named 'nope'"),
    (("run-suite", "custom-dev", "--variant", "scripted", "--samples", "0"), "--samples"),
    (
        ("run-suite", "custom-dev", "--variant", "scripted", "--task", "ghost"),
        "task_ids: not in suite custom-dev: ghost",
    ),
    (("run-suite", "custom-dev", "--variant", "scripted", "--labels", "zzz"), "no task"),
    (("cancel-run", "00000000-0000-0000-0000-000000000000"), "no run with id"),
    (("retry-run", "abc"), "no run with id 'abc'"),
]


@pytest.mark.slow
def test_it_names_what_is_wrong_in_one_line_and_stores_nothing(ab):
    for args, message in BAD_INPUT:
        out = ab(*args)
        assert out.returncode == 1, args
        last_line = out.stderr.strip().splitlines()[-1]
        assert message in last_line and last_line.startswith(f"ab {args[0]}: "), last_line
        assert "Traceback" not in out.stderr
    with sqlite3.connect(ab.var / "db.sqlite3") as db:
        assert db.execute("select count(*) from runs_run").fetchone() == (0,)


def test_a_bad_variant_is_refused_by_the_parser(ab):
    out = ab("run-suite", "custom-dev", "--variant", "gpt")
    assert out.returncode == 2 and "invalid choice: 'gpt'" in out.stderr


@pytest.mark.slow  # a worker running two attempts in a sandbox (either backend)
def test_ab_worker_runs_what_run_suite_queued(ab):
    # Migrate first: two `ab` processes migrating one fresh SQLite file at once collide.
    assert ab("import-tasks", str(REPO_ROOT / "tasks")).returncode == 0
    worker = subprocess.Popen(
        [sys.executable, "-m", "benchsite.cli.main", "worker", "--concurrency", "1", "--beat"],
        cwd=REPO_ROOT,
        env=ab_env(ab.var),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        out = ab(
            "run-suite",
            "custom-dev",
            "--variant",
            "nop",
            "--task",
            "toy_no_tests",
            "--task",
            "toy_baseline_passes",
            "--wait",
            "--poll",
            "0.5",
        )
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=60)
    assert out.returncode == 0, out.stderr
    assert "NO_TESTS_COLLECTED" in out.stdout and "BASELINE_NOT_FAILING" in out.stdout
    assert out.stdout.rstrip().endswith("finished")
    run_id = launched_id(out)
    assert attempt_statuses(ab.var, run_id) == ["finished", "finished"]
