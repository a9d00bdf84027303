"""What a model's score on a suite is: the one definition every results surface computes.

Pure: no Django, no I/O. The leaderboard, the comparison, the taxonomy, the attempt lists, a
run's totals, the API, the CSV/JSON exports and the CLI all feed per-task tallies into these
functions (``runs.results.selection`` reads them), so the same selection gives the same figures
everywhere.

The definition (README, "How a score is computed", says the same):

* **Rows.** Each run (harness run, evaluated predictions, imported published results) is its own
  row. A configuration can also be shown as one aggregate row over a chosen set of its runs:
  the samples of those runs are pooled task by task.
* **Attempts.** A finished attempt is *scored* unless it ended for an infrastructure reason;
  infrastructure failures, skipped (fail-fast) and cancelled attempts are *excluded* (counted
  apart, never failures). Every attempt that is not final (queued, running, imported and not
  evaluated yet, or any later non-final status) is *pending*: never a failure, never a success.
  ``not_evaluated`` attempts are counted among the pending and also on their own.
* **Samples.** A task's success fraction is resolved / scored samples on it. The score (shown
  as "resolved %", and pass@1) is the mean of that fraction over the denominator's tasks, so a
  task counts once however many samples it has. pass@k is the mean over the same tasks of the
  unbiased estimator 1 - C(n-c, k) / C(n, k) (k = the run's samples; n < k uses n).
* **Denominator.** Published results: every task of the selection (a task with no entry, or
  only an excluded one, counts 0). Own runs and evaluated predictions: the tasks with at least
  one scored sample. Tasks passed as ``excluded`` (e.g. instances whose gold patch does not
  validate) are left out of both.
* **Interval.** 95% Wilson score interval of the rate with n = the effective number of tasks:
  p(1-p) / Var, Var the task-clustered variance of the mean, sum((r_t - p)^2) / T^2, bounded
  below by the number of tasks T and above by the number of scored samples. With one sample a
  task this is exactly the Wilson interval over tasks; several samples of one task are never
  treated as independent draws.
* **Paired test.** Two rows are compared on the tasks both have in their denominators with a
  two-sided paired sign-flip permutation test of the mean per-task difference. When every
  differing task differs by the same amount (one sample a task) it is computed exactly and
  equals the exact McNemar test; otherwise from 2,000 random sign flips with a fixed seed, so
  it is reproducible. Leaderboard ties and the compare page use this one test.
* **Standing.** A row with pending attempts shows its figures so far and says how many are
  pending; it is not ranked, not the leader and never tied. References (oracle, no-op agents)
  are shown apart, never ranked. The leader is the complete, non-reference row with the best
  rate; a complete row is tied with it when the paired test gives p >= 0.05.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import numpy as np

from runs.results.stats import mcnemar_exact, pass_at_k, wilson_interval_fraction

# Attempt statuses as stored (runs.models.AttemptStatus values; tests check they agree).
FINISHED = "finished"
UNRUN_STATUSES = frozenset({"skipped", "cancelled"})
FINAL_STATUSES = frozenset({FINISHED, *UNRUN_STATUSES})
NOT_EVALUATED = "not_evaluated"

TIE_ALPHA = 0.05
PERMUTATIONS = 2000
PERMUTATION_SEED = 20261123

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True, slots=True)
class TaskTally:
    """The attempts of one row on one task, by how they count."""

    scored: int = 0
    resolved: int = 0
    excluded: int = 0  # infrastructure failures, skipped and cancelled attempts
    pending: int = 0  # not final, not_evaluated included
    not_evaluated: int = 0
    missing: int = 0  # published results without an entry for the task (scored, unresolved)

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
        return self.scored + self.excluded + self.pending


def classify(status: str, *, is_infra: bool, resolved: bool, is_missing: bool) -> TaskTally:
    """One attempt as a tally. ``resolved``: finished with no failure reason."""
    if status == FINISHED:
        if is_infra:
            return TaskTally(excluded=1)
        return TaskTally(scored=1, resolved=int(resolved and not is_missing), missing=is_missing)
    if status in UNRUN_STATUSES:
        return TaskTally(excluded=1)
    return TaskTally(pending=1, not_evaluated=int(status == NOT_EVALUATED))


def pool(tallies: Iterable[Mapping[K, TaskTally]]) -> dict[K, TaskTally]:
    """Several runs' tallies added task by task (a configuration's aggregate row)."""
    pooled: dict[K, TaskTally] = {}
    for per_task in tallies:
        for task, tally in per_task.items():
            have = pooled.get(task)
            pooled[task] = tally if have is None else have + tally
    return pooled


@dataclass(frozen=True)
class Score(Generic[K]):
    """A row's figures. Rates are fractions in [0, 1]; None when no task is scored."""

    rate: float | None  # pass@1: mean per-task success fraction over ``tasks``
    resolved: float  # sum of the per-task fractions: rate x tasks
    tasks: int  # the denominator
    ci_low: float | None
    ci_high: float | None
    k: int
    pass_at_k: float | None  # None when k == 1
    whole_suite: bool
    attempts: int
    scored: int
    resolved_attempts: int
    excluded: int
    pending: int
    not_evaluated: int
    missing: int  # published: tasks without a scored entry (absent or flagged missing)
    per_task: Mapping[K, float] = field(repr=False)  # each denominator task's fraction

    @property
    def complete(self) -> bool:
        return self.pending == 0

    @functools.cached_property
    def vector(self) -> tuple[tuple[K, ...], np.ndarray]:
        """The denominator's tasks in task order and their fractions (for paired tests)."""
        keys = _task_order(self.per_task)
        return keys, np.fromiter((self.per_task[k] for k in keys), np.float64, len(keys))

    @property
    def resolved_label(self) -> str:
        """ "57 / 62" (or "14.3 / 23" with several samples a task), pending said after."""
        text = f"{_count(self.resolved)} / {self.tasks}"
        if self.pending:
            text += f", {self.pending} pending"
            if self.not_evaluated:
                text += f" ({self.not_evaluated} not evaluated)"
        return text


