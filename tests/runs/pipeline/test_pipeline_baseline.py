"""Baseline validation through the real pipeline on both sandbox backends: every custom-dev
task ends with its expected reason, its stages and artifacts recorded, nothing left behind."""

from __future__ import annotations

import pytest

from runs.models import AttemptStage, AttemptStatus
from tests.support.pipeline_fixtures import (
    TOY_COMMIT,
    attempt_folder,
    get_task,
    import_tasks,
    leftover_containers,
    leftover_processes,
    run_attempt,
    run_json,
    write_task,
)

pytestmark = [pytest.mark.django_db, pytest.mark.docker, pytest.mark.bwrap]

# task -> (reason, failure stage, stage rows in order)
EXPECTED = {
    "toy_fail_pytest": (
        None,
        "",
        ["git_clone", "git_checkout", "setup", "baseline_run", "baseline_rerun"],
    ),
    "toy_baseline_passes": (
        "BASELINE_NOT_FAILING",
        "baseline_run",
        ["git_clone", "git_checkout", "baseline_run", "baseline_rerun"],
    ),
    "toy_setup_fails": ("SETUP_FAILED", "setup", ["git_clone", "git_checkout", "setup"]),
    "toy_setup_hangs": ("SETUP_TIMEOUT", "setup", ["git_clone", "git_checkout", "setup"]),
    "toy_tests_hang": ("TIMEOUT", "baseline_run", ["git_clone", "git_checkout", "baseline_run"]),
    "toy_no_tests": (
        "NO_TESTS_COLLECTED",
        "baseline_run",
        ["git_clone", "git_checkout", "baseline_run"],
    ),
}

LOG_FILES = {
    "git_clone": "logs/git_clone.txt",
    "git_checkout": "logs/git_checkout.txt",
    "setup": "logs/setup.txt",
    "baseline_run": "logs/baseline.txt",
    "baseline_rerun": "logs/baseline_rerun.txt",
}


@pytest.mark.parametrize("task_id", sorted(EXPECTED))
def test_each_custom_dev_task_gets_its_expected_outcome(task_id, backend, artifacts_root):
    import_tasks()
    reason, stage, stage_names = EXPECTED[task_id]

    attempt = run_attempt(get_task(task_id), backend=backend)

    assert attempt.status == AttemptStatus.FINISHED
    assert attempt.failure_reason_id == reason, attempt.error_text
    assert attempt.failure_stage == stage
    assert attempt.finished_at is not None and attempt.duration_sec > 0
    # Every failure before an agent runs is the harness's or the task's, never the agent's.
    assert attempt.is_infra is (reason is not None)
    assert attempt.is_timeout is (reason in ("TIMEOUT", "SETUP_TIMEOUT"))
    if attempt.is_timeout:
        assert attempt.error_text.startswith("[timeout] ")
    if reason:
        assert attempt.error_text.split(" ", 2)[:2] != ["", ""]
        assert reason in attempt.error_text
        assert attempt.error_fingerprint == attempt.error_fingerprint.lower()
        assert 0 < len(attempt.error_fingerprint) <= 200

    rows = list(AttemptStage.objects.filter(attempt=attempt).order_by("order"))
    assert [r.name for r in rows] == stage_names
    folder = attempt_folder(attempt)
    assert folder.is_relative_to(artifacts_root)
    assert not attempt.artifacts_dir.startswith("/")
    for row in rows:
        assert row.output_path == LOG_FILES[row.name]
        log = (folder / row.output_path).read_text()
        assert f"$ {row.command.splitlines()[0]}" in log
        assert row.duration_sec is not None

    record = run_json(attempt)
    assert record["schema_version"] == "1.0.0"
    assert record["kind"] == "attempt"
    assert record["provenance"]["harness_version"] == "0.1.0"
    assert len(record["provenance"]["git_revision"]) == 40
    assert "django" in record["provenance"]["package_versions"]
    assert record["task"]["task_id"] == task_id
    assert record["task"]["repo_commit"] == TOY_COMMIT
    assert record["model"]["agent_variant"] == "baseline"
    assert record["sandbox"]["backend"] == backend
    assert [s["name"] for s in record["stages"]] == stage_names
    assert record["outcome"]["failure_reason"] == reason
    assert record["outcome"]["success"] is (reason is None)
    assert record["baseline"]["flaky_baseline"] is False

    # Nothing left behind: no workspace, no container, no process of the attempt.
    assert not (folder / "workspace").exists()
    assert leftover_processes(attempt) == []
    if backend == "docker":
        assert leftover_containers(attempt) == []


def test_a_valid_baseline_records_the_failing_test_and_both_runs(backend, artifacts_root):
    import_tasks()

    attempt = run_attempt(get_task("toy_fail_pytest"), backend=backend)

    assert attempt.resolved
    assert attempt.exit_code == 1
    baseline = (attempt_folder(attempt) / "logs/baseline.txt").read_text()
    assert "FAILED tests/test_calc.py::test_mean_of_odd_total" in baseline
    assert "# sandbox: exit 1 in" in baseline
    record = run_json(attempt)
    assert record["baseline"] == {
        "ran": True,
        "valid": True,
        "exit_codes": [1, 1],
        "reruns": 1,
        "flaky_baseline": False,
        "note": "",
    }


