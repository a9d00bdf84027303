"""What a model's score on a suite is: the one definition every results surface computes.

Pure: no Django, no I/O. The leaderboard, the comparison, the taxonomy, the attempt lists, a
run's totals, the API, the CSV/JSON exports and the CLI all feed per-task tallies into these
functions (``runs.results.selection`` reads them), so the same selection gives the same figures
everywhere.

The definition (rows, scored / excluded / pending / missing attempts, samples, the two
rates, the intervals, the paired test, standing) is written once, in docs/scoring.md; this
module implements it, and each function's docstring names the part it computes.

Tallies of many tasks are held as ``Tallies``: one integer array per count, aligned with a
``TaskIndex``, so a row's figures, pooling and the paired tests are array arithmetic.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Generic, TypeVar

import numpy as np

from runs.results.stats import mcnemar_exact, pass_at_k, pass_hat_k, wilson_interval_fraction

# Attempt statuses as stored (runs.models.AttemptStatus values; tests check they agree).
FINISHED = "finished"
MISSING = "missing"
UNRUN_STATUSES = frozenset({"skipped", "cancelled"})
FINAL_STATUSES = frozenset({FINISHED, MISSING, *UNRUN_STATUSES})
NOT_EVALUATED = "not_evaluated"

TIE_ALPHA = 0.05
PERMUTATIONS = 2000
PERMUTATION_SEED = 20261123
# The exact test convolves the distributions of the per-task differences scaled to integers;
# past this many steps (very fine differences) it falls back to random sign flips.
EXACT_STEPS_LIMIT = 1 << 17

K = TypeVar("K", bound=Hashable)

COUNTS = ("scored", "resolved", "excluded", "pending", "not_evaluated", "missing")
SCORED, RESOLVED, EXCLUDED, PENDING, NOT_EVAL, MISS = range(len(COUNTS))


@dataclass(frozen=True, slots=True)
class TaskTally:
    """The attempts of one row on one task, by how they count."""

    scored: int = 0
    resolved: int = 0
    excluded: int = 0  # infrastructure failures, skipped and cancelled attempts
    pending: int = 0  # not final, not_evaluated included
    not_evaluated: int = 0
    missing: int = 0  # never attempted (status missing): no attempt, no verdict

    def __add__(self, other: TaskTally) -> TaskTally:
        return TaskTally(
            self.scored + other.scored,
            self.resolved + other.resolved,
            self.excluded + other.excluded,
            self.pending + other.pending,
            self.not_evaluated + other.not_evaluated,
            self.missing + other.missing,
        )

    @property
    def attempts(self) -> int:
        """Attempts made (a missing instance is none)."""
        return self.scored + self.excluded + self.pending


def classify(status: str, *, is_infra: bool, resolved: bool) -> TaskTally:
    """One attempt as a tally. ``resolved``: finished with no failure reason."""
    if status == FINISHED:
        if is_infra:
            return TaskTally(excluded=1)
        return TaskTally(scored=1, resolved=int(resolved))
    if status == MISSING:
        return TaskTally(missing=1)
    if status in UNRUN_STATUSES:
        return TaskTally(excluded=1)
    return TaskTally(pending=1, not_evaluated=int(status == NOT_EVALUATED))


class TaskIndex(Generic[K]):
    """Tasks in a fixed order (sorted), and each one's position: the columns of ``Tallies``."""

    __slots__ = ("keys", "position")

    def __init__(self, keys: Iterable[K]):
        self.keys: tuple[K, ...] = _task_order(set(keys))
        self.position: dict[K, int] = {k: i for i, k in enumerate(self.keys)}

    def __len__(self) -> int:
        return len(self.keys)

    def mask(self, keys: Iterable[K]) -> np.ndarray:
        """A boolean array: True at each of ``keys`` held here."""
        out = np.zeros(len(self.keys), dtype=bool)
        at = [self.position[k] for k in keys if k in self.position]
        out[at] = True
        return out