def _count(value: float) -> str:
    return str(round(value)) if abs(value - round(value)) < 1e-9 else f"{value:.1f}"


def score(
    tallies: Mapping[K, TaskTally],
    *,
    universe: Iterable[K],
    whole_suite: bool = False,
    k: int = 1,
    excluded: Iterable[K] = (),
) -> Score[K]:
    """The score of one row from its per-task tallies.

    ``universe``: the selection's tasks (tallies on other tasks are ignored); ``whole_suite``:
    published results, rated over every task of the universe; ``k``: samples per task for
    pass@k; ``excluded``: tasks left out of the rate (instances found invalid), whose attempts
    are counted apart with the infrastructure failures, as ``excluded``.
    """
    skip = frozenset(excluded)
    universe = list(universe)
    tasks = [t for t in universe if t not in skip] if skip else universe
    get = tallies.get
    set_aside = sum(tally.attempts for t in universe if t in skip and (tally := get(t)))
    present = [(t, tally) for t in tasks if (tally := get(t)) is not None]
    # Rows share a few hundred distinct tallies: sum over those, not over every task.
    kinds = Counter(tally for _, tally in present)
    attempts = sum(t.attempts * n for t, n in kinds.items()) + set_aside
    scored = sum(t.scored * n for t, n in kinds.items())
    resolved_attempts = sum(t.resolved * n for t, n in kinds.items())
    excluded_n = sum(t.excluded * n for t, n in kinds.items()) + set_aside
    pending = sum(t.pending * n for t, n in kinds.items())
    not_evaluated = sum(t.not_evaluated * n for t, n in kinds.items())
    per_task: dict[K, float] = {
        t: tally.resolved / tally.scored for t, tally in present if tally.scored
    }
    counts: Counter[tuple[int, int]] = Counter()  # (scored, resolved) -> tasks
    for tally, n in kinds.items():
        if tally.scored:
            counts[(tally.scored, tally.resolved)] += n
    missing = 0
    if whole_suite:
        missing = sum(n for t, n in kinds.items() if t.scored and t.missing == t.scored)
        for t in tasks:
            if t not in per_task:
                per_task[t] = 0.0
                missing += 1
        counts[(0, 0)] += len(per_task) - sum(counts.values())
    n_tasks = len(per_task)
    if not n_tasks:
        return Score(
            None, 0.0, 0, None, None, k, None, whole_suite, attempts, scored,
            resolved_attempts, excluded_n, pending, not_evaluated, missing, per_task,
        )  # fmt: skip
    shares: Counter[float] = Counter()
    for (n, c), times in counts.items():
        shares[c / n if n else 0.0] += times
    total = math.fsum(share * times for share, times in shares.items())
    rate = total / n_tasks
    low, high = _clustered(shares, n_tasks, scored)
    pk = None
    if k > 1:
        pk = (
            math.fsum(
                (pass_at_k(n, c, k) if n else 0.0) * times for (n, c), times in counts.items()
            )
            / n_tasks
        )
    return Score(
        rate, total, n_tasks, low, high, k, pk, whole_suite, attempts, scored,
        resolved_attempts, excluded_n, pending, not_evaluated, missing, per_task,
    )  # fmt: skip


