"""Every row of failure-taxonomy.md's mapping and scenario tables is a case here."""

from __future__ import annotations

import pytest

from runs.taxonomy import (
    REASONS,
    Reason,
    SandboxFailure,
    Stage,
    from_pytest_exit_code,
    from_stage,
    is_infrastructure,
    primary_reason,
)

R = Reason


@pytest.mark.parametrize(
    ("exit_code", "expected"),
    [
        (0, None),
        (1, R.TESTS_FAILED),
        (2, R.INTERRUPTED),
        (3, R.INTERNAL_ERROR),
        (4, R.INTERNAL_ERROR),
        (5, R.NO_TESTS_COLLECTED),
        (124, R.TIMEOUT),
        (137, R.TIMEOUT),
        (6, R.UNKNOWN),
        (255, R.UNKNOWN),
        (-9, R.UNKNOWN),
    ],
)
def test_it_maps_pytest_exit_codes(exit_code, expected):
    assert from_pytest_exit_code(exit_code) is expected


@pytest.mark.parametrize(
    ("scenario", "exit_code", "stage", "expected"),
    [
        ("valid baseline (tests fail)", 1, "baseline_run", None),
        ("invalid task (tests pass)", 0, "baseline_run", R.BASELINE_NOT_FAILING),
        ("pip install fails", 1, "setup", R.SETUP_FAILED),
        ("setup takes too long", 124, "setup", R.SETUP_TIMEOUT),
        ("tests hang forever", 124, "agent_run", R.TIMEOUT),
        ("bad git URL", 128, "git_clone", R.GIT_CLONE_FAILED),
        ("ctrl+c in the agent's tests", 2, "agent_run", R.INTERRUPTED),
        ("ctrl+c in final tests", 2, "final_test", R.INTERRUPTED),
        ("ctrl+c in the baseline", 2, "baseline_run", R.INTERRUPTED),
        ("git clone hangs", 124, "git_clone", R.TIMEOUT),
    ],
)
def test_it_maps_every_failure_scenario(scenario, exit_code, stage, expected):
    assert from_stage(stage, exit_code) is expected, scenario


@pytest.mark.parametrize("stage", list(Stage))
def test_it_maps_ctrl_c_to_interrupted_in_any_stage(stage):
    assert from_stage(stage, exception=KeyboardInterrupt()) is R.INTERRUPTED
    assert from_stage(stage, 130) is R.INTERRUPTED


@pytest.mark.parametrize("stage", list(Stage))
def test_it_maps_a_sandbox_failure_to_sandbox_error_in_any_stage(stage):
    class DockerDown(SandboxFailure):
        pass

    assert from_stage(stage, exception=DockerDown("daemon down")) is R.SANDBOX_ERROR


def test_it_maps_other_exceptions_to_unknown():
    assert from_stage("final_test", exception=ValueError("boom")) is R.UNKNOWN


def test_exceptions_win_over_exit_codes():
    assert from_stage("setup", 0, exception=KeyboardInterrupt()) is R.INTERRUPTED


@pytest.mark.parametrize(
    ("stage", "exit_code", "expected"),
    [
        ("git_clone", 0, None),
        ("git_checkout", 0, None),
        ("git_checkout", 1, R.GIT_CHECKOUT_FAILED),
        ("git_checkout", 128, R.GIT_CHECKOUT_FAILED),
        ("setup", 0, None),
        ("setup", 2, R.SETUP_FAILED),  # a shell's "bad usage", not Ctrl+C
        ("setup", 137, R.SETUP_TIMEOUT),
        ("baseline_run", 137, R.TIMEOUT),
        ("baseline_run", 5, R.NO_TESTS_COLLECTED),
        ("baseline_run", 4, R.INTERNAL_ERROR),
        ("baseline_run", 42, None),
        ("agent_run", 0, None),
        ("agent_run", 1, R.TESTS_FAILED),
        ("final_test", 1, R.TESTS_FAILED),
        ("final_test", 5, R.NO_TESTS_COLLECTED),
        ("final_test", 99, R.UNKNOWN),
    ],
)
def test_it_applies_the_stage_specific_rules(stage, exit_code, expected):
    assert from_stage(stage, exit_code) is expected


def test_timeout_codes_override_stage_logic():
    for stage in Stage:
        expected = R.SETUP_TIMEOUT if stage is Stage.SETUP else R.TIMEOUT
        assert from_stage(stage, 124) is expected
        assert from_stage(stage, 137) is expected


def test_it_rejects_a_call_with_neither_exit_code_nor_exception():
    with pytest.raises(ValueError):
        from_stage("setup")


def test_precedence_is_one_to_fifteen_in_the_documented_order():
    order = sorted(Reason, key=lambda r: r.precedence)
    assert [r.value for r in order] == [
        "GIT_CLONE_FAILED",
        "GIT_CHECKOUT_FAILED",
        "SETUP_TIMEOUT",
        "SETUP_FAILED",
        "BASELINE_NOT_FAILING",
        "SANDBOX_ERROR",
        "LLM_ERROR",
        "TOOL_ERROR",
        "TIMEOUT",
        "AGENT_GAVE_UP",
        "TESTS_FAILED",
        "NO_TESTS_COLLECTED",
        "INTERNAL_ERROR",
        "INTERRUPTED",
        "UNKNOWN",
    ]
    assert [r.precedence for r in order] == list(range(1, 16))
    assert len(REASONS) == 15


def test_it_picks_the_primary_reason_by_precedence():
    assert primary_reason([R.TESTS_FAILED, R.SETUP_FAILED, None]) is R.SETUP_FAILED
    assert primary_reason([R.UNKNOWN, R.TOOL_ERROR]) is R.TOOL_ERROR
    assert primary_reason([R.TIMEOUT, R.LLM_ERROR, R.AGENT_GAVE_UP]) is R.LLM_ERROR
    assert primary_reason([None, None]) is None
    assert primary_reason([]) is None


def test_it_treats_pre_agent_failures_as_infrastructure():
    assert is_infrastructure(R.INTERNAL_ERROR, "baseline_run") is True
    assert is_infrastructure(R.INTERNAL_ERROR, "final_test") is False
    assert is_infrastructure(R.TESTS_FAILED, "final_test") is False
    assert is_infrastructure(R.TIMEOUT, "agent_run") is True
    assert is_infrastructure(R.LLM_ERROR) is True
    assert is_infrastructure(None, "setup") is False


@pytest.mark.parametrize(
    ("stage", "expected"),
    [
        ("setup", R.SETUP_FAILED),
        ("baseline_run", R.UNKNOWN),
        ("agent_run", R.UNKNOWN),
        ("final_test", R.UNKNOWN),
    ],
)
def test_exit_137_is_a_timeout_only_when_the_harness_timed_the_command_out(stage, expected):
    assert from_stage(stage, 137, timed_out=False) is expected
    assert from_stage(stage, 137, timed_out=True) in (R.SETUP_TIMEOUT, R.TIMEOUT)
    assert from_stage(stage, 124, timed_out=True) in (R.SETUP_TIMEOUT, R.TIMEOUT)
