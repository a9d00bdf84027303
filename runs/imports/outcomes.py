"""Recording results produced elsewhere: the external model row and finished attempts.

Shared by ``predictions`` (instances without a usable patch) and ``results`` (published
reports). Every suite instance gets an attempt; none is dropped.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from runs.models import AgentVariant, Attempt, AttemptStatus, ModelConfig, Run
from runs.taxonomy import Reason, Stage, is_infrastructure
from tasks_app.models import Suite, Task
from tasks_app.swebench.errors import Problem, SwebenchInputError
from tasks_app.swebench.grading import Grade, grade_from_tests_status


class Kind(enum.StrEnum):
    """What happened to one instance, as a harness run report or a report.json says."""

    RESOLVED = "resolved"
    UNRESOLVED = "unresolved"
    EMPTY_PATCH = "empty_patch"
    APPLY_FAILED = "apply_failed"
    ERROR = "error"
    INFRA = "infra_failure"
    INCOMPLETE = "incomplete"
    MISSING = "missing"
    NO_PREDICTION = "no_prediction"
    # Legacy (v1) harness reports: ``no_generation``, ``install_fail``, ``reset_failed``,
    # ``test_errored``, ``test_timeout`` (runs/imports/legacy.py).
    NO_GENERATION = "no_generation"
    INSTALL_FAIL = "install_fail"
    RESET_FAILED = "reset_failed"
    TEST_ERRORED = "test_errored"
    TEST_TIMEOUT = "test_timeout"


@dataclass(frozen=True, slots=True)
class KindInfo:
    reason: Reason | None
    error_text: str
    grade: str
    # Never attempted: recorded as status ``missing`` (no reason, grade, time or usage).
    is_missing: bool = False
    is_timeout: bool = False
    stage: Stage = Stage.FINAL_TEST


KINDS: dict[Kind, KindInfo] = {
    Kind.RESOLVED: KindInfo(None, "", Grade.FULL.value),
    Kind.UNRESOLVED: KindInfo(Reason.TESTS_FAILED, "", Grade.NO.value),
    Kind.EMPTY_PATCH: KindInfo(
        Reason.TESTS_FAILED, "[empty-patch] the prediction holds no patch", Grade.NO.value
    ),
    # The agent's patch is the agent's result: an agent failure, not infrastructure.
    Kind.APPLY_FAILED: KindInfo(
        Reason.TOOL_ERROR, "[patch-apply-failed] the patch did not apply", Grade.NO.value
    ),
    Kind.ERROR: KindInfo(
        Reason.SANDBOX_ERROR, "[harness-error] the harness reported an evaluation error", ""
    ),
    Kind.INFRA: KindInfo(
        Reason.SANDBOX_ERROR, "[infra-failure] the harness reported an infrastructure failure", ""
    ),
    Kind.INCOMPLETE: KindInfo(
        None,
        "[missing] submitted but never evaluated (incomplete)",
        "",
        is_missing=True,
    ),
    Kind.MISSING: KindInfo(
        None,
        "[missing] no result for this instance: not attempted (0 in the whole-suite rate)",
        "",
        is_missing=True,
    ),
    Kind.NO_PREDICTION: KindInfo(
        None,
        "[no-prediction] the predictions hold nothing for this instance",
        "",
        is_missing=True,
    ),
    # The system made no patch: its result, like an empty prediction.
    Kind.NO_GENERATION: KindInfo(
        Reason.TESTS_FAILED, "[no-generation] the system produced no patch", Grade.NO.value
    ),
    # The legacy harness installed the repository's environment before applying the patch:
    # a failure there (or in resetting the repository) never saw the agent's work.
    Kind.INSTALL_FAIL: KindInfo(
        Reason.SETUP_FAILED,
        "[install-fail] the evaluation environment could not be installed",
        "",
        stage=Stage.SETUP,
    ),
    Kind.RESET_FAILED: KindInfo(
        Reason.GIT_CHECKOUT_FAILED,
        "[reset-failed] the repository could not be reset to its base commit",
        "",
        stage=Stage.GIT_CHECKOUT,
    ),
    # ">>>>> Tests Errored": the harness's test command raised, not a test failing.
    Kind.TEST_ERRORED: KindInfo(
        Reason.SANDBOX_ERROR, "[test-errored] the harness could not run the tests", ""
    ),
    # Timeouts are infrastructure everywhere in this taxonomy (data-quality rules).
    Kind.TEST_TIMEOUT: KindInfo(
        Reason.TIMEOUT, "[timeout] the tests ran out of time", "", is_timeout=True
    ),
}


@dataclass
class InstanceResult:
    """One instance's outcome in imported results, and where it was read."""

    instance_id: str
    kind: Kind
    where: str
    tests_status: dict[str, Any] | None = None
    patch: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # What a published per-instance entry says it cost ("cost", USD) and how many model calls
    # it made ("api_calls"); None when the entry does not say (a trajectory, if any, wins).
    cost_usd: float | None = None
    api_calls: int | None = None


