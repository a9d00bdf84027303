"""``ab run-task``, ``ab validate-suite`` and ``ab doctor`` through the real console entry."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import TASKS_DIR
from tests.support.ab_cli import ab

pytestmark = [pytest.mark.docker, pytest.mark.bwrap, pytest.mark.slow]


def query(tmp_path: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(tmp_path / "var" / "db.sqlite3") as db:
        return db.execute(sql).fetchall()


def test_run_task_prints_the_result_and_the_artifact_folder(tmp_path):
    task = TASKS_DIR / "custom-dev" / "toy_fail_pytest" / "task.yaml"

    out = ab(
        "run-task",
        str(task),
        "--backend",
        "bwrap",
        var_dir=tmp_path / "var",
        env={"ARTIFACTS_ROOT": str(tmp_path / "artifacts")},
    )

    assert out.returncode == 0, out.stdout + out.stderr
    assert "result: OK (valid baseline" in out.stdout
    for stage in ("git_clone", "git_checkout", "setup", "baseline_run", "baseline_rerun"):
        assert re.search(rf"^{stage}\s", out.stdout, re.MULTILINE), stage
    folder = Path(re.search(r"^artifacts: (.+)$", out.stdout, re.MULTILINE).group(1))
    assert folder.is_relative_to(tmp_path / "artifacts")
    record = json.loads((folder / "run.json").read_text())
    assert record["outcome"]["success"] is True
    assert record["sandbox"]["backend"] == "bwrap"
    assert (folder / "logs" / "baseline.txt").exists()
    assert query(tmp_path, "select status, failure_reason_id from runs_attempt") == [
        ("finished", None)
    ]
    assert query(tmp_path, "select status, source from runs_run") == [("finished", "validation")]


def test_run_task_with_out_writes_there_and_exits_1_on_an_invalid_baseline(tmp_path):
    task = TASKS_DIR / "custom-dev" / "toy_baseline_passes" / "task.yaml"
    out_dir = tmp_path / "elsewhere"

    out = ab(
        "run-task",
        str(task),
        "--out",
        str(out_dir),
        "--backend",
        "docker",
        var_dir=tmp_path / "var",
        env={"ARTIFACTS_ROOT": str(tmp_path / "artifacts")},
    )

    assert out.returncode == 1, out.stdout + out.stderr
    assert "result: BASELINE_NOT_FAILING in baseline_run (infrastructure)" in out.stdout, (
        out.stdout + out.stderr
    )
    folder = Path(re.search(r"^artifacts: (.+)$", out.stdout, re.MULTILINE).group(1))
    assert folder.is_relative_to(out_dir)
    assert (folder / "run.json").exists()
    # Stored as an absolute path, since it is not under ARTIFACTS_ROOT.
    [(artifacts_dir,)] = query(tmp_path, "select artifacts_dir from runs_attempt")
    assert artifacts_dir == str(folder)


def test_run_task_names_the_bad_field_of_a_broken_task_file(tmp_path):
    bad = tmp_path / "bad" / "task.yaml"
    bad.parent.mkdir()
    bad.write_text('task_spec_version: "1.0"\nid: bad\nsuite: s\nrun: {command: x}\n')

    out = ab(
        "run-task",
        str(bad),
        var_dir=tmp_path / "var",
        env={"ARTIFACTS_ROOT": str(tmp_path / "artifacts")},
    )

    assert out.returncode == 1
    assert "repo: required field is missing" in out.stderr
    assert "environment: required field is missing" in out.stderr


def test_validate_suite_runs_every_task_and_writes_a_run_folder(tmp_path):
    out_dir = tmp_path / "validation"

    out = ab(
        "validate-suite",
        "custom-dev",
        "--tasks",
        str(TASKS_DIR),
        "--out",
        str(out_dir),
        "--backend",
        "bwrap",
        var_dir=tmp_path / "var",
        env={"ARTIFACTS_ROOT": str(tmp_path / "artifacts")},
    )

    assert out.returncode == 0, out.stdout + out.stderr
    # Progress as it goes, then the summary table.
    assert "[1/6] toy_baseline_passes ..." in out.stdout
    expected = {
        "toy_fail_pytest": "valid",
        "toy_baseline_passes": "BASELINE_NOT_FAILING",
        "toy_setup_fails": "SETUP_FAILED",
        "toy_setup_hangs": "SETUP_TIMEOUT",
        "toy_tests_hang": "TIMEOUT",
        "toy_no_tests": "NO_TESTS_COLLECTED",
        "toy_flaky": "skipped",
    }
    for task_id, verdict in expected.items():
        assert re.search(rf"^{task_id}\s+{verdict}\b", out.stdout, re.MULTILINE), task_id
    assert "1 valid, 5 invalid, 1 skipped of 7 task(s)" in out.stdout
    [run_dir] = list(out_dir.iterdir())
    assert re.fullmatch(r"\d{8}T\d{6}Z__custom-dev__baseline", run_dir.name)
    assert f"run folder: {run_dir}" in out.stdout
    summary = json.loads((run_dir / "run.json").read_text())
    assert summary["kind"] == "suite_validation"
    assert summary["summary"] == {"valid": 1, "invalid": 5, "skipped": 1, "total": 7}
    assert {t["task_id"]: t["verdict"] for t in summary["tasks"]} == expected
    # An invalid task explains itself: the first error of its logs.
    notes = {t["task_id"]: t["note"] for t in summary["tasks"]}
    assert (
        "first error (logs/setup.txt): ModuleNotFoundError: No module named "
        "'toy_helpers_that_do_not_exist'" in notes["toy_setup_fails"]
    ), notes
    assert (run_dir / "toy_setup_fails__0" / "logs" / "setup.txt").exists()
    stored = dict(
        query(
            tmp_path,
            "select t.task_id, a.status || ':' || coalesce(a.failure_reason_id, '') "
            "from runs_attempt a join tasks_app_task t on t.id = a.task_id",
        )
    )
    assert stored["toy_flaky"] == "skipped:"
    assert stored["toy_fail_pytest"] == "finished:"
    assert stored["toy_tests_hang"] == "finished:TIMEOUT"


def test_validate_suite_says_when_a_suite_has_no_tasks(tmp_path):
    out = ab(
        "validate-suite",
        "nope",
        "--tasks",
        str(TASKS_DIR),
        var_dir=tmp_path / "var",
        env={"ARTIFACTS_ROOT": str(tmp_path / "artifacts")},
    )

    assert out.returncode == 1
    assert "no tasks of suite 'nope'" in out.stderr


def test_doctor_checks_everything_and_passes_here(tmp_path):
    out = ab(
        "doctor", var_dir=tmp_path / "var", env={"ARTIFACTS_ROOT": str(tmp_path / "artifacts")}
    )

    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    for check in (
        "Docker engine reachable",
        "runner image agentbench/py-runner:0.1.0 present",
        "bubblewrap works",
        "sandbox user has no host account (uid 64000)",
        "sandbox disk quota can be made (10240 MiB per sandbox",
        "network isolation holds (docker: only lo, host unreachable with network, "
        "bwrap: only lo, host unreachable with network)",
        "smoke task toy_fail_pytest baseline",
    ):
        assert any(line.startswith(f"OK    {check}") for line in lines), check
    assert lines[-1] == "all checks passed"


def test_doctor_says_what_to_do_when_the_runner_image_is_missing(tmp_path):
    out = ab(
        "doctor",
        var_dir=tmp_path / "var",
        env={"ARTIFACTS_ROOT": str(tmp_path / "artifacts"), "SANDBOX_IMAGE": "agentbench/absent:0"},
    )

    assert out.returncode == 1
    assert "FAIL  runner image agentbench/absent:0 present" in out.stdout
    assert "bash docker/py-runner/build-offline.sh agentbench/absent:0" in out.stdout
    assert "OK    Docker engine reachable" in out.stdout