@dataclass(frozen=True, eq=False)
class Tallies(Generic[K]):
    """Per-task tallies of one row as arrays: ``counts[COUNTS.index(name)][task position]``."""

    index: TaskIndex[K]
    counts: np.ndarray  # int64, shape (len(COUNTS), len(index))

    @classmethod
    def empty(cls, index: TaskIndex[K]) -> Tallies[K]:
        return cls(index, np.zeros((len(COUNTS), len(index)), dtype=np.int64))

    @classmethod
    def from_mapping(cls, tallies: Mapping[K, TaskTally], index: TaskIndex[K]) -> Tallies[K]:
        out = cls.empty(index)
        for key, tally in tallies.items():
            at = index.position.get(key)
            if at is not None:
                out.counts[:, at] = (
                    tally.scored,
                    tally.resolved,
                    tally.excluded,
                    tally.pending,
                    tally.not_evaluated,
                    tally.missing,
                )
        return out

    def __add__(self, other: Tallies[K]) -> Tallies[K]:
        if other.index is not self.index:
            raise ValueError("tallies over different task indexes")
        return Tallies(self.index, self.counts + other.counts)


@dataclass(frozen=True)
class Score(Generic[K]):
    """A row's figures. Rates are fractions in [0, 1]; None when no task is rated."""

    rate: float | None  # pass@1: mean per-task success fraction over ``tasks``
    resolved: float  # sum of the per-task fractions: rate x tasks
    tasks: int  # the denominator
    ci_low: float | None
    ci_high: float | None
    k: int
    pass_at_k: float | None  # None when k == 1
    pass_hat_k: float | None  # all k samples pass (None when k == 1), with its interval
    pass_hat_k_ci_low: float | None
    pass_hat_k_ci_high: float | None
    disagreeing_tasks: int  # tasks of the rate whose scored samples disagree (some resolved)
    whole_suite: bool
    attempts: int  # attempts made: scored, excluded and pending (missing ones are none)
    scored: int
    resolved_attempts: int
    excluded: int
    pending: int
    not_evaluated: int
    missing: int  # tasks of the denominator not attempted at all (nothing but missing, or absent)
    attempted_rate: float | None  # the same mean over the tasks attempted (a scored sample)
    attempted_resolved: float
    attempted_tasks: int
    attempted_ci_low: float | None
    attempted_ci_high: float | None
    missing_attempts: int  # attempts with status missing
    # Successes that carry an integrity flag (runs.integrity), among ``resolved_attempts``
    # unless ``flagged_counted_out``: then they count as failures in every figure above.
    flagged: int
    flagged_counted_out: bool
    # Arrays over ``index``: each task's fraction in the rate, whether it is in the rate's
    # denominator, each task's attempted fraction (resolved / scored) and scored samples.
    index: TaskIndex[K] = field(repr=False)
    _share: np.ndarray = field(repr=False)
    _in_rate: np.ndarray = field(repr=False)
    _attempted_share: np.ndarray = field(repr=False)
    _scored: np.ndarray = field(repr=False)

    @property
    def complete(self) -> bool:
        return self.pending == 0

    @property
    def _attempted(self) -> np.ndarray:
        return self._scored > 0

    @property
    def resolved_label(self) -> str:
        """ "57 / 62" (or "14.3 / 23" with several samples a task), pending said after."""
        text = f"{_count(self.resolved)} / {self.tasks}"
        if self.pending:
            text += f", {self.pending} pending"
            if self.not_evaluated:
                text += f" ({self.not_evaluated} not evaluated)"
        return text

    @property
    def attempted_label(self) -> str:
        """ "81 / 100" over the attempted tasks."""
        return f"{_count(self.attempted_resolved)} / {self.attempted_tasks}"

    def attempted_keys(self) -> list[K]:
        """The tasks of the rate with a scored sample (instances left out excepted)."""
        return [self.index.keys[i] for i in np.flatnonzero(self._attempted)]

    @property
    def partial(self) -> bool:
        """Some task of the denominator was not attempted: the two rates differ in meaning."""
        return self.attempted_tasks < self.tasks