def external_model(*, name: str, description: str) -> ModelConfig:
    """The leaderboard row of an external system: created once, reused by later imports."""
    name = name.strip()
    if not name:
        raise SwebenchInputError([Problem("model", "must not be empty")])
    model, created = ModelConfig.objects.get_or_create(
        name=name,
        defaults={
            "agent_variant": AgentVariant.EXTERNAL,
            "model_name": name,
            "description": description,
        },
    )
    if not created and model.agent_variant != AgentVariant.EXTERNAL:
        raise SwebenchInputError(
            [
                Problem(
                    "model",
                    f"{name!r} is an existing {model.agent_variant} configuration; "
                    "imported results need their own name",
                )
            ]
        )
    return model


def finished_attempt(
    *,
    run: Run,
    suite: Suite,
    model: ModelConfig,
    task: Task,
    kind: Kind,
    now: datetime,
    tests_status: dict[str, Any] | None = None,
    patch: str | None = None,
    note: str = "",
) -> Attempt:
    """A finished attempt (not saved) recording ``kind``; per-test statuses graded if known.

    Usage is unknown (NULL) unless the caller has a trajectory; a kind that was never
    attempted (``KindInfo.is_missing``) is a ``missing`` attempt: no reason, grade or time."""
    info = KINDS[kind]
    reason = info.reason
    grade = info.grade
    test_results: dict[str, Any] = {}
    if tests_status:
        graded = grade_from_tests_status(tests_status)
        test_results = graded.test_results
        grade = graded.grade
    error_text = info.error_text
    if note:
        error_text = f"{error_text} ({note})" if error_text else note
    missing = info.is_missing
    # Ids rather than objects: cheaper for the hundreds of rows one import builds.
    return Attempt(
        run_id=run.pk,
        task_id=task.pk,
        suite_id=suite.pk,
        model_config_id=model.pk,
        sample_index=0,
        task_revision=task.revision,
        status=AttemptStatus.MISSING if missing else AttemptStatus.FINISHED,
        failure_reason_id=reason.value if reason else None,
        failure_stage=info.stage.value if reason else "",
        is_infra=is_infrastructure(reason, info.stage),
        is_timeout=info.is_timeout,
        cost_usd=None,
        tokens_in=None,
        tokens_out=None,
        steps=None,
        tool_calls=None,
        final_patch=patch or "",
        lines_changed=_lines_changed(patch or ""),
        error_text=error_text,
        error_fingerprint=f"{kind.value}" if reason else "",
        test_results=test_results,
        grade="" if missing else grade,
        started_at=None if missing else now,
        finished_at=None if missing else now,
    )


def _lines_changed(patch: str) -> int:
    return sum(
        1
        for line in patch.splitlines()
        if line.startswith(("+", "-")) and not line.startswith(("+++", "---"))
    )
