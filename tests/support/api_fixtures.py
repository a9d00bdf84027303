"""Seeded results and API personas for the REST API tests.

Suite custom-dev (the example tasks) with three model configurations and finished attempts
covering every kind of outcome: resolved, agent failures, infrastructure failures, k=2.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from django.utils import timezone

from benchsite.accounts.services import api_token_create
from runs.models import (
    AgentVariant,
    Attempt,
    AttemptStage,
    AttemptStatus,
    ModelConfig,
    Run,
    RunStatus,
)
from runs.taxonomy import Reason

INFRA = {r.value for r in Reason if r.is_infrastructure}


def finished_attempt(run: Run, task, sample: int, reason: str | None, **extra) -> Attempt:
    return Attempt.objects.create(
        run=run,
        task=task,
        suite=run.suite,
        model_config=run.model_config,
        sample_index=sample,
        status=AttemptStatus.FINISHED,
        failure_reason_id=reason,
        is_infra=reason in INFRA,
        finished_at=extra.pop("finished_at", timezone.now()),
        **extra,
    )


@pytest.fixture
def seeded(custom_dev, bob):
    """{"suite", "tasks", "models": {name: ModelConfig}, "runs": {name: Run}}."""
    tasks = list(custom_dev.tasks.order_by("task_id"))
    assert len(tasks) >= 3, "the example suite must hold at least three tasks"
    alpha = ModelConfig.objects.create(
        name="alpha", agent_variant=AgentVariant.SCRIPTED, model_name="alpha-1"
    )
    beta = ModelConfig.objects.create(
        name="beta", agent_variant=AgentVariant.LLM, model_name="beta-2"
    )
    gamma = ModelConfig.objects.create(name="gamma", agent_variant=AgentVariant.NOP)
    runs = {}
    when = timezone.now() - dt.timedelta(days=1)
    for config in (alpha, beta, gamma):
        runs[config.name] = Run.objects.create(
            suite=custom_dev,
            model_config=config,
            samples=2,
            status=RunStatus.FINISHED,
            created_by=bob,
            finished_at=when,
        )
    # alpha: resolves every task on both samples but one infra failure.
    for i, task in enumerate(tasks):
        for sample in (0, 1):
            reason = Reason.SANDBOX_ERROR.value if (i, sample) == (0, 1) else None
            finished_attempt(
                runs["alpha"],
                task,
                sample,
                reason,
                cost_usd=Decimal("0.01"),
                tokens_in=100,
                tokens_out=50,
                duration_sec=2.0 + i,
                finished_at=when,
            )
    # beta: resolves the first task, fails the others (tests failed, gave up), one LLM error.
    outcomes = [None, Reason.TESTS_FAILED.value, Reason.AGENT_GAVE_UP.value]
    for i, task in enumerate(tasks):
        for sample in (0, 1):
            reason = outcomes[min(i, 2)]
            if (i, sample) == (1, 1):
                reason = Reason.LLM_ERROR.value
            finished_attempt(
                runs["beta"],
                task,
                sample,
                reason,
                cost_usd=Decimal("0.05"),
                tokens_in=1000,
                tokens_out=500,
                duration_sec=10.0,
                finished_at=when,
                error_text="boom" if reason else "",
                final_patch="--- a\n+++ b\n",
            )
    # gamma: nothing resolved, one sample only.
    for task in tasks:
        finished_attempt(runs["gamma"], task, 0, Reason.TESTS_FAILED.value, finished_at=when)
    # A still-running run, and an attempt with a stored log file (see artifact tests).
    return {
        "suite": custom_dev,
        "tasks": tasks,
        "models": {"alpha": alpha, "beta": beta, "gamma": gamma},
        "runs": runs,
    }


@pytest.fixture
def attempt_with_artifacts(seeded, settings, tmp_path):
    """One of beta's attempts with a stage log and a patch in the artifact storage."""
    from django.core.files.storage import storages

    settings.ARTIFACTS_ROOT = tmp_path
    settings.STORAGES = {
        **settings.STORAGES,
        "artifacts": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path)},
        },
    }
    storages._storages.pop("artifacts", None)
    attempt = Attempt.objects.filter(run=seeded["runs"]["beta"]).order_by("id").last()
    folder = tmp_path / "attempts" / str(attempt.public_id)
    (folder / "logs").mkdir(parents=True)
    (folder / "logs" / "tests.txt").write_text("FAILED tests/test_calc.py::test_add\n")
    (folder / "final.patch").write_text("<script>alert(1)</script>\n")
    attempt.artifacts_dir = f"attempts/{attempt.public_id}"
    attempt.save(update_fields=["artifacts_dir"])
    AttemptStage.objects.create(
        attempt=attempt,
        name="tests",
        order=3,
        command="pytest",
        exit_code=1,
        output_path="logs/tests.txt",
    )
    yield attempt
    storages._storages.pop("artifacts", None)


@pytest.fixture
def bob_token(bob):
    _, raw = api_token_create(user=bob, name="bob-ci")
    return raw


@pytest.fixture
def auth(bob_token):
    """Headers for Django's test client carrying bob's token."""
    return {"HTTP_AUTHORIZATION": f"Bearer {bob_token}"}


@pytest.fixture
def alice_token(alice):
    _, raw = api_token_create(user=alice, name="alice-ops")
    return raw


@pytest.fixture
def staff_auth(alice_token):
    """Headers carrying alice's token: staff, the right every write needs
    (benchsite.accounts.access)."""
    return {"HTTP_AUTHORIZATION": f"Bearer {alice_token}"}
