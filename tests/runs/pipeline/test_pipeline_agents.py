"""The agent stage and the final test run through the real pipeline, and how an attempt ends
when it is cancelled, interrupted or hits an error: always in a final state."""

from __future__ import annotations

import threading

import pytest
from billiard.exceptions import SoftTimeLimitExceeded

from runs.models import Attempt, AttemptStage, AttemptStatus
from runs.pipeline.adhoc import attempt_create_adhoc, model_config_for_variant
from runs.pipeline.execute import attempt_execute
from tests.conftest import TASKS_DIR
from tests.support.pipeline_fixtures import (
    TOY_COMMIT,
    attempt_folder,
    get_task,
    import_tasks,
    leftover_containers,
    run_attempt,
    run_json,
    write_task,
)

pytestmark = [pytest.mark.django_db, pytest.mark.docker, pytest.mark.bwrap]

SOLUTION = (TASKS_DIR / "custom-dev" / "toy_fail_pytest" / "solution.patch").read_text()
BUNDLE = TASKS_DIR.parent / "examples" / "toy_repo.bundle"


def test_the_oracle_solves_the_toy_task_and_the_patch_is_kept(backend, artifacts_root):
    import_tasks()

    attempt = run_attempt(get_task("toy_fail_pytest"), variant="oracle", backend=backend)

    assert attempt.status == AttemptStatus.FINISHED
    assert attempt.failure_reason_id is None, attempt.error_text
    assert attempt.exit_code == 0
    stages = list(attempt.stages.order_by("order").values_list("name", flat=True))
    # No flakiness re-run outside baseline validation: the agent attempt stays lean.
    assert stages == [
        "git_clone",
        "git_checkout",
        "setup",
        "baseline_run",
        "agent_run",
        "final_test",
    ]
    assert "+    return total(values) / len(values)" in attempt.final_patch
    assert attempt.steps is None  # the oracle calls no model
    assert attempt.lines_changed == 2
    assert attempt.files_touched == ["src/toy/calc.py"]
    folder = attempt_folder(attempt)
    assert (folder / "final.patch").read_text() == attempt.final_patch
    assert "4 passed" in (folder / "logs/final_test.txt").read_text()
    assert '"agent": "oracle"' in (folder / "logs/agent.txt").read_text()
    record = run_json(attempt)
    assert record["outcome"]["final_patch_path"] == "final.patch"
    assert record["outcome"]["files_touched"] == ["src/toy/calc.py"]
    assert record["stages"][-1]["name"] == "final_test"
    assert record["stages"][-1]["exit_code"] == 0


def test_the_scripted_agent_solves_the_toy_task(artifacts_root):
    import_tasks()

    attempt = run_attempt(get_task("toy_fail_pytest"), variant="scripted", backend="docker")

    assert attempt.failure_reason_id is None, attempt.error_text
    # Its tool calls are counted; it asks no model, so it has no figure of model calls.
    assert attempt.tool_calls >= 4 and attempt.steps is None
    assert attempt.tokens_in == 0 and attempt.cost_usd == 0


def test_an_agent_that_changes_nothing_fails_the_final_tests(artifacts_root):
    import_tasks()

    attempt = run_attempt(get_task("toy_fail_pytest"), variant="nop", backend="docker")

    assert attempt.status == AttemptStatus.FINISHED
    assert attempt.failure_reason_id in ("TESTS_FAILED", "AGENT_GAVE_UP")
    assert attempt.failure_stage in ("agent_run", "final_test")
    assert attempt.is_infra is False  # the agent's own result: it counts
    assert attempt.final_patch == ""
    assert attempt.lines_changed == 0 and attempt.files_touched == []
    assert attempt.stages.filter(name="final_test", exit_code=1).exists()


def test_a_misconfigured_llm_ends_as_a_permanent_llm_error(artifacts_root):
    import_tasks()
    config = model_config_for_variant("llm", name="llm-without-model")
    attempt = attempt_create_adhoc(task=get_task("toy_fail_pytest"), model_config=config)

    attempt = attempt_execute(attempt, backend="docker")

    assert attempt.failure_reason_id == "LLM_ERROR"
    assert attempt.failure_stage == "agent_run"
    assert attempt.error_kind == "permanent"
    assert attempt.is_infra is True
    assert attempt.error_text.startswith("LLM_ERROR in agent_run: [llm-permanent]")


@pytest.mark.parametrize(
    ("patch", "reason"), [(SOLUTION, None), ("this is not a patch\n", "TOOL_ERROR")]
)
def test_an_imported_prediction_is_applied_and_tested(patch, reason, artifacts_root):
    import_tasks()
    config = model_config_for_variant("external", name="predictions")
    attempt = attempt_create_adhoc(task=get_task("toy_fail_pytest"), model_config=config)
    Attempt.objects.filter(pk=attempt.pk).update(final_patch=patch)
    attempt.refresh_from_db()

    attempt = attempt_execute(attempt, backend="docker")

    assert attempt.failure_reason_id == reason, attempt.error_text
    if reason is None:
        assert attempt.files_touched == ["src/toy/calc.py"]
    # One tool call (the patch's application) and no model call: no figure of calls, which
    # the leaderboard shows as "—" rather than a rate of calls the agent never made.
    assert (attempt.tool_calls, attempt.steps) == (1, None)