def _count(value: float) -> str:
    return str(round(value)) if abs(value - round(value)) < 1e-9 else f"{value:.1f}"


def score(
    tallies: Mapping[K, TaskTally] | Tallies[K],
    *,
    universe: Iterable[K] | None = None,
    whole_suite: bool = False,
    k: int = 1,
    excluded: Iterable[K] | np.ndarray = (),
    flagged: np.ndarray | None = None,
    count_out_flagged: bool = False,
) -> Score[K]:
    """The score of one row from its per-task tallies.

    ``tallies``: a mapping task -> ``TaskTally`` (then ``universe``, the selection's tasks, is
    required; tallies on other tasks are ignored) or ``Tallies`` over the selection's index.
    ``whole_suite``: published results, rated over every task of the universe; ``k``: samples
    per task for pass@k; ``excluded``: tasks (or a mask over the index) left out of the rate
    (instances found invalid), whose attempts are counted apart as ``excluded``.
    ``flagged``: per task over the index, the resolved attempts carrying an integrity flag;
    ``count_out_flagged``: count those as failures (docs/integrity.md).
    """
    if isinstance(tallies, Tallies):
        table = tallies
    else:
        if universe is None:
            raise ValueError("universe: the selection's tasks are needed with a mapping")
        table = Tallies.from_mapping(tallies, TaskIndex(universe))
    index = table.index
    skip = excluded if isinstance(excluded, np.ndarray) else index.mask(excluded)
    sc, rs, ex, pe, ne, mi = table.counts
    flags = np.zeros(len(index), dtype=np.int64) if flagged is None else np.minimum(flagged, rs)
    if count_out_flagged:
        rs = rs - flags
    made = sc + ex + pe
    valid = ~skip
    set_aside = int(made[skip].sum())
    trials = sc + mi  # the samples the whole-suite rate counts (missing ones unresolved)
    in_rate = valid.copy() if whole_suite else valid & (trials > 0)
    share = np.divide(rs, trials, out=np.zeros(len(index)), where=trials > 0)
    attempted = valid & (sc > 0)
    attempted_share = np.divide(rs, sc, out=np.zeros(len(index)), where=sc > 0)
    n_tasks = int(in_rate.sum())
    rate = low = high = pk = phk = phk_low = phk_high = None
    total = 0.0
    if n_tasks:
        shares = share[in_rate]
        total = float(shares.sum())
        rate = total / n_tasks
        low, high = _clustered(shares, int(trials[in_rate].sum()))
        if k > 1:
            pk = _mean_pass_at_k(trials[in_rate], rs[in_rate], k)
            every = _pass_hat_k_shares(trials[in_rate], rs[in_rate], k)
            phk = float(every.mean())
            phk_low, phk_high = _clustered(every, int(trials[in_rate].sum()))
    disagreeing = int((in_rate & (sc > 1) & (rs > 0) & (rs < sc)).sum())
    n_attempted = int(attempted.sum())
    a_rate = a_low = a_high = None
    a_total = 0.0
    if n_attempted:
        a_shares = attempted_share[attempted]
        a_total = float(a_shares.sum())
        a_rate = a_total / n_attempted
        a_low, a_high = _clustered(a_shares, int(sc[attempted].sum()))
    return Score(
        rate=rate,
        resolved=total,
        tasks=n_tasks,
        ci_low=low,
        ci_high=high,
        k=k,
        pass_at_k=pk,
        pass_hat_k=phk,
        pass_hat_k_ci_low=phk_low,
        pass_hat_k_ci_high=phk_high,
        disagreeing_tasks=disagreeing,
        whole_suite=whole_suite,
        attempts=int(made[valid].sum()) + set_aside,
        scored=int(sc[valid].sum()),
        resolved_attempts=int(rs[valid].sum()),
        excluded=int(ex[valid].sum()) + set_aside,
        pending=int(pe[valid].sum()),
        not_evaluated=int(ne[valid].sum()),
        missing=int((in_rate & (made == 0)).sum()),
        attempted_rate=a_rate,
        attempted_resolved=a_total,
        attempted_tasks=n_attempted,
        attempted_ci_low=a_low,
        attempted_ci_high=a_high,
        missing_attempts=int(mi[valid].sum()),
        flagged=int(flags[valid].sum()),
        flagged_counted_out=count_out_flagged,
        index=index,
        _share=share,
        _in_rate=in_rate,
        _attempted_share=attempted_share,
        _scored=np.where(attempted, sc, 0),
    )