def clustered_interval(rates: Sequence[float], samples: int) -> tuple[float, float]:
    """95% Wilson interval of the mean of per-task rates, n = the effective number of tasks.

    n_eff = p(1-p) / Var with Var = sum((r - p)^2) / T^2 (the variance of the mean with tasks
    as clusters), kept between T and the number of scored samples: T when every task has one
    sample (plain Wilson over tasks) or when the rates leave no spread to measure.
    """
    if not rates:
        raise ValueError("no tasks to rate")
    return _clustered(Counter(rates), len(rates), samples)


def _clustered(shares: Mapping[float, int], n_tasks: int, samples: int) -> tuple[float, float]:
    p = math.fsum(r * n for r, n in shares.items()) / n_tasks
    spread = math.fsum((r - p) ** 2 * n for r, n in shares.items())
    n_eff = float(n_tasks)
    if spread > 0 and 0 < p < 1:
        n_eff = p * (1 - p) * n_tasks * n_tasks / spread
    n_eff = min(max(n_eff, float(n_tasks)), float(max(samples, n_tasks)))
    return wilson_interval_fraction(p, n_eff)


@dataclass(frozen=True)
class PairedTest(Generic[K]):
    """Row b against row a on the tasks both rate. Task lists are in task order."""

    tasks: int
    better: tuple[K, ...]  # b's fraction is higher
    worse: tuple[K, ...]
    same: tuple[K, ...]  # equal and above zero
    neither: tuple[K, ...]  # both zero
    mean_difference: float | None  # mean of b - a over the paired tasks
    p_value: float
    exact: bool

    @property
    def significant(self) -> bool:
        return self.p_value < TIE_ALPHA


def paired_test(a: Score[K], b: Score[K]) -> PairedTest[K]:
    """The paired sign-flip permutation test of b against a (see the module docstring)."""
    keys, xa = a.vector
    keys_b, xb = b.vector
    if keys is not keys_b and keys != keys_b:
        common = set(a.per_task).intersection(b.per_task)
        keys = tuple(k for k in keys if k in common)
        xa = np.fromiter((a.per_task[k] for k in keys), np.float64, len(keys))
        xb = np.fromiter((b.per_task[k] for k in keys), np.float64, len(keys))
    d = xb - xa
    up, down = d > 1e-12, d < -1e-12
    equal = ~(up | down)
    positive = xa > 0

    def pick(mask: np.ndarray) -> tuple[K, ...]:
        return tuple(keys[i] for i in np.flatnonzero(mask))

    p, exact = sign_flip_p_value(d[up | down])
    return PairedTest(
        tasks=len(keys),
        better=pick(up),
        worse=pick(down),
        same=pick(equal & positive),
        neither=pick(equal & ~positive),
        mean_difference=float(d.mean()) if len(keys) else None,
        p_value=p,
        exact=exact,
    )


