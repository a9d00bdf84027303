"""Runs executed by real Celery worker processes, on both deployments:

* PostgreSQL + Redis (production), and
* SQLite + kombu's SQL transport (the embedded default).

Runs are launched and steered through the ``ab`` command line; this process reads the
workers' database through an extra connection alias. Attempts use the real pipeline and
sandbox (scripted agent on custom-dev; the LLM agent against a local OpenAI-protocol server;
Claude Code through its gateway against a scripted provider, on PostgreSQL + Redis only).
"""

from __future__ import annotations

import json
import time

import pytest

from runs.models import FINAL_STATES, Attempt, AttemptStatus, Run, RunStatus
from tests.support.fake_provider import FakeProvider, error
from tests.support.worker_stack import KINDS, create_stack, wait_until

pytestmark = [pytest.mark.services, pytest.mark.slow]

RUN_TIMEOUT = 300


@pytest.fixture(params=KINDS)
def stack(request, tmp_path, django_db_blocker):
    with django_db_blocker.unblock():
        stack = create_stack(request.param, tmp_path)
        stack.connect()
        try:
            yield stack
        finally:
            stack.close()


def launch(stack, *args: str) -> Run:
    out = stack.ab("run-suite", "custom-dev", *args)
    public_id = out.stdout.split("run ", 1)[1].split(":", 1)[0]
    return Run.objects.using(stack.alias).get(public_id=public_id)


def attempts(stack, run: Run):
    return Attempt.objects.using(stack.alias).filter(run_id=run.id).order_by("id")


def all_final(stack, run: Run) -> bool:
    return not attempts(stack, run).exclude(status__in=FINAL_STATES).exists()


def wait_final(stack, run: Run, timeout: float = RUN_TIMEOUT) -> Run:
    wait_until(lambda: all_final(stack, run), timeout=timeout, what=f"run {run.public_id}")
    # The run's own row is written right after its last attempt's.
    wait_until(
        lambda: Run.objects.using(stack.alias).get(pk=run.pk).finished_at,
        timeout=30,
        what="the run's bookkeeping",
    )
    return Run.objects.using(stack.alias).get(pk=run.pk)


def reasons(stack, run: Run) -> dict[str, str | None]:
    return {
        f"{a.task.task_id}#{a.sample_index}": a.failure_reason_id
        for a in attempts(stack, run).select_related("task")
    }


def test_two_workers_drain_one_run(stack):
    run = launch(stack, "--variant", "scripted", "--samples", "2")
    stack.start_worker("w1")
    stack.start_worker("w2")
    run = wait_final(stack, run)
    assert run.status == RunStatus.FINISHED
    got = reasons(stack, run)
    assert len(got) == 12
    assert got["toy_fail_pytest#0"] is None and got["toy_fail_pytest#1"] is None
    assert got["toy_baseline_passes#0"] == "BASELINE_NOT_FAILING"
    assert got["toy_no_tests#1"] == "NO_TESTS_COLLECTED"
    assert got["toy_setup_fails#0"] == "SETUP_FAILED"
    assert got["toy_setup_hangs#0"] == "SETUP_TIMEOUT"
    workers = {a.worker.split("@")[0] for a in attempts(stack, run)}
    assert workers == {"w1", "w2"}, workers
    assert run.totals["final"] == 12 and run.totals["resolved"] == 2


def test_a_worker_killed_mid_attempt_leaves_no_attempt_stuck(stack):
    run = launch(stack, "--variant", "scripted", "--task", "toy_fail_pytest", "--samples", "3")
    doomed = stack.start_worker("doomed")
    victim = wait_until(
        lambda: attempts(stack, run).filter(status=AttemptStatus.RUNNING).first(),
        timeout=120,
        what="an attempt to start",
    )
    killed_try = wait_until(
        lambda: Attempt.objects.using(stack.alias).get(pk=victim.pk).artifacts_dir,
        timeout=60,
        what="the attempt's folder",
    )
    stack.kill_worker(doomed)  # SIGKILL to the main process and its pool children
    stack.start_worker("rescuer", beat=True)  # with the reaper
    run = wait_final(stack, run)
    victim = Attempt.objects.using(stack.alias).get(pk=victim.pk)
    assert victim.requeue_count == 1
    # The killed try's workspace is gone; the new try ran in a folder of its own.
    assert not (stack.var_dir / "artifacts" / killed_try / "workspace").exists()
    assert victim.artifacts_dir != killed_try
    # Its unacknowledged message does not wait in Redis for the visibility timeout.
    assert stack.unacked_messages() == 0
    assert victim.status == AttemptStatus.FINISHED
    # It finished elsewhere, or (had it been lost twice) ended as infrastructure.
    assert victim.failure_reason_id in (None, "SANDBOX_ERROR")
    assert victim.worker.startswith("rescuer@")
    assert victim.stages.using(stack.alias).filter(name="try 1: outcome").exists()
    assert {a.status for a in attempts(stack, run)} == {AttemptStatus.FINISHED}
    assert run.status == RunStatus.FINISHED