def _pass_hat_k_shares(n: np.ndarray, c: np.ndarray, k: int) -> np.ndarray:
    """Each task's pass^k (a task with no sample: 0), the estimator once per (n, c) pair."""
    memo: dict[tuple[int, int], float] = {}
    out = np.empty(len(n))
    for i, pair in enumerate(zip(n.tolist(), c.tolist(), strict=True)):
        if pair not in memo:
            memo[pair] = pass_hat_k(pair[0], pair[1], k)
        out[i] = memo[pair]
    return out


def _mean_pass_at_k(n: np.ndarray, c: np.ndarray, k: int) -> float:
    # Rows share a few distinct (n, c) pairs: the estimator once per pair present.
    width = int(c.max()) + 1
    seen = np.bincount(n * width + c)
    total = 0.0
    for key in np.flatnonzero(seen):
        samples, resolved = divmod(int(key), width)
        if samples:
            total += pass_at_k(samples, resolved, k) * int(seen[key])
    return total / len(n)


def clustered_interval(rates: Sequence[float], samples: int) -> tuple[float, float]:
    """95% Wilson interval of the mean of per-task rates, n = the effective number of tasks.

    n_eff = p(1-p) / Var with Var = sum((r - p)^2) / T^2 (the variance of the mean with tasks
    as clusters), kept between T and the number of scored samples: T when every task has one
    sample (plain Wilson over tasks) or when the rates leave no spread to measure.
    """
    if not rates:
        raise ValueError("no tasks to rate")
    return _clustered(np.asarray(rates, dtype=np.float64), samples)


def _clustered(shares: np.ndarray, samples: int) -> tuple[float, float]:
    n_tasks = len(shares)
    p = min(1.0, max(0.0, float(shares.sum()) / n_tasks))
    spread = float(((shares - p) ** 2).sum())
    n_eff = float(n_tasks)
    if spread > 1e-12 and 0 < p < 1:
        n_eff = p * (1 - p) * n_tasks * n_tasks / spread
    n_eff = min(max(n_eff, float(n_tasks)), float(max(samples, n_tasks)))
    return wilson_interval_fraction(p, n_eff)


@dataclass(frozen=True, eq=False)
class PairedTest(Generic[K]):
    """Row b against row a on the tasks both attempted. Task lists are in task order."""

    tasks: int  # n: the tasks both attempted
    only_a: int  # tasks a attempted and b did not
    only_b: int
    mean_difference: float | None  # mean of b - a over the paired tasks
    p_value: float
    exact: bool
    _index: TaskIndex[K]
    _at: np.ndarray  # positions in the index of the paired tasks
    _d: np.ndarray  # b - a per paired task
    _xa: np.ndarray

    @property
    def significant(self) -> bool:
        return self.p_value < TIE_ALPHA

    @property
    def coverage_differs(self) -> bool:
        """The rows did not attempt the same tasks: the test covers only the shared ones."""
        return bool(self.only_a or self.only_b)

    @property
    def shared_rate_a(self) -> float | None:
        """a's rate on the paired tasks alone (b's: ``shared_rate_a + mean_difference``)."""
        return float(self._xa.mean()) if self.tasks else None

    @property
    def shared_rate_b(self) -> float | None:
        return float((self._xa + self._d).mean()) if self.tasks else None

    def _pick(self, mask: np.ndarray) -> tuple[K, ...]:
        keys = self._index.keys
        return tuple(keys[i] for i in self._at[mask])

    @functools.cached_property
    def better(self) -> tuple[K, ...]:  # b's fraction is higher
        return self._pick(self._d > 1e-12)

    @functools.cached_property
    def worse(self) -> tuple[K, ...]:
        return self._pick(self._d < -1e-12)

    @functools.cached_property
    def same(self) -> tuple[K, ...]:  # equal and above zero
        return self._pick((np.abs(self._d) <= 1e-12) & (self._xa > 0))

    @functools.cached_property
    def neither(self) -> tuple[K, ...]:  # both zero
        return self._pick((np.abs(self._d) <= 1e-12) & (self._xa <= 0))