def test_a_cancel_between_stages_ends_the_attempt_cancelled(artifacts_root):
    import_tasks()
    attempt = attempt_create_adhoc(
        task=get_task("toy_fail_pytest"), model_config=model_config_for_variant("baseline")
    )
    checks = []

    def should_cancel() -> bool:
        checks.append(1)
        return len(checks) >= 3  # clone and checkout pass; stop before setup

    attempt = attempt_execute(attempt, backend="docker", should_cancel=should_cancel)

    assert attempt.status == AttemptStatus.CANCELLED
    assert attempt.failure_reason_id == "INTERRUPTED"
    assert attempt.failure_stage == "setup"
    assert attempt.is_infra is True
    assert list(attempt.stages.values_list("name", flat=True)) == [
        "git_clone",
        "git_checkout",
        "setup",
    ]
    assert not (attempt_folder(attempt) / "workspace").exists()
    assert run_json(attempt)["outcome"]["status"] == "cancelled"


def test_heartbeat_is_called_between_stages(artifacts_root):
    import_tasks()
    beats = []

    attempt = run_attempt(
        get_task("toy_fail_pytest"), backend="docker", heartbeat=lambda: beats.append(1)
    )

    assert attempt.resolved
    assert len(beats) >= 4  # before clone, checkout, setup, baseline (and the re-run)


def test_heartbeat_keeps_beating_during_a_long_command(settings, artifacts_root):
    import_tasks()
    settings.ATTEMPT_HEARTBEAT_SEC = 1
    threads = []

    attempt = run_attempt(
        get_task("toy_tests_hang"),  # its test command runs into a 4 s timeout
        backend="bwrap",
        heartbeat=lambda: threads.append(threading.current_thread().name),
    )

    assert attempt.failure_reason_id == "TIMEOUT"
    assert threads.count("attempt-heartbeat") >= 2, threads


def test_ctrl_c_is_recorded_as_interrupted_then_raised(artifacts_root):
    import_tasks()
    attempt = attempt_create_adhoc(
        task=get_task("toy_fail_pytest"), model_config=model_config_for_variant("baseline")
    )
    beats = []

    def heartbeat() -> None:
        beats.append(1)
        if len(beats) == 4:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        attempt_execute(attempt, backend="docker", heartbeat=heartbeat)

    attempt.refresh_from_db()
    assert attempt.status == AttemptStatus.CANCELLED
    assert attempt.failure_reason_id == "INTERRUPTED"
    assert attempt.failure_stage == "baseline_run"
    assert leftover_containers(attempt) == []


def test_a_worker_time_limit_is_recorded_as_a_timeout(artifacts_root):
    import_tasks()
    attempt = attempt_create_adhoc(
        task=get_task("toy_fail_pytest"), model_config=model_config_for_variant("baseline")
    )

    def heartbeat() -> None:
        if attempt.stages.count() >= 2:
            raise SoftTimeLimitExceeded()

    attempt = attempt_execute(attempt, backend="docker", heartbeat=heartbeat)

    assert attempt.status == AttemptStatus.FINISHED
    assert attempt.failure_reason_id == "TIMEOUT"
    assert attempt.is_timeout is True
    assert attempt.error_text.startswith("[timeout] ")


def test_a_missing_image_is_a_sandbox_error(tmp_path, artifacts_root):
    write_task(
        tmp_path / "tasks",
        "no_image",
        f"""
        repo: {{url: {BUNDLE}, commit: {TOY_COMMIT}}}
        environment: {{docker_image: "agentbench/does-not-exist:0", timeout_sec: 30}}
        run: {{command: "python -m pytest -q"}}
        """,
    )
    import_tasks(tmp_path / "tasks")

    attempt = run_attempt(get_task("no_image", "pipeline-test"), backend="docker")

    assert attempt.status == AttemptStatus.FINISHED
    assert attempt.failure_reason_id == "SANDBOX_ERROR"
    assert attempt.failure_stage == "setup"
    assert attempt.is_infra is True
    assert "agentbench/does-not-exist:0" in attempt.error_text
    assert leftover_containers(attempt) == []


def test_an_unexpected_error_is_unknown_with_its_traceback(tmp_path, artifacts_root):
    write_task(
        tmp_path / "tasks",
        "outside",
        f"""
        repo: {{url: {BUNDLE}, commit: {TOY_COMMIT}}}
        environment: {{docker_image: agentbench/py-runner:0.1.0}}
        run: {{command: "python -m pytest -q"}}
        """,
    )
    import_tasks(tmp_path / "tasks")
    # A task file cannot say this any more (the spec refuses it); a row still can, and the
    # pipeline's own check then raises.
    task = get_task("outside", "pipeline-test")
    type(task).objects.filter(pk=task.pk).update(workdir="/elsewhere")
    task.refresh_from_db()

    attempt = run_attempt(task, backend="docker")

    assert attempt.status == AttemptStatus.FINISHED
    assert attempt.failure_reason_id == "UNKNOWN"
    assert attempt.is_infra is True
    assert "workdir '/elsewhere' is not inside the workspace" in attempt.error_text
    assert "Traceback (most recent call last)" in attempt.error_text
    row = AttemptStage.objects.get(attempt=attempt)
    assert "Traceback" in (attempt_folder(attempt) / row.output_path).read_text()


def test_a_retried_attempt_keeps_the_logs_of_its_first_try(artifacts_root):
    from runs.lifecycle import attempt_archive_try, attempt_reset_to_queued

    import_tasks()
    first = run_attempt(get_task("toy_no_tests"), backend="bwrap")
    first_folder = attempt_folder(first)
    attempt_archive_try(first, note="retry")
    attempt_reset_to_queued(first)
    Attempt.objects.filter(pk=first.pk).update(status=AttemptStatus.RUNNING)
    first.refresh_from_db()

    second = attempt_execute(first, backend="bwrap")

    assert second.failure_reason_id == "NO_TESTS_COLLECTED"
    assert attempt_folder(second) == first_folder.with_name(first_folder.name + "__try2")
    assert (first_folder / "run.json").exists() and (attempt_folder(second) / "run.json").exists()