def test_a_permanent_llm_error_aborts_the_run_and_the_other_queued_run_of_the_model(stack):
    with FakeProvider([error(401, "authentication_error", "Incorrect API key")] * 40) as llm:
        llm_args = ["--variant", "llm", "--model", "fake-model", "--base-url", llm.url("/v1")]
        first = launch(stack, *llm_args, "--task", "toy_fail_pytest", "--samples", "6")
        second = launch(stack, *llm_args, "--task", "toy_fail_pytest", "--samples", "2")
        assert first.model_config_id == second.model_config_id
        stack.start_worker("w1", env={"OPENAI_API_KEY": "sk-wrong"})
        first = wait_final(stack, first)
        second = wait_final(stack, second)

    assert first.status == RunStatus.ABORTED
    assert first.fail_fast_code == "LLM_ERROR" and first.fail_fast_permanent
    finished = attempts(stack, first).filter(status=AttemptStatus.FINISHED)
    outcomes = [(a.failure_reason_id, a.error_fingerprint) for a in finished]
    assert len(outcomes) == 3, outcomes  # aborted within 3 attempts
    assert {a.error_kind for a in finished} == {"permanent"}
    skipped = attempts(stack, first).filter(status=AttemptStatus.SKIPPED)
    assert skipped.count() == 3
    assert all(a.error_text.startswith("[fail-fast]") for a in skipped)
    assert second.status == RunStatus.ABORTED
    assert second.fail_fast_reason.startswith(f"propagated from run {first.public_id}")
    assert {a.status for a in attempts(stack, second)} == {AttemptStatus.SKIPPED}


def test_a_transient_breach_aborts_only_its_run(stack):
    rate_limited = error(429, "rate_limit_exceeded", "Rate limit reached")
    with FakeProvider([rate_limited] * 40) as llm:
        llm_args = ["--variant", "llm", "--model", "fake-model", "--base-url", llm.url("/v1")]
        first = launch(stack, *llm_args, "--task", "toy_fail_pytest", "--samples", "5")
        second = launch(stack, *llm_args, "--task", "toy_fail_pytest", "--samples", "2")
        stack.start_worker("w1", env={"OPENAI_API_KEY": "sk-test", "LLM_RETRY_MAX_ATTEMPTS": "1"})
        first = wait_final(stack, first)
        second = wait_final(stack, second)

    assert first.status == RunStatus.ABORTED and not first.fail_fast_permanent
    assert attempts(stack, first).filter(status=AttemptStatus.SKIPPED).count() == 2
    # The other run of the same model ran its own attempts (two failures: under threshold).
    assert second.status == RunStatus.FINISHED and second.fail_fast_reason == ""
    assert [a.failure_reason_id for a in attempts(stack, second)] == ["LLM_ERROR", "LLM_ERROR"]
    assert {a.error_kind for a in attempts(stack, second)} == {"transient"}


def test_cancel_then_retry_then_resume(stack):
    run = launch(stack, "--variant", "scripted", "--task", "toy_fail_pytest", "--samples", "4")
    worker = stack.start_worker("w1")
    running = wait_until(
        lambda: attempts(stack, run).filter(status=AttemptStatus.RUNNING).first(),
        timeout=120,
        what="an attempt to start",
    )
    out = stack.ab("cancel-run", str(run.public_id))
    assert "cancelled" in out.stdout
    run = wait_final(stack, run)
    assert run.status == RunStatus.CANCELLED
    statuses = {a.id: a.status for a in attempts(stack, run)}
    assert list(statuses.values()).count(AttemptStatus.CANCELLED) >= 3
    running = Attempt.objects.using(stack.alias).get(pk=running.pk)
    # The running one stopped (its container removed, or at its next stage), unless it had
    # already finished its tests.
    if running.status == AttemptStatus.FINISHED:
        assert running.failure_reason_id is None, running.error_text
    else:
        assert running.status == AttemptStatus.CANCELLED, running.error_text
    assert all(
        a.failure_reason_id == "INTERRUPTED"
        for a in attempts(stack, run).filter(status=AttemptStatus.CANCELLED)
    )

    stack.kill_worker(worker)
    out = stack.ab("retry-run", str(run.public_id))
    retried = int(out.stdout.split(": ", 1)[1].split()[0])
    assert retried >= 3
    stack.purge_broker()  # the broker "lost" the retry messages
    time.sleep(1)
    assert attempts(stack, run).filter(status=AttemptStatus.QUEUED).count() == retried
    out = stack.ab("resume-run", str(run.public_id))
    assert f"re-sent {retried} queued attempt(s)" in out.stdout
    stack.start_worker("w2")
    run = wait_final(stack, run)
    assert run.status == RunStatus.FINISHED
    assert [a.failure_reason_id for a in attempts(stack, run)] == [None] * 4
    retried_attempt = attempts(stack, run).filter(stages__name="try 1: outcome").first()
    assert retried_attempt is not None