def paired_test(a: Score[K], b: Score[K]) -> PairedTest[K]:
    """The paired sign-flip permutation test of b against a (see the module docstring)."""
    return paired_tests(a, [b])[0]


def paired_tests(a: Score[K], others: Sequence[Score[K]]) -> list[PairedTest[K]]:
    """``paired_test(a, b)`` for each b of ``others``, their exact p-values computed together
    (one inverse FFT for all: the leaderboard tests every row against the leader)."""
    halves = []
    for b in others:
        left, right = (
            (a, b) if a.index is b.index or a.index.keys == b.index.keys else _realigned(a, b)
        )
        att_a, att_b = left._attempted, right._attempted
        at = np.flatnonzero(att_a & att_b)
        xa = left._attempted_share[at]
        d = right._attempted_share[at] - xa
        halves.append((left, att_a, att_b, at, xa, d, np.lcm(left._scored[at], right._scored[at])))
    p_values = sign_flip_p_values([(h[5], h[6]) for h in halves])
    return [
        PairedTest(
            tasks=len(at),
            only_a=int((att_a & ~att_b).sum()),
            only_b=int((att_b & ~att_a).sum()),
            mean_difference=float(d.mean()) if len(at) else None,
            p_value=p,
            exact=exact,
            _index=left.index,
            _at=at,
            _d=d,
            _xa=xa,
        )
        for (left, att_a, att_b, at, xa, d, _), (p, exact) in zip(halves, p_values, strict=True)
    ]


def _realigned(a: Score[K], b: Score[K]) -> tuple[Score[K], Score[K]]:
    """Two scores computed over different task indexes, over their union (tests, one-offs)."""
    index = TaskIndex([*a.index.keys, *b.index.keys])

    def moved(s: Score[K]) -> Score[K]:
        at = [index.position[k] for k in s.index.keys]

        def spread(values: np.ndarray, fill) -> np.ndarray:
            out = np.full(len(index), fill, dtype=values.dtype)
            out[at] = values
            return out

        return Score(
            **{f: getattr(s, f) for f in SCORE_FIGURES},
            index=index,
            _share=spread(s._share, 0.0),
            _in_rate=spread(s._in_rate, False),
            _attempted_share=spread(s._attempted_share, 0.0),
            _scored=spread(s._scored, 0),
        )

    return moved(a), moved(b)


def sign_flip_p_value(
    diffs: Sequence[float] | np.ndarray, *, denominators: np.ndarray | None = None
) -> tuple[float, bool]:
    """Two-sided p-value of sum(diffs) under random signs, and whether it is exact.

    Equal magnitudes make the sum a scaled binomial: the exact McNemar p-value. Differences of
    resolved shares are fractions with small denominators (``denominators``, else read from the
    values): scaled to integers, the exact distribution of the signed sum is the convolution of
    one binomial per distinct magnitude (``_exact_sign_flips``). Past ``EXACT_STEPS_LIMIT`` a
    Monte Carlo estimate, (1 + hits) / (1 + PERMUTATIONS), over a fixed sign matrix
    (reproducible on every page).
    """
    return sign_flip_p_values([(diffs, denominators)])[0]


