"""The fail-fast tracker and error classification: pure functions, no database."""

from __future__ import annotations

from runs.failfast import (
    ConsecutiveFailureTracker,
    Outcome,
    Verdict,
    classify_error_text,
    find_breach,
    normalize_fingerprint,
    verdict,
)

AUTH = "Error code: 401 - {'error': {'type': 'authentication_error'}}"
RATE = "Error code: 429 - rate_limit exceeded, retry after 20s"


def llm_error(i: int, text: str = AUTH, kind: str = "") -> Outcome:
    return Outcome(attempt_id=i, reason="LLM_ERROR", error_text=text, error_kind=kind)


def test_it_breaches_on_the_third_consecutive_same_fingerprint_failure():
    tracker = ConsecutiveFailureTracker(threshold=3)
    assert tracker.record_failure("boom") is False
    assert tracker.record_failure("boom") is False
    assert tracker.record_failure("boom") is True
    assert tracker.count == 3


def test_a_success_resets_the_count():
    tracker = ConsecutiveFailureTracker(threshold=3)
    tracker.record_failure("boom")
    tracker.record_failure("boom")
    tracker.record_success()
    assert tracker.record_failure("boom") is False
    assert tracker.count == 1


def test_a_different_fingerprint_starts_a_new_streak():
    tracker = ConsecutiveFailureTracker(threshold=2)
    tracker.record_failure("a")
    assert tracker.record_failure("b") is False
    assert tracker.record_failure("b") is True
    assert tracker.fingerprint == "b"


def test_a_threshold_below_one_disables_the_tracker():
    tracker = ConsecutiveFailureTracker(threshold=0)
    assert not any(tracker.record_failure("x") for _ in range(10))


def test_find_breach_reports_the_attempt_that_completed_the_streak():
    outcomes = [llm_error(1), llm_error(2), llm_error(3), llm_error(4)]
    breach = find_breach(outcomes, threshold=3)
    assert breach is not None
    assert (breach.attempt_id, breach.reason, breach.count) == (3, "LLM_ERROR", 3)
    assert breach.permanent is True
    assert "401" in breach.describe()


def test_agent_outcomes_reset_and_task_specific_infrastructure_is_neutral():
    outcomes = [
        llm_error(1, RATE),
        Outcome(2, "SETUP_FAILED", error_text="pip: no matching distribution"),
        llm_error(3, RATE),
        Outcome(4, "TESTS_FAILED"),
        llm_error(5, RATE),
        llm_error(6, RATE),
    ]
    # 1 and 3 count together across the neutral SETUP_FAILED; TESTS_FAILED resets.
    assert find_breach(outcomes, threshold=3) is None
    breach = find_breach([*outcomes, llm_error(7, RATE)], threshold=3)
    assert breach is not None and breach.attempt_id == 7 and breach.permanent is False


def test_only_counted_reasons_are_failures_unless_the_error_is_permanent():
    assert verdict(Outcome(1, "TIMEOUT")) is Verdict.NEUTRAL
    assert verdict(Outcome(1, "TIMEOUT"), counted=["TIMEOUT"]) is Verdict.FAILURE
    assert verdict(Outcome(1, "SETUP_FAILED", error_kind="permanent")) is Verdict.FAILURE
    assert verdict(Outcome(1, None)) is Verdict.SUCCESS
    assert verdict(Outcome(1, "AGENT_GAVE_UP")) is Verdict.SUCCESS
    assert verdict(Outcome(1, "NOT_A_CODE")) is Verdict.NEUTRAL


def test_the_stored_error_kind_wins_over_the_text():
    breach = find_breach([llm_error(i, AUTH, kind="transient") for i in range(3)])
    assert breach is not None and breach.permanent is False


def test_it_classifies_errors_like_the_reference():
    assert classify_error_text(AUTH) == "permanent"
    assert classify_error_text("403 permission_error") == "permanent"
    assert classify_error_text("error: unrecognized arguments: --max-tokens") == "permanent"
    assert classify_error_text(RATE) == "transient"
    assert classify_error_text("529 overloaded_error") == "transient"
    assert classify_error_text("connect ECONNREFUSED 127.0.0.1:443") == "transient"
    # Unknown errors are not permanent: a false "permanent" stops every run of the config.
    assert classify_error_text("something odd happened") == ""
    assert classify_error_text("") == ""


def test_fingerprints_ignore_ids_and_numbers_but_keep_status_codes():
    a = normalize_fingerprint("attempt 3f2a1c9e-1111-2222-3333-444455556666 took 3.2s: 401")
    b = normalize_fingerprint("attempt 9e9e9e9e-aaaa-bbbb-cccc-ddddeeeeffff took 14.9s: 401")
    assert a == b
    assert normalize_fingerprint("HTTP 401") != normalize_fingerprint("HTTP 429")
    assert len(normalize_fingerprint("x" * 1000)) == 200


def test_outcomes_without_a_stored_fingerprint_group_by_normalized_text():
    outcomes = [
        Outcome(i, "SANDBOX_ERROR", error_text=f"container {i}abcdef0123456 died after {i}s")
        for i in range(3)
    ]
    breach = find_breach(outcomes, threshold=3)
    assert breach is not None and breach.reason == "SANDBOX_ERROR"


def test_the_same_llm_error_is_one_streak_whether_or_not_it_was_tagged_an_empty_run():
    core = "[llm-transient] RateLimitError (HTTP 429): Error code: 429 - rate limit reached"
    tagged = (
        "[empty-run] LLM_ERROR in agent_run: the agent produced no output (2.3s, 0 tokens): "
        f"[empty-run] the model produced no tokens in 2.1s: {core} (gave up after 1 attempt(s))"
    )
    plain = f"LLM_ERROR in agent_run: {core} (gave up after 1 attempt(s))\nstderr tail"
    outcomes = [
        Outcome(1, "LLM_ERROR", fingerprint=tagged[:200].lower(), error_text=tagged),
        Outcome(2, "LLM_ERROR", fingerprint=plain[:200].lower(), error_text=plain),
        Outcome(3, "LLM_ERROR", fingerprint=tagged[:200].lower(), error_text=tagged),
    ]
    breach = find_breach(outcomes, threshold=3)
    assert breach is not None and breach.fingerprint.startswith("[llm-transient] RateLimitError")
