"""Statistical building blocks (intervals, pass@k, pass^k, exact McNemar). Pure: no Django, no I/O.

What a score is, and which of these it uses, is decided in ``runs.results.scoring``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable


def wilson_interval(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval for a binomial proportion (95% by default), as fractions.

    Chosen over the normal approximation because it stays inside [0, 1] and is honest for
    the small suites and extreme rates (0% or 100%) that benches often have.
    """
    if n <= 0:
        return (0.0, 0.0)
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be between 0 and n, got {successes} of {n}")
    return wilson_interval_fraction(successes / n, n, z)


def wilson_interval_fraction(p: float, n: float, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson interval of an observed fraction ``p`` over ``n`` (possibly an effective,
    non-integer number of independent observations)."""
    if n <= 0:
        return (0.0, 0.0)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must be a fraction between 0 and 1, got {p}")
    z2 = z * z
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k estimator for one task: 1 - C(n-c, k) / C(n, k).

    ``n`` samples of which ``c`` passed. When fewer than ``k`` samples exist (some were
    infrastructure failures and do not count), the estimate uses the ``n`` there are.
    """
    if n <= 0:
        return 0.0
    if not 0 <= c <= n:
        raise ValueError(f"c must be between 0 and n, got {c} of {n}")
    k = min(k, n)
    if k <= 0:
        raise ValueError(f"k must be at least 1, got {k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """The unbiased pass^k estimator for one task: C(c, k) / C(n, k), the chance that k
    samples drawn from the ``n`` (``c`` passed) all pass. Fewer than ``k`` samples: the
    ``n`` there are (as ``pass_at_k``)."""
    if n <= 0:
        return 0.0
    if not 0 <= c <= n:
        raise ValueError(f"c must be between 0 and n, got {c} of {n}")
    k = min(k, n)
    if k <= 0:
        raise ValueError(f"k must be at least 1, got {k}")
    return math.comb(c, k) / math.comb(n, k)


def mean_pass_at_k(per_task: Iterable[tuple[int, int]], k: int) -> float | None:
    """pass@k averaged over tasks; ``per_task`` yields (n, c). None when there are no tasks."""
    values = [pass_at_k(n, c, k) for n, c in per_task if n > 0]
    if not values:
        return None
    return sum(values) / len(values)


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from the discordant pair counts.

    ``b``: tasks only the first model solved; ``c``: tasks only the second solved. Under the
    null hypothesis each discordant task is a fair coin, so this is a binomial test of
    min(b, c) successes out of b + c at p = 1/2.
    """
    if b < 0 or c < 0:
        raise ValueError("discordant counts cannot be negative")
    n = b + c
    if n == 0:
        return 1.0
    low = min(b, c)
    tail = sum(math.comb(n, i) for i in range(low + 1))
    # Exact integer arithmetic until the last step keeps large n from underflowing.
    return min(1.0, 2 * tail / 2**n)