def sign_flip_p_values(
    tests: Sequence[tuple[Sequence[float] | np.ndarray, np.ndarray | None]],
) -> list[tuple[float, bool]]:
    """``sign_flip_p_value`` of each (diffs, denominators), the exact ones in one batch."""
    out: list[tuple[float, bool] | None] = []
    exact: list[tuple[int, np.ndarray, int]] = []  # (slot, integer steps, observed sum)
    for diffs, denominators in tests:
        values = np.asarray(diffs, dtype=np.float64)
        keep = np.abs(values) > 1e-12
        values = values[keep]
        if not len(values):
            out.append((1.0, True))
            continue
        size = abs(values[0])
        if bool(np.all(np.abs(np.abs(values) - size) < 1e-9)):
            ups = int(np.count_nonzero(values > 0))
            out.append((mcnemar_exact(len(values) - ups, ups), True))
            continue
        if denominators is not None:
            scale = int(np.lcm.reduce(np.asarray(denominators)[keep].astype(np.int64)))
        else:
            scale = _common_denominator(values)
        steps = np.rint(np.abs(values) * scale) if scale else None
        if (
            steps is not None
            and float(np.abs(np.abs(values) * scale - steps).max()) < 1e-6
            and float(steps.sum()) <= EXACT_STEPS_LIMIT
        ):
            exact.append((len(out), steps.astype(np.int64), int(np.rint(values * scale).sum())))
            out.append(None)
        else:
            out.append((_monte_carlo(values), False))
    for (slot, _, _), p in zip(exact, _exact_sign_flips(exact), strict=True):
        out[slot] = (p, True)
    return out  # type: ignore[return-value]


def _common_denominator(values: np.ndarray) -> int:
    """The least common denominator of the values read as fractions (0 when there is none
    small enough to scale by)."""
    scale = 1
    for value in np.unique(np.round(np.abs(values), 12)):
        scale = math.lcm(scale, Fraction(float(value)).limit_denominator(1000).denominator)
        if scale > EXACT_STEPS_LIMIT:
            return 0
    return scale


