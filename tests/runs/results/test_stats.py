"""The statistics behind leaderboards and comparisons, and the one definition of a score
(``runs.results.scoring``), checked against known values."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from runs.models import FINAL_STATES, AttemptStatus
from runs.results import scoring
from runs.results.scoring import (
    TaskTally,
    classify,
    paired_test,
    score,
    sign_flip_p_value,
    standings,
)
from runs.results.stats import (
    mcnemar_exact,
    mean_pass_at_k,
    pass_at_k,
    pass_hat_k,
    wilson_interval,
    wilson_interval_fraction,
)


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


def test_pass_hat_k_is_the_chance_all_k_samples_pass():
    assert pass_hat_k(3, 3, 3) == 1.0 and pass_hat_k(3, 2, 3) == 0.0
    # C(2, 2) / C(3, 2): two of three passed, two drawn
    assert pass_hat_k(3, 2, 2) == pytest.approx(1 / 3)
    assert pass_hat_k(10, 7, 3) == pytest.approx(math.comb(7, 3) / math.comb(10, 3))
    assert pass_hat_k(5, 2, 1) == pass_at_k(5, 2, 1) == pytest.approx(0.4)  # k = 1: both pass@1
    assert pass_hat_k(2, 2, 3) == 1.0 and pass_hat_k(0, 0, 3) == 0.0  # fewer than k: the n there
    with pytest.raises(ValueError, match="between 0 and n"):
        pass_hat_k(2, 3, 2)


def test_a_score_gives_pass_hat_k_its_interval_and_the_split_tasks():
    # Three tasks of 3 samples: all pass, 2 of 3, none; a fourth with one (fewer than k).
    tallies = {
        0: TaskTally(scored=3, resolved=3),
        1: TaskTally(scored=3, resolved=2),
        2: TaskTally(scored=3, resolved=0),
        3: TaskTally(scored=1, resolved=1),
    }
    s = score(tallies, universe=range(4), k=3)
    assert s.pass_hat_k == pytest.approx((1 + 0 + 0 + 1) / 4)
    assert s.pass_at_k == pytest.approx((1 + 1 + 0 + 1) / 4)
    assert s.pass_hat_k_ci_low < s.pass_hat_k < s.pass_hat_k_ci_high
    assert s.disagreeing_tasks == 1  # only task 1: some resolved, some not
    single = score(tallies, universe=range(4), k=1)
    assert (single.pass_hat_k, single.pass_hat_k_ci_low, single.pass_at_k) == (None, None, None)
    assert single.disagreeing_tasks == 1  # a split is a split whatever k is asked


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


def test_wilson_interval_of_a_fraction_matches_the_counts_version():
    assert wilson_interval_fraction(81 / 263, 263) == pytest.approx(wilson_interval(81, 263))
    low, high = wilson_interval_fraction(0.5, 40.5)
    assert low < 0.5 < high
    with pytest.raises(ValueError, match="between 0 and 1"):
        wilson_interval_fraction(1.5, 10)


def tallies(*per_task: tuple[int, int]) -> dict[int, TaskTally]:
    """Task i -> (scored, resolved)."""
    return {i: TaskTally(scored=n, resolved=c) for i, (n, c) in enumerate(per_task)}


def test_the_statuses_scoring_knows_are_the_models():
    assert {AttemptStatus.FINISHED.value, scoring.MISSING} | scoring.UNRUN_STATUSES == {
        s.value for s in FINAL_STATES
    }
    assert AttemptStatus.MISSING.value == scoring.MISSING
    assert {s.value for s in FINAL_STATES} == scoring.FINAL_STATUSES
    # Imported predictions waiting for evaluation are pending whether or not the status exists.
    assert scoring.NOT_EVALUATED not in scoring.FINAL_STATUSES


def test_a_score_is_the_mean_over_tasks_of_the_resolved_share():
    s = score(tallies((3, 2), (1, 1), (3, 0), (2, 1)), universe=range(4), k=3)
    assert s.rate == pytest.approx((2 / 3 + 1 + 0 + 1 / 2) / 4)
    assert s.resolved == pytest.approx(2 / 3 + 1 + 0 + 1 / 2)
    assert (s.tasks, s.scored, s.resolved_attempts) == (4, 9, 4)
    assert s.pass_at_k == pytest.approx((1 + 1 + 0 + 1) / 4)
    assert s.resolved_label == "2.2 / 4"


def test_own_runs_are_rated_over_scored_tasks_and_published_ones_over_the_suite():
    own = {0: TaskTally(scored=1, resolved=1), 1: TaskTally(excluded=1)}
    assert score(own, universe=range(3)).tasks == 1
    published = score(own, universe=range(3), whole_suite=True)
    # Task 2 has no attempt at all: not attempted. Task 1 was, but infrastructure failed.
    assert (published.rate, published.tasks, published.missing) == (pytest.approx(1 / 3), 3, 1)
    assert (published.attempted_rate, published.attempted_tasks) == (1.0, 1)


def test_a_partial_run_has_a_whole_suite_rate_and_a_rate_on_what_it_attempted():
    # 100 tasks, 10 attempted (8 resolved), 90 missing: 8% over the suite, 80% attempted.
    attempted = {i: TaskTally(scored=1, resolved=int(i < 8)) for i in range(10)}
    missing = {i: TaskTally(missing=1) for i in range(10, 100)}
    s = score(attempted | missing, universe=range(100), whole_suite=True)
    assert (s.rate, s.tasks, s.resolved_label) == (pytest.approx(0.08), 100, "8 / 100")
    assert (s.attempted_rate, s.attempted_tasks, s.attempted_label) == (0.8, 10, "8 / 10")
    assert (s.attempted_ci_low, s.attempted_ci_high) == pytest.approx(wilson_interval(8, 10))
    assert (s.ci_low, s.ci_high) == pytest.approx(wilson_interval(8, 100))
    # Missing instances are no attempts and no failures.
    assert (s.attempts, s.scored, s.missing, s.missing_attempts) == (10, 10, 90, 90)
    assert s.partial
    # An own run (predictions without an entry for some instances) counts them 0 the same way.
    own = score(attempted | missing, universe=range(100))
    assert (own.rate, own.tasks, own.attempted_rate) == (pytest.approx(0.08), 100, 0.8)
    full = score(attempted, universe=range(10))
    assert full.rate == full.attempted_rate == 0.8 and not full.partial


def test_excluded_tasks_leave_the_rate_and_their_attempts_are_counted_apart():
    s = score(tallies((1, 1), (1, 0)), universe=range(2), excluded={1})
    assert (s.rate, s.tasks, s.scored) == (1.0, 1, 1)
    # Like infrastructure failures: attempts, but excluded, never scored.
    assert (s.attempts, s.excluded) == (2, 1)


def test_pending_attempts_are_never_failures_and_are_said():
    per_task = {
        0: TaskTally(scored=1, resolved=1),
        1: classify("queued", is_infra=False, resolved=True),
        2: classify(scoring.NOT_EVALUATED, is_infra=False, resolved=True),
        3: classify("running", is_infra=False, resolved=True),
    }
    s = score(per_task, universe=range(4))
    assert (s.rate, s.tasks, s.pending, s.not_evaluated) == (1.0, 1, 3, 1)
    assert not s.complete
    assert s.resolved_label == "1 / 1, 3 pending (1 not evaluated)"


def test_skipped_cancelled_and_infrastructure_attempts_are_excluded():
    for status, infra in (("skipped", False), ("cancelled", False), ("finished", True)):
        assert classify(status, is_infra=infra, resolved=False) == TaskTally(excluded=1)
    # Never attempted: no reason, so "resolved" by the reason alone, and still no success.
    missing = classify(scoring.MISSING, is_infra=False, resolved=True)
    assert missing == TaskTally(missing=1) and missing.attempts == 0


def test_the_interval_is_wilson_over_tasks_with_one_sample_and_clusters_several():
    one = score(tallies(*[(1, 1)] * 6, *[(1, 0)] * 4), universe=range(10))
    assert (one.ci_low, one.ci_high) == pytest.approx(wilson_interval(6, 10))
    # 30 samples on 10 tasks, every task 2 of 3: no spread between tasks to measure, so the
    # effective n falls back to the 10 tasks, never the 30 samples.
    flat = score(tallies(*[(3, 2)] * 10), universe=range(10), k=3)
    assert (flat.ci_low, flat.ci_high) == pytest.approx(wilson_interval_fraction(2 / 3, 10))
    # Tasks all-or-nothing in their samples: as uncertain as one sample a task.
    lumpy = score(tallies(*[(3, 3)] * 6, *[(3, 0)] * 4), universe=range(10), k=3)
    assert (lumpy.ci_low, lumpy.ci_high) == pytest.approx(wilson_interval(6, 10))
    naive = wilson_interval(18, 30)
    assert lumpy.ci_high - lumpy.ci_low > naive[1] - naive[0]


def test_the_paired_test_is_exact_mcnemar_with_one_sample_a_task():
    a = score(tallies(*[(1, 1)] * 8), universe=range(8))
    b = score(tallies(*[(1, 0)] * 8), universe=range(8))
    test = paired_test(a, b)
    assert test.exact
    assert test.p_value == pytest.approx(mcnemar_exact(8, 0))
    assert len(test.worse) == 8 and not test.better


def brute_force_p(diffs: list[float]) -> float:
    """Every one of the 2^n sign patterns, counted."""
    observed = abs(sum(diffs))
    hits = sum(
        abs(sum(s * d for s, d in zip(signs, diffs, strict=True))) >= observed - 1e-9
        for signs in itertools.product((-1, 1), repeat=len(diffs))
    )
    return hits / 2 ** len(diffs)


def test_the_paired_test_on_shares_is_exact():
    diffs = [1 / 3, 2 / 3, 1, 1 / 3, 2 / 3, 1, 1 / 3, 1, 2 / 3, 1]
    p, exact = sign_flip_p_value(diffs)
    # All ten tasks better: only the two all-same-sign patterns are as extreme.
    assert exact and p == pytest.approx(2 / 2**10)
    rng = random.Random(7)
    for _ in range(30):
        n = rng.randint(2, 12)
        diffs = [
            rng.choice((-1, 1)) * rng.choice((1, 2, 3, 4)) / rng.choice((3, 4)) for _ in range(n)
        ]
        p, exact = sign_flip_p_value(diffs)
        assert exact and p == pytest.approx(brute_force_p(diffs)), diffs
    p_mixed, _ = sign_flip_p_value([1 / 3, -2 / 3, 1, -1, 1 / 3, -1 / 3])
    assert p_mixed > 0.5
    assert sign_flip_p_value([]) == (1.0, True)
    # Differences too fine to scale to integers fall back to fixed-seed sign flips.
    p_fine, exact = sign_flip_p_value([0.1234567891, -0.2718281828, 0.3141592653, 0.5772156649])
    assert not exact and sign_flip_p_value(
        [0.1234567891, -0.2718281828, 0.3141592653, 0.5772156649]
    ) == (p_fine, False)


def test_the_paired_test_covers_only_the_tasks_both_rows_attempted():
    # a attempted tasks 0-9, b every task 0-49; on 0-9 they agree exactly.
    shared = {i: TaskTally(scored=1, resolved=int(i % 2 == 0)) for i in range(10)}
    rest = {i: TaskTally(scored=1, resolved=1) for i in range(10, 50)}
    a = score(
        shared | {i: TaskTally(missing=1) for i in range(10, 50)},
        universe=range(50),
        whole_suite=True,
    )
    b = score(shared | rest, universe=range(50), whole_suite=True)
    test = paired_test(a, b)
    assert (test.tasks, test.only_a, test.only_b) == (10, 0, 40)
    assert test.coverage_differs and test.p_value == 1.0 and not test.better and not test.worse
    assert len(test.same) == 5 and len(test.neither) == 5
    # The whole-suite rates differ widely; the paired test does not count the 40 missing.
    assert (a.rate, b.rate) == (pytest.approx(0.1), pytest.approx(0.9))


def test_the_leader_is_the_best_complete_non_reference_row():
    best = score(tallies(*[(1, 1)] * 9, (1, 0)), universe=range(10))
    close = score(tallies(*[(1, 1)] * 8, (1, 0), (1, 0)), universe=range(10))
    weak = score(tallies(*[(1, 0)] * 9, (1, 1)), universe=range(10))
    oracle = score(tallies(*[(1, 1)] * 10), universe=range(10))
    busy = score({**tallies(*[(1, 1)] * 10), 10: TaskTally(pending=1)}, universe=range(11))
    places = standings(
        [
            ("best", best, False),
            ("close", close, False),
            ("weak", weak, False),
            ("oracle", oracle, True),
            ("busy", busy, False),
        ]
    )
    assert places["best"].is_leader and places["best"].rank == 1
    assert places["close"].status == "tied" and places["close"].rank == 2
    assert places["weak"].status == "behind" and places["weak"].p_value < 0.05
    assert places["oracle"].status == "reference" and places["oracle"].rank is None
    assert places["busy"].status == "pending" and not places["busy"].tied
    assert places["close"].paired == 10 and not places["close"].coverage_differs


def test_the_leaderboards_batched_tests_are_the_pairs_own():
    rng = random.Random(3)

    def row(skill: float, attempted: int = 40) -> scoring.Score:
        per_task = {}
        for t in range(40):
            if t >= attempted:
                per_task[t] = TaskTally(missing=1)
                continue
            n = rng.choice((1, 2, 3))
            per_task[t] = TaskTally(scored=n, resolved=sum(rng.random() < skill for _ in range(n)))
        return score(per_task, universe=range(40), whole_suite=True, k=3)

    leader = row(0.8)
    others = [row(0.5), row(0.75), row(0.8, attempted=25), row(0.2, attempted=5)]
    batched = scoring.paired_tests(leader, others)
    for other, test in zip(others, batched, strict=True):
        alone = paired_test(leader, other)
        assert (test.p_value, test.exact, test.tasks) == (alone.p_value, alone.exact, alone.tasks)
        assert test.better == alone.better and test.worse == alone.worse
    # Small enough to count every sign pattern: the exact p is that count.
    small = [t for t in batched if 0 < len(t.better) + len(t.worse) <= 14]
    assert small
    for test in small:
        diffs = [float(d) for d in test._d if abs(d) > 1e-12]
        assert test.p_value == pytest.approx(brute_force_p(diffs))
