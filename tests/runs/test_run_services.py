"""Run orchestration services in one process: launch, cancel, retry, resume, bookkeeping,
fail-fast and the reaper. Messages go through kombu's in-memory transport; attempt outcomes
are written the way the pipeline writes them (tests/orchestration_fixtures.finish)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from runs.lifecycle import attempt_claim
from runs.models import Attempt, AttemptStage, AttemptStatus, ModelConfig, Run, RunStatus
from runs.services import (
    LaunchError,
    run_cancel,
    run_launch,
    run_resume,
    run_retry_infra,
    runs_launch_many,
)
from runs.workers.bookkeeping import attempts_reap
from runs.workers.tasks import Heartbeat
from tests.support.orchestration_fixtures import finish

AUTH_ERROR = "Error code: 401 - {'error': {'type': 'authentication_error'}}"
RATE_ERROR = "Error code: 429 - rate_limit_exceeded"
NON_FLAKY = 6  # custom-dev has 7 tasks, one labelled flaky


@pytest.fixture
def launch(custom_dev, scripted, broker, django_capture_on_commit_callbacks):
    def _launch(config: ModelConfig | None = None, **kwargs) -> Run:
        with django_capture_on_commit_callbacks(execute=True):
            return run_launch(suite=custom_dev, model_config=config or scripted, **kwargs)

    return _launch


@pytest.fixture
def commit(django_capture_on_commit_callbacks):
    """Run a service and execute what it queued on commit."""

    def _commit(fn, **kwargs):
        with django_capture_on_commit_callbacks(execute=True):
            return fn(**kwargs)

    return _commit


def attempts_of(run: Run, status: str | None = None) -> list[Attempt]:
    qs = run.attempts.order_by("id")
    return list(qs.filter(status=status) if status else qs)


def test_it_launches_one_queued_attempt_per_task_and_sample(launch, broker):
    run = launch(samples=2)
    attempts = attempts_of(run)
    assert len(attempts) == 2 * NON_FLAKY
    assert {a.status for a in attempts} == {AttemptStatus.QUEUED}
    assert {a.sample_index for a in attempts} == {0, 1}
    assert all(
        a.suite_id == run.suite_id and a.model_config_id == run.model_config_id for a in attempts
    )
    assert all(a.task_revision == a.task.revision for a in attempts)
    assert "toy_flaky" not in {a.task.task_id for a in attempts}
    sent = broker.drain()
    # Each message carries only the attempt id, plus time limits from the task's budgets.
    assert sorted(t.args[0] for t in sent) == sorted(a.id for a in attempts)
    assert all(t.args == [t.args[0]] for t in sent)
    assert all(t.soft_time_limit > 1800 and t.time_limit == t.soft_time_limit + 60 for t in sent)
    assert run.status == RunStatus.QUEUED
    assert run.harness_version and run.package_versions["django"].startswith("5.2")
    assert len(run.git_revision) == 40
    assert run.config_snapshot["model_config"]["agent_variant"] == "scripted"
    assert run.config_snapshot["fail_fast"]["threshold"] == 3
    assert run.totals["attempts"] == 2 * NON_FLAKY


def test_it_selects_by_label_and_id_and_names_unknown_ids(launch, broker):
    run = launch(labels=["python"])
    assert [a.task.task_id for a in attempts_of(run)] == ["toy_fail_pytest"]
    run = launch(task_ids=["toy_flaky"])
    assert [a.task.task_id for a in attempts_of(run)] == ["toy_flaky"]
    run = launch(include_flaky=True)
    assert len(attempts_of(run)) == NON_FLAKY + 1
    with pytest.raises(LaunchError, match="task_ids: not in suite custom-dev: nope"):
        launch(task_ids=["toy_fail_pytest", "nope"])
    with pytest.raises(LaunchError, match="no task"):
        launch(labels=["no-such-label"])
    assert Run.objects.count() == 3  # the failed launches stored nothing


def test_it_launches_one_run_per_model_configuration(custom_dev, broker, commit):
    configs = [ModelConfig.objects.create(name=f"c{i}", agent_variant="nop") for i in range(3)]
    runs = commit(runs_launch_many, suite=custom_dev, model_configs=configs, samples=1)
    assert [r.model_config for r in runs] == configs
    assert len(broker.attempt_ids()) == 3 * NON_FLAKY


def test_a_claim_is_a_compare_and_set(launch):
    attempt = attempts_of(launch())[0]
    assert attempt_claim(attempt_id=attempt.id, worker="w1:1") is True
    assert attempt_claim(attempt_id=attempt.id, worker="w2:2") is False
    attempt.refresh_from_db()
    assert (attempt.status, attempt.worker) == (AttemptStatus.RUNNING, "w1:1")
    assert attempt.heartbeat_at is not None
    assert Run.objects.get(pk=attempt.run_id).status == RunStatus.RUNNING


def test_it_finishes_the_run_when_no_attempt_is_left(launch):
    run = launch(task_ids=["toy_fail_pytest"], samples=2)
    first, second = attempts_of(run)
    finish(first, None)
    run.refresh_from_db()
    assert run.status == RunStatus.QUEUED and run.finished_at is None
    finish(second, "TESTS_FAILED", "1 failed")
    run.refresh_from_db()
    assert run.status == RunStatus.FINISHED and run.finished_at is not None
    assert run.totals["resolved"] == 1 and run.totals["scored"] == 2
    assert run.totals["success_rate"] == 0.5


def test_cancel_ends_queued_attempts_and_tells_running_ones_to_stop(launch, commit):
    run = launch(task_ids=["toy_fail_pytest"], samples=3)
    running, *queued = attempts_of(run)
    attempt_claim(attempt_id=running.id, worker="w1:1")
    stopped = []
    heartbeat = Heartbeat(
        running.id, run.id, "w1:1", interval=1, on_run_cancelled=lambda: stopped.append(1)
    )
    heartbeat.beat()
    assert heartbeat.should_cancel() is False and stopped == []

    assert commit(run_cancel, run=run, by="alice") == 2
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED
    for attempt in queued:
        attempt.refresh_from_db()
        assert attempt.status == AttemptStatus.CANCELLED
        assert attempt.failure_reason_id == "INTERRUPTED" and attempt.is_infra
    running.refresh_from_db()
    assert running.status == AttemptStatus.RUNNING  # its worker ends it
    heartbeat.beat()
    heartbeat.beat()
    assert heartbeat.should_cancel() is True
    assert stopped == [1]  # the worker removed its containers, once
    assert attempt_claim(attempt_id=queued[0].id, worker="w2:2") is False


def test_a_heartbeat_notices_when_the_reaper_took_its_attempt(launch):
    attempt = attempts_of(launch(task_ids=["toy_fail_pytest"]))[0]
    attempt_claim(attempt_id=attempt.id, worker="w1:1")
    before = Attempt.objects.get(pk=attempt.pk).heartbeat_at
    heartbeat = Heartbeat(attempt.id, attempt.run_id, "w1:1", interval=1)
    heartbeat.beat()
    assert Attempt.objects.get(pk=attempt.pk).heartbeat_at >= before
    Attempt.objects.filter(pk=attempt.pk).update(worker="w2:2")
    heartbeat.beat()
    assert heartbeat.should_cancel() is True


def test_retry_requeues_only_infrastructure_failures_and_keeps_the_previous_try(
    launch,
    commit,
    broker,
):
    run = launch(task_ids=["toy_fail_pytest", "toy_setup_fails"])
    broker.drain()
    agent_failure, infra_failure = attempts_of(run)
    AttemptStage.objects.create(attempt=infra_failure, name="setup", order=2, exit_code=1)
    finish(agent_failure, "TESTS_FAILED", "1 failed")
    finish(infra_failure, "SETUP_FAILED", "pip: no matching distribution")
    run.refresh_from_db()
    assert run.status == RunStatus.FINISHED

    assert commit(run_retry_infra, run=run, by="alice") == 1
    assert broker.attempt_ids() == [infra_failure.id]
    infra_failure.refresh_from_db()
    assert infra_failure.status == AttemptStatus.QUEUED
    assert infra_failure.failure_reason_id is None and infra_failure.error_text == ""
    stages = {s.name: s for s in infra_failure.stages.all()}
    assert stages["try 1: setup"].exit_code == 1
    assert "SETUP_FAILED" in stages["try 1: outcome"].command
    assert "pip: no matching distribution" in stages["try 1: outcome"].command
    agent_failure.refresh_from_db()
    assert agent_failure.failure_reason_id == "TESTS_FAILED"
    run.refresh_from_db()
    assert run.status == RunStatus.QUEUED and run.finished_at is None


def test_resume_resends_the_queued_attempts(launch, commit, broker):
    run = launch(task_ids=["toy_fail_pytest"], samples=3)
    broker.drain()  # the broker "lost" them
    finish(attempts_of(run)[0], None)
    assert commit(run_resume, run=run) == 2
    assert sorted(broker.attempt_ids()) == [a.id for a in attempts_of(run, "queued")]


def test_a_permanent_error_aborts_the_run_and_the_other_runs_of_its_model(launch, scripted):
    run = launch(samples=2)
    sibling = launch(task_ids=["toy_fail_pytest"])
    other_config = ModelConfig.objects.create(name="other", agent_variant="scripted")
    unrelated = launch(other_config)
    first, second, third, *rest = attempts_of(run)
    finish(first, "LLM_ERROR", AUTH_ERROR, kind="permanent")
    finish(second, "LLM_ERROR", AUTH_ERROR, kind="permanent")
    run.refresh_from_db()
    assert run.status == RunStatus.QUEUED
    finish(third, "LLM_ERROR", AUTH_ERROR, kind="permanent")

    run.refresh_from_db()
    assert run.status == RunStatus.ABORTED
    assert run.fail_fast_code == "LLM_ERROR" and run.fail_fast_permanent is True
    assert "401" in run.fail_fast_reason
    for attempt in rest:
        attempt.refresh_from_db()
        assert attempt.status == AttemptStatus.SKIPPED
        assert attempt.failure_reason_id == "LLM_ERROR" and attempt.is_infra
        assert attempt.error_text.startswith("[fail-fast]")
    assert run.attempts.count() == 2 * NON_FLAKY  # nothing deleted
    assert run.finished_at is not None
    sibling.refresh_from_db()
    assert sibling.status == RunStatus.ABORTED
    assert sibling.fail_fast_reason.startswith(f"propagated from run {run.public_id}")
    assert {a.status for a in attempts_of(sibling)} == {AttemptStatus.SKIPPED}
    unrelated.refresh_from_db()
    assert unrelated.status == RunStatus.QUEUED


def test_a_transient_breach_aborts_only_its_own_run(launch):
    run = launch(samples=2)
    sibling = launch(task_ids=["toy_fail_pytest"])
    for attempt in attempts_of(run)[:3]:
        finish(attempt, "LLM_ERROR", RATE_ERROR, kind="transient")
    run.refresh_from_db()
    assert run.status == RunStatus.ABORTED and run.fail_fast_permanent is False
    assert len(attempts_of(run, "skipped")) == 2 * NON_FLAKY - 3
    sibling.refresh_from_db()
    assert sibling.status == RunStatus.QUEUED


def test_attempts_still_running_when_a_run_aborts_keep_their_results(launch):
    run = launch(samples=2)
    attempts = attempts_of(run)
    attempt_claim(attempt_id=attempts[3].id, worker="w1:1")
    for attempt in attempts[:3]:
        finish(attempt, "SANDBOX_ERROR", "docker: Cannot connect to the Docker daemon")
    run.refresh_from_db()
    assert run.status == RunStatus.ABORTED and run.finished_at is None
    finish(attempts_of(run, "running")[0], None)
    run.refresh_from_db()
    assert run.status == RunStatus.ABORTED and run.finished_at is not None
    assert run.totals["resolved"] == 1


def test_the_reaper_requeues_a_silent_attempt_once_then_ends_it(launch, broker):
    run = launch(task_ids=["toy_fail_pytest"])
    broker.drain()
    attempt = attempts_of(run)[0]
    attempt_claim(attempt_id=attempt.id, worker="w1:1")
    old = timezone.now() - timedelta(seconds=600)
    Attempt.objects.filter(pk=attempt.pk).update(heartbeat_at=old)

    report = attempts_reap(stale_after_sec=60)
    assert report.requeued == [attempt.id] and report.ended == []
    assert broker.attempt_ids() == [attempt.id]
    attempt.refresh_from_db()
    assert (attempt.status, attempt.requeue_count) == (AttemptStatus.QUEUED, 1)
    assert attempt.stages.filter(name="try 1: outcome").exists()

    attempt_claim(attempt_id=attempt.id, worker="w2:2")
    Attempt.objects.filter(pk=attempt.pk).update(heartbeat_at=old)
    report = attempts_reap(stale_after_sec=60)
    assert report.ended == [attempt.id]
    attempt.refresh_from_db()
    assert attempt.status == AttemptStatus.FINISHED
    assert attempt.failure_reason_id == "SANDBOX_ERROR" and attempt.is_infra
    assert attempt.error_text.startswith("[worker-lost]")
    run.refresh_from_db()
    assert run.status == RunStatus.FINISHED


def test_the_reaper_leaves_attempts_with_a_fresh_heartbeat(launch):
    attempt = attempts_of(launch(task_ids=["toy_fail_pytest"]))[0]
    attempt_claim(attempt_id=attempt.id, worker="w1:1")
    report = attempts_reap(stale_after_sec=60)
    assert report.requeued == report.ended == []
    attempt.refresh_from_db()
    assert attempt.status == AttemptStatus.RUNNING


def test_the_reaper_resends_queued_attempts_whose_message_was_lost(launch, broker):
    run = launch(task_ids=["toy_fail_pytest"], samples=2)
    broker.drain()  # lost with a killed worker
    Attempt.objects.filter(run=run).update(queued_at=timezone.now() - timedelta(seconds=600))
    report = attempts_reap(stale_after_sec=60)
    assert sorted(report.resent) == [a.id for a in attempts_of(run)]
    assert sorted(broker.attempt_ids()) == [a.id for a in attempts_of(run)]
    # Sent again just now: the next pass leaves them alone.
    assert attempts_reap(stale_after_sec=60).resent == []


def test_the_reaper_settles_a_run_whose_last_bookkeeping_was_lost(launch):
    run = launch(task_ids=["toy_fail_pytest"])
    # The attempt ended but its worker died before the run's bookkeeping.
    Attempt.objects.filter(run=run).update(
        status=AttemptStatus.FINISHED, finished_at=timezone.now()
    )
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING)
    report = attempts_reap(stale_after_sec=60)
    assert report.settled == [run.id]
    run.refresh_from_db()
    assert run.status == RunStatus.FINISHED and run.totals["resolved"] == 1
    assert attempts_reap(stale_after_sec=60).settled == []


def test_retrying_an_imported_prediction_keeps_its_patch(custom_dev):
    from runs.lifecycle import attempt_reset_to_queued
    from runs.models import Attempt, ModelConfig, Run

    external = ModelConfig.objects.create(name="imported-model", agent_variant="external")
    task = custom_dev.tasks.get(task_id="toy_fail_pytest")
    run = Run.objects.create(suite=custom_dev, model_config=external)
    attempt = Attempt.objects.create(
        run=run,
        task=task,
        suite=custom_dev,
        model_config=external,
        final_patch="diff --git a/x b/x\n",
        error_text="[worker-lost] gone",
    )
    attempt_reset_to_queued(attempt)
    assert attempt.final_patch == "diff --git a/x b/x\n"
    assert attempt.error_text == "" and attempt.status == "queued"