def _exact_sign_flips(tests: list[tuple[int, np.ndarray, int]]) -> list[float]:
    """For each (slot, steps, observed): P(|sum of +-steps| >= |observed|) under independent
    fair signs, exactly (up to float rounding).

    X, the sum of the steps signed +, ranges over 0..T (T = sum of steps); each distinct step
    size a with c tasks adds a * Binomial(c, 1/2) to it, whose generating function is
    ((1 + z^a) / 2)^c. Their product on the unit circle is X's spectrum, exp(-i t T / 2) *
    prod cos(t a / 2)^c, computed directly (no forward transforms; the product as the exp of a
    sum of logs, with its sign); one inverse FFT of all the tests' spectra gives each X's
    distribution, and the signed sum is 2X - T.
    """
    if not tests:
        return []
    totals = np.array([int(steps.sum()) for _, steps, _ in tests])
    length = 1 << int(totals.max()).bit_length()  # > every total: no wrap-around
    sizes = np.unique(np.concatenate([steps for _, steps, _ in tests]))
    column = {int(size): i for i, size in enumerate(sizes)}
    counts = np.zeros((len(tests), len(sizes)))
    for row, (_, steps, _) in enumerate(tests):
        found, times = np.unique(steps, return_counts=True)
        counts[row, [column[int(f)] for f in found]] = times
    angle = 2 * np.pi * np.arange(length // 2 + 1) / length
    cosines = np.cos(np.outer(sizes / 2, angle))
    # einsum, not ``@``: BLAS's threads are slow on a busy machine.
    log_size = np.einsum("ps,sf->pf", counts, np.log(np.abs(cosines) + 1e-300))
    negative = np.einsum("ps,sf->pf", counts % 2, (cosines < 0).astype(np.float64))
    sign = np.where(np.rint(negative) % 2, -1.0, 1.0)
    spectrum = np.exp(log_size) * sign * np.exp(-0.5j * np.outer(totals, angle))
    pmfs = np.clip(np.fft.irfft(spectrum, length, axis=1), 0.0, None)
    out = []
    for (_, _, observed), total, pmf in zip(tests, totals.tolist(), pmfs, strict=True):
        distance = abs(observed)
        high = (total + distance + 1) // 2  # first X with 2X - T >= distance
        low = (total - distance) // 2  # last X with 2X - T <= -distance
        if distance == 0 or low >= high:
            out.append(1.0)
        else:
            tail = pmf[high : total + 1].sum() + pmf[: low + 1].sum()
            # Rounded past float noise: a test gives the same p alone or in a batch (whose
            # common transform length changes the last bits).
            out.append(round(float(min(1.0, tail)), 12))
    return out


def _monte_carlo(values: np.ndarray) -> float:
    signs = _signs(len(values))[: len(values)]
    # einsum, not ``@``: BLAS's threads made this 30x slower on a busy machine.
    sums = np.abs(np.einsum("i,ij->j", values, signs))
    observed = abs(float(values.sum()))
    hits = int(np.count_nonzero(sums >= observed - 1e-9))
    return (1 + hits) / (1 + PERMUTATIONS)


def _signs(rows: int) -> np.ndarray:
    # Rounded up so a few sizes cover every pair; each row is drawn from the stream in turn,
    # so the first m rows are the same whatever the size asked for.
    return _sign_matrix(max(256, 1 << (rows - 1).bit_length()))


@functools.lru_cache(maxsize=4)
def _sign_matrix(rows: int) -> np.ndarray:
    draws = np.random.default_rng(PERMUTATION_SEED).random((rows, PERMUTATIONS))
    return np.where(draws < 0.5, -1.0, 1.0)


def _task_order(tasks: Iterable[K]) -> tuple[K, ...]:
    try:
        return tuple(sorted(tasks))  # type: ignore[type-var]
    except TypeError:  # keys of mixed types: still one fixed order
        return tuple(sorted(tasks, key=lambda t: (type(t).__name__, str(t))))


@dataclass(frozen=True)
class Standing:
    """Where a row stands: rank among ranked rows, leader, tie mark and why not."""

    # "leader", "tied", "behind", "partial", "pending", "reference", "unscored". "partial": a
    # ranked row that did not attempt every task of its denominator (``Score.partial``): its
    # rank uses the whole-suite rate, the paired test only the tasks both attempted, so no
    # tie is claimed either way (issue 29); ``p_value``/``paired`` still give that test.
    status: str
    rank: int | None = None
    p_value: float | None = None
    paired: int | None = None  # the tasks the test against the leader covered
    coverage_differs: bool = False  # the row and the leader did not attempt the same tasks

    @property
    def is_leader(self) -> bool:
        return self.status == "leader"

    @property
    def tied(self) -> bool:
        return self.status in ("leader", "tied")


def standings(entries: Sequence[tuple[K, Score, bool]]) -> dict[K, Standing]:
    """Rank, leader and ties for (key, score, is_reference) rows; earlier entries win ties."""
    out: dict[K, Standing] = {}
    ranked = []
    for position, (key, s, is_reference) in enumerate(entries):
        if is_reference:
            out[key] = Standing("reference")
        elif s.rate is None:
            out[key] = Standing("pending" if s.pending else "unscored")
        elif not s.complete:
            out[key] = Standing("pending")
        else:
            ranked.append((position, key, s))
    ranked.sort(key=lambda item: (-(item[2].rate or 0.0), item[0]))
    if not ranked:
        return out
    leader = ranked[0][2]
    out[ranked[0][1]] = Standing("leader", 1)
    tests = paired_tests(leader, [s for _, _, s in ranked[1:]])
    for rank, ((_, key, s), test) in enumerate(zip(ranked[1:], tests, strict=True), start=2):
        p = test.p_value
        status = "partial" if s.partial else "tied" if p >= TIE_ALPHA else "behind"
        out[key] = Standing(status, rank, p, test.tasks, test.coverage_differs)
    return out


@dataclass(frozen=True)
class GroupScore:
    """A row's rate on one group of tasks (a repository, a label)."""

    group: str
    tasks: int
    resolved: float
    # The same over the group's tasks the row attempted (a scored sample): for a partial row
    # the whole-suite rate above counts the tasks it never tried as 0.
    attempted_tasks: int = 0
    attempted_resolved: float = 0.0

    @property
    def rate(self) -> float | None:
        return self.resolved / self.tasks if self.tasks else None

    @property
    def attempted_rate(self) -> float | None:
        return self.attempted_resolved / self.attempted_tasks if self.attempted_tasks else None

    @property
    def partial(self) -> bool:
        return self.attempted_tasks < self.tasks


@dataclass(frozen=True, eq=False)
class TaskGroups:
    """Each task's group (a repository) as codes over a task index: computed once a page."""

    names: tuple[str, ...]
    codes: np.ndarray  # int, one per task of the index

    @classmethod
    def of(cls, index: TaskIndex[K], groups: Mapping[K, str]) -> TaskGroups:
        names = tuple(sorted({groups.get(k, "") for k in index.keys}))
        code = {n: i for i, n in enumerate(names)}
        return cls(names, np.array([code[groups.get(k, "")] for k in index.keys], dtype=np.int64))


def by_group(s: Score[K], groups: Mapping[K, str] | TaskGroups) -> dict[str, GroupScore]:
    """The score's per-task fractions averaged within each group (same denominator rules)."""
    if not isinstance(groups, TaskGroups):
        groups = TaskGroups.of(s.index, groups)
    codes = groups.codes[s._in_rate]
    width = len(groups.names)
    tasks = np.bincount(codes, minlength=width)
    sums = np.bincount(codes, weights=s._share[s._in_rate], minlength=width)
    tried = s._attempted
    a_codes = groups.codes[tried]
    a_tasks = np.bincount(a_codes, minlength=width)
    a_sums = np.bincount(a_codes, weights=s._attempted_share[tried], minlength=width)
    return {
        name: GroupScore(name, int(tasks[i]), float(sums[i]), int(a_tasks[i]), float(a_sums[i]))
        for i, name in enumerate(groups.names)
        if tasks[i]
    }


def attempt_outcome(status: str, *, is_infra: bool, resolved: bool) -> str:
    """How one attempt counts, as a word for lists: resolved, failed, missing, infra,
    pending or not_evaluated (``classify`` in one word)."""
    tally = classify(status, is_infra=is_infra, resolved=resolved)
    if tally.resolved:
        return "resolved"
    if tally.missing:
        return "missing"
    if tally.scored:
        return "failed"
    if tally.excluded:
        return "infra"
    return "not_evaluated" if tally.not_evaluated else "pending"


SCORE_FIGURES = (
    "rate",
    "resolved",
    "tasks",
    "ci_low",
    "ci_high",
    "k",
    "pass_at_k",
    "pass_hat_k",
    "pass_hat_k_ci_low",
    "pass_hat_k_ci_high",
    "disagreeing_tasks",
    "whole_suite",
    "attempts",
    "scored",
    "resolved_attempts",
    "excluded",
    "pending",
    "not_evaluated",
    "missing",
    "attempted_rate",
    "attempted_resolved",
    "attempted_tasks",
    "attempted_ci_low",
    "attempted_ci_high",
    "missing_attempts",
    "flagged",
    "flagged_counted_out",
)


def score_record(s: Score) -> dict:
    """A score's figures as plain values, the same keys in every export (API, CSV, JSON)."""
    return {**{f: getattr(s, f) for f in SCORE_FIGURES}, "complete": s.complete}


def pair_figures(test: PairedTest) -> dict:
    """A paired test's n, coverage and verdict as plain values (leaderboard and compare)."""
    return {
        "paired": test.tasks,
        "only_a": test.only_a,
        "only_b": test.only_b,
        "coverage_differs": test.coverage_differs,
        "p_value": test.p_value,
        "exact": test.exact,
    }
