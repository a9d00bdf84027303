"""The statistics behind leaderboards and comparisons, checked against known values."""

from __future__ import annotations

import math

import pytest

from runs.stats import majority_resolved, mcnemar_exact, mean_pass_at_k, pass_at_k, wilson_interval


def test_wilson_interval_matches_published_values():
    # Newcombe (1998), example: 81 of 263 -> 0.2553 to 0.3662.
    low, high = wilson_interval(81, 263)
    assert low == pytest.approx(0.2553, abs=1e-4)
    assert high == pytest.approx(0.3662, abs=1e-4)


def test_wilson_interval_stays_inside_zero_and_one():
    assert wilson_interval(0, 10)[0] == 0.0
    assert wilson_interval(10, 10)[1] == pytest.approx(1.0)
    _low, high = wilson_interval(0, 10)
    assert 0.0 < high < 0.35
    assert wilson_interval(0, 0) == (0.0, 0.0)


def test_wilson_interval_rejects_impossible_counts():
    with pytest.raises(ValueError, match="between 0 and n"):
        wilson_interval(5, 3)


def test_pass_at_k_is_the_unbiased_estimator():
    assert pass_at_k(3, 0, 1) == 0.0
    assert pass_at_k(3, 3, 1) == 1.0
    assert pass_at_k(3, 1, 1) == pytest.approx(1 / 3)
    assert pass_at_k(3, 1, 3) == 1.0
    # 1 - C(8, 2) / C(10, 2) = 1 - 28/45
    assert pass_at_k(10, 2, 2) == pytest.approx(1 - 28 / 45)
    assert pass_at_k(5, 1, 2) == pytest.approx(1 - math.comb(4, 2) / math.comb(5, 2))


def test_pass_at_k_uses_the_samples_there_are_when_fewer_than_k():
    assert pass_at_k(2, 1, 3) == 1.0
    assert pass_at_k(2, 0, 3) == 0.0
    assert pass_at_k(0, 0, 3) == 0.0


def test_mean_pass_at_k_averages_over_tasks():
    assert mean_pass_at_k([(3, 3), (3, 0)], 1) == pytest.approx(0.5)
    assert mean_pass_at_k([], 1) is None


def test_mcnemar_exact_matches_the_binomial_test():
    assert mcnemar_exact(0, 0) == 1.0
    # 0 vs 6 discordant: 2 * (1/2)^6
    assert mcnemar_exact(0, 6) == pytest.approx(2 / 64)
    assert mcnemar_exact(6, 0) == mcnemar_exact(0, 6)
    # scipy.stats.binomtest(2, 12, 0.5).pvalue == 0.03857421875
    assert mcnemar_exact(2, 10) == pytest.approx(0.03857421875)
    assert mcnemar_exact(5, 5) == 1.0
    # Large counts must not underflow or overflow.
    assert 0.0 <= mcnemar_exact(2000, 2100) <= 1.0


def test_majority_resolved_needs_more_than_half():
    assert majority_resolved(3, 2)
    assert not majority_resolved(2, 1)
    assert not majority_resolved(0, 0)