def sign_flip_p_value(diffs: Sequence[float] | np.ndarray) -> tuple[float, bool]:
    """Two-sided p-value of sum(diffs) under random signs, and whether it is exact.

    Equal magnitudes make the sum a scaled binomial: the exact McNemar p-value. Otherwise a
    Monte Carlo estimate, (1 + hits) / (1 + PERMUTATIONS), over a fixed sign matrix whose
    first rows depend only on the seed, so a pair gets the same p on every page.
    """
    values = np.asarray(diffs, dtype=np.float64)
    values = values[values != 0]
    if not len(values):
        return 1.0, True
    size = abs(values[0])
    if bool(np.all(np.abs(np.abs(values) - size) < 1e-9)):
        ups = int(np.count_nonzero(values > 0))
        return mcnemar_exact(len(values) - ups, ups), True
    signs = _signs(len(values))[: len(values)]
    # einsum, not ``@``: BLAS's threads made this 30x slower on a busy machine.
    sums = np.abs(np.einsum("i,ij->j", values, signs))
    observed = abs(float(values.sum()))
    hits = int(np.count_nonzero(sums >= observed - 1e-9))
    return (1 + hits) / (1 + PERMUTATIONS), False


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

    status: str  # "leader", "tied", "behind", "pending", "reference", "unscored"
    rank: int | None = None
    p_value: float | None = None

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
    for rank, (_, key, s) in enumerate(ranked, start=1):
        if rank == 1:
            out[key] = Standing("leader", rank)
            continue
        p = paired_test(leader, s).p_value
        out[key] = Standing("tied" if p >= TIE_ALPHA else "behind", rank, p)
    return out


@dataclass(frozen=True)
class GroupScore:
    """A row's rate on one group of tasks (a repository, a label)."""

    group: str
    tasks: int
    resolved: float

    @property
    def rate(self) -> float | None:
        return self.resolved / self.tasks if self.tasks else None


def by_group(s: Score[K], groups: Mapping[K, str]) -> dict[str, GroupScore]:
    """The score's per-task fractions averaged within each group (same denominator rules)."""
    sums: dict[str, list[float]] = {}
    for task, fraction in s.per_task.items():
        sums.setdefault(groups.get(task, ""), []).append(fraction)
    return {g: GroupScore(g, len(v), math.fsum(v)) for g, v in sorted(sums.items())}


def attempt_outcome(status: str, *, is_infra: bool, resolved: bool, is_missing: bool) -> str:
    """How one attempt counts, as a word for lists: resolved, failed, missing, infra,
    pending or not_evaluated (``classify`` in one word)."""
    tally = classify(status, is_infra=is_infra, resolved=resolved, is_missing=is_missing)
    if tally.resolved:
        return "resolved"
    if tally.missing:
        return "missing"
    if tally.scored:
        return "failed"
    if tally.excluded:
        return "infra"
    return "not_evaluated" if tally.not_evaluated else "pending"


def score_record(s: Score) -> dict:
    """A score's figures as plain values, the same keys in every export (API, CSV, JSON)."""
    return {
        "rate": s.rate,
        "resolved": s.resolved,
        "tasks": s.tasks,
        "ci_low": s.ci_low,
        "ci_high": s.ci_high,
        "k": s.k,
        "pass_at_k": s.pass_at_k,
        "whole_suite": s.whole_suite,
        "attempts": s.attempts,
        "scored": s.scored,
        "resolved_attempts": s.resolved_attempts,
        "excluded": s.excluded,
        "pending": s.pending,
        "not_evaluated": s.not_evaluated,
        "missing": s.missing,
        "complete": s.complete,
    }