def test_run_suite_wait_prints_a_summary_by_reason(stack):
    stack.start_worker("w1", concurrency=2)
    out = stack.ab(
        "run-suite",
        "custom-dev",
        "--variant",
        "scripted",
        "--samples",
        "1",
        "--wait",
        "--poll",
        "0.5",
        # The sandbox asked for at launch, not the worker's default (Docker here).
        "--backend",
        "bwrap",
    )
    assert "RESOLVED" in out.stdout and "SETUP_FAILED" in out.stdout
    assert "BASELINE_NOT_FAILING" in out.stdout
    assert out.stdout.rstrip().endswith("finished")
    public_id = out.stdout.split("run ", 1)[1].split(":", 1)[0]
    run = Run.objects.using(stack.alias).get(public_id=public_id)
    assert run.backend == "bwrap"
    resolved = attempts(stack, run).filter(failure_reason__isnull=True).first()
    record = stack.var_dir / "artifacts" / resolved.artifacts_dir / "run.json"
    assert json.loads(record.read_text())["sandbox"]["backend"] == "bwrap"


@pytest.fixture
def cli_stack(tmp_path, django_db_blocker):
    """A PostgreSQL + Redis stack whose gateways make their socket folders under a root of
    its own (the machine's /run/agentbench/gateway is shared with other test sessions)."""
    import shutil
    import uuid
    from pathlib import Path

    from tests.support.fake_provider_plans import REAL_KEY, UPSTREAM_KEY_ENV

    root = Path(f"/run/agentbench/gateway-test-{uuid.uuid4().hex[:8]}")
    extra = {"GATEWAY_SOCKET_ROOT": str(root), UPSTREAM_KEY_ENV: REAL_KEY}
    with django_db_blocker.unblock():
        stack = create_stack("postgres+redis", tmp_path, extra_env=extra)
        stack.connect()
        try:
            yield stack, root
        finally:
            stack.close()
            shutil.rmtree(root, ignore_errors=True)


def test_a_worker_killed_mid_cli_attempt_leaves_no_gateway_socket(cli_stack):
    """SIGKILL a worker while Claude Code waits on its model call: the gateway's socket folder
    (named for the attempt) stays behind with nobody listening. The attempt is requeued and
    finishes on another worker; then the reaper removes the killed try's folder."""
    from tests.support.fake_provider_plans import MODEL, fix_plan, plan_provider

    stack, root = cli_stack
    plan = fix_plan(
        workdir="/workspace/repo",
        path="src/toy/calc.py",
        old="    return total(values) // len(values)",
        new="    return total(values) / len(values)",
        test_command="PYTHONPATH=src python -m pytest -q tests/test_calc.py",
    )
    with plan_provider(plan, delay_sec=600) as upstream:  # the first try's call hangs
        run = launch(
            stack,
            "--task",
            "toy_fail_pytest",
            "--variant",
            "cli",
            "--cli",
            "claude-code",
            "--model",
            MODEL["claude-code"],
            "--base-url",
            upstream.url(),
            "--api-key-env",
            "AB_TEST_UPSTREAM_KEY",
        )
        (attempt,) = attempts(stack, run)
        doomed = stack.start_worker("doomed")
        wait_until(
            lambda: upstream.requests_to("/messages"),
            timeout=300,
            what="Claude Code's first model call",
        )
        (killed_try,) = [p for p in root.iterdir() if p.name.startswith(f"{attempt.public_id}.")]
        stack.kill_worker(doomed)  # SIGKILL to the main process and its pool children
        assert (killed_try / "gateway.sock").exists()  # left behind, nobody listening
        upstream.delay_sec = 0
        stack.start_worker("rescuer", beat=True)  # with the reaper
        run = wait_final(stack, run)
        wait_until(
            lambda: not killed_try.exists(),
            timeout=120,
            what="the reaper to remove the killed try's socket folder",
        )
    attempt = Attempt.objects.using(stack.alias).get(pk=attempt.pk)
    assert attempt.requeue_count == 1 and attempt.worker.startswith("rescuer@")
    assert attempt.failure_reason_id is None, attempt.error_text  # the second try fixed it
    assert list(root.iterdir()) == []  # the second try's gateway removed its own
    assert "removed leftovers of finished attempts" in stack.worker_log("rescuer")