def test_two_disagreeing_baseline_runs_are_flagged_flaky(tmp_path, backend, artifacts_root):
    # The first run leaves a mark in the workspace and fails; the second sees it and passes.
    write_task(
        tmp_path / "tasks",
        "flip",
        f"""
        repo: {{url: {get_bundle()}, commit: {TOY_COMMIT}}}
        environment: {{docker_image: agentbench/py-runner:0.1.0, timeout_sec: 30}}
        run: {{command: "test -e /workspace/mark || {{ touch /workspace/mark; exit 1; }}"}}
        """,
    )
    import_tasks(tmp_path / "tasks")

    attempt = run_attempt(get_task("flip", "pipeline-test"), backend=backend)

    record = run_json(attempt)
    assert record["baseline"]["flaky_baseline"] is True
    assert record["baseline"]["exit_codes"] == [1, 0]
    # The first run decides the outcome; the flag says not to trust it.
    assert attempt.failure_reason_id is None
    rerun = (attempt_folder(attempt) / "logs/baseline_rerun.txt").read_text()
    assert "flaky baseline" in rerun


def test_setup_that_dirties_the_tree_fails_unless_allowed(tmp_path, backend, artifacts_root):
    for task_id, enforce in (("dirty", "true"), ("dirty_ok", "false")):
        write_task(
            tmp_path / "tasks",
            task_id,
            f"""
            repo: {{url: {get_bundle()}, commit: {TOY_COMMIT}}}
            environment: {{docker_image: agentbench/py-runner:0.1.0, timeout_sec: 30}}
            setup: {{commands: ["echo junk > src/toy/generated.txt"], network: false}}
            run: {{command: PYTHONPATH=src python -m pytest -q tests/test_calc.py}}
            validation: {{enforce_clean_setup: {enforce}, check_flaky: false}}
            """,
        )
    import_tasks(tmp_path / "tasks")

    dirty = run_attempt(get_task("dirty", "pipeline-test"), backend=backend)
    allowed = run_attempt(get_task("dirty_ok", "pipeline-test"), backend=backend)

    assert dirty.failure_reason_id == "SETUP_FAILED"
    assert "setup changed the working tree" in dirty.error_text
    assert "src/toy/generated.txt" in dirty.error_text
    assert allowed.failure_reason_id is None, allowed.error_text


def test_validation_expectations_are_honoured(tmp_path, backend, artifacts_root):
    common = (
        f"repo: {{url: {get_bundle()}, commit: {TOY_COMMIT}}}\n"
        "environment: {docker_image: agentbench/py-runner:0.1.0, timeout_sec: 30}\n"
        "run: {command: PYTHONPATH=src python -m pytest -q tests/test_calc.py}\n"
    )
    cases = {
        "wrong_code": "validation: {expected_exit_codes: [3], check_flaky: false}",
        "wrong_test": "validation: {expected_failing_tests: [tests/test_calc.py::test_total]}",
        "wrong_regex": "validation: {output_regex: 'no such line', check_flaky: false}",
        "all_right": (
            "validation: {expected_exit_codes: [1], check_flaky: false,"
            " expected_failing_tests: [tests/test_calc.py::test_mean_of_odd_total],"
            " output_regex: '^1 failed, 3 passed'}"
        ),
    }
    for task_id, validation in cases.items():
        write_task(tmp_path / "tasks", task_id, common + validation + "\n")
    import_tasks(tmp_path / "tasks")

    results = {
        task_id: run_attempt(get_task(task_id, "pipeline-test"), backend=backend)
        for task_id in cases
    }

    assert results["all_right"].failure_reason_id is None, results["all_right"].error_text
    assert "expected one of [3]" in results["wrong_code"].error_text
    assert "tests/test_calc.py::test_total" in results["wrong_test"].error_text
    assert "output_regex" in results["wrong_regex"].error_text
    for task_id in ("wrong_code", "wrong_test", "wrong_regex"):
        assert results[task_id].failure_reason_id == "BASELINE_NOT_FAILING"
        assert results[task_id].failure_stage == "baseline_run"


def get_bundle() -> str:
    from tests.conftest import REPO_ROOT

    return str(REPO_ROOT / "examples" / "toy_repo.bundle")


@pytest.mark.parametrize("backend", ["docker"])
def test_the_attempt_container_is_named_once_for_the_attempt(backend, artifacts_root):
    """ab-attempt-<public id>: the pipeline names the sandbox, the backend adds its prefix."""
    import time

    import docker

    import_tasks()
    since = time.time() - 1
    attempt = run_attempt(get_task("toy_fail_pytest"), backend=backend)
    client = docker.from_env()
    try:
        events = client.events(
            since=since,
            until=time.time() + 1,
            filters={"event": "create", "label": f"agentbench.attempt={attempt.public_id}"},
            decode=True,
        )
        names = [event["Actor"]["Attributes"]["name"] for event in events]
    finally:
        client.close()
    assert names == [f"ab-attempt-{attempt.public_id}"]
    assert run_json(attempt)["sandbox"]["name"] == f"attempt-{attempt.public_id}"
