"""Leaderboard of one suite: rows scored by ``runs.results.scoring``, shared by page, API, CLI.

Rows are runs by default (``view="runs"``: date, configuration, samples, links), or one row per
configuration over its runs in the selection (``view="configs"``). References (oracle, no-op)
are listed apart and never ranked. Every figure is a field of a ``runs.results.scoring.Score``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from runs.results.scoring import (
    GroupScore,
    Score,
    Standing,
    TaskGroups,
    by_group,
    standings,
)
from runs.results.selection import (
    Entry,
    RunFacts,
    SuiteResults,
    Usage,
    read_results,
)
from tasks_app.models import Suite

# What ``LeaderboardRow.cost_record`` holds: the API, the CSV and ``ab leaderboard`` columns.
COST_RECORD_FIELDS = (
    "mean_cost_input_usd",
    "mean_cost_cache_write_usd",
    "mean_cost_cache_read_usd",
    "mean_cost_output_usd",
    "cost_unknown_attempts",
    "cost_reported_attempts",
)

SORT_KEYS = (
    "rate",
    "attempted_rate",
    "name",
    "date",
    "pass_at_1",
    "pass_at_k",
    "pass_hat_k",
    "attempts",
    "infra",
    "pending",
    "mean_cost",
    "mean_tokens",
    "mean_calls",
    "mean_wall",
    "cost_per_resolved",
)
ASCENDING_BY_DEFAULT = (
    "name",
    "mean_cost",
    "mean_calls",
    "mean_wall",
    "cost_per_resolved",
    "infra",
    "pending",
)


@dataclass
class LeaderboardRow:
    """One row: an entry (run or configuration), its score, standing and usage."""

    entry: Entry
    score: Score
    standing: Standing
    usage: Usage
    groups: dict[str, GroupScore] = field(default_factory=dict, repr=False)

    # --- what the row stands for
    @property
    def key(self) -> str:
        return self.entry.key

    @property
    def kind(self) -> str:
        return self.entry.kind

    @property
    def name(self) -> str:
        return self.entry.model.name

    @property
    def slug(self) -> str:
        return self.entry.model.slug

    @property
    def model_id(self) -> int:
        return self.entry.model.id

    @property
    def model_public_id(self):
        return self.entry.model.public_id

    @property
    def agent_variant(self) -> str:
        return self.entry.model.agent_variant

    @property
    def condition(self) -> str:
        """The files its configuration adds to the workspace, named ("" for none)."""
        return self.entry.model.condition

    @property
    def run(self) -> RunFacts | None:
        return self.entry.run

    @property
    def run_count(self) -> int:
        return len(self.entry.runs)

    @property
    def date(self) -> dt.datetime | None:
        """When the row's latest run of known date finished (or was created, while it runs);
        None when no run of the row has a known date."""
        return max((r.date for r in self.entry.runs if r.date is not None), default=None)

    @property
    def imported_on(self) -> dt.datetime | None:
        """For a row of unknown date: when its latest run was imported (all it is known by)."""
        if self.date is not None:
            return None
        return max((r.finished_at or r.created_at for r in self.entry.runs), default=None)

    @property
    def is_published(self) -> bool:
        return self.entry.whole_suite

    @property
    def is_reference(self) -> bool:
        return self.entry.is_reference

    # --- the score
    @property
    def rate(self) -> float | None:
        return self.score.rate

    @property
    def pass_at_1(self) -> float | None:
        return self.score.rate

    @property
    def pass_at_k(self) -> float | None:
        return self.score.pass_at_k

    @property
    def pass_hat_k(self) -> float | None:
        return self.score.pass_hat_k

    @property
    def k(self) -> int:
        return self.score.k

    @property
    def ci_low(self) -> float | None:
        return self.score.ci_low

    @property
    def ci_high(self) -> float | None:
        return self.score.ci_high

    @property
    def attempted_rate(self) -> float | None:
        return self.score.attempted_rate

    @property
    def attempted_ci_low(self) -> float | None:
        return self.score.attempted_ci_low

    @property
    def attempted_ci_high(self) -> float | None:
        return self.score.attempted_ci_high

    @property
    def attempted_tasks(self) -> int:
        return self.score.attempted_tasks

    @property
    def resolved(self) -> float:
        return self.score.resolved

    @property
    def tasks(self) -> int:
        return self.score.tasks

    @property
    def denominator(self) -> int:
        return self.score.tasks

    @property
    def attempts(self) -> int:
        return self.score.attempts

    @property
    def scored(self) -> int:
        return self.score.scored

    @property
    def resolved_attempts(self) -> int:
        return self.score.resolved_attempts

    @property
    def infra(self) -> int:
        return self.score.excluded

    @property
    def pending(self) -> int:
        return self.score.pending

    @property
    def not_evaluated(self) -> int:
        return self.score.not_evaluated

    @property
    def missing(self) -> int:
        return self.score.missing

    @property
    def flagged(self) -> int:
        """Successes carrying an integrity flag (runs.integrity)."""
        return self.score.flagged

    # --- standing
    @property
    def rank(self) -> int | None:
        return self.standing.rank

    @property
    def status(self) -> str:
        return self.standing.status

    @property
    def is_leader(self) -> bool:
        return self.standing.is_leader

    @property
    def tied_with_leader(self) -> bool:
        return self.standing.tied

    @property
    def p_value_vs_leader(self) -> float | None:
        return self.standing.p_value

    @property
    def paired_vs_leader(self) -> int | None:
        """The tasks the test against the leader covered: those both attempted."""
        return self.standing.paired

    @property
    def coverage_differs_from_leader(self) -> bool:
        return self.standing.coverage_differs

    # --- usage, per attempt that recorded it (missing instances did no work; a report without
    # a trajectory records none); None ("—") for what the row records none of (published
    # reports, oracle, no-op)
    @property
    def mean_cost_usd(self) -> float | None:
        return self.usage.mean_cost

    @property
    def mean_tokens(self) -> float | None:
        return self.usage.per_attempt(self.usage.tokens, self.usage.tokened)

    @property
    def mean_calls(self) -> float | None:
        """Model API calls per attempt (an attempt's ``steps``; an imported trajectory's
        ``api_calls``)."""
        return self.usage.per_attempt(self.usage.calls, self.usage.called)

    @property
    def mean_cost_breakdown(self) -> dict[str, float | None]:
        """The cost per attempt by class (input, cache write, cache read, output), over the
        attempts whose cost was broken down; None where none was."""
        return self.usage.mean_cost_breakdown

    @property
    def cost_unknown_attempts(self) -> int:
        """Attempts whose cost is unknown (a price missing): out of the means, said so."""
        return self.usage.cost_unknown

    @property
    def cost_reported_attempts(self) -> int:
        """Attempts whose cost is the imported run's own figure, not priced here."""
        return self.usage.cost_reported

    def cost_record(self) -> dict[str, float | int | None]:
        """The cost fields every export of a row writes beside ``mean_cost_usd``
        (``COST_RECORD_FIELDS``, in that order)."""
        return {
            **{f"mean_cost_{k}_usd": v for k, v in self.mean_cost_breakdown.items()},
            "cost_unknown_attempts": self.cost_unknown_attempts,
            "cost_reported_attempts": self.cost_reported_attempts,
        }

    @property
    def total_cost_usd(self) -> float | None:
        return self.usage.cost or None

    @property
    def cost_per_resolved_usd(self) -> float | None:
        """What one resolved attempt cost: all usage over the resolved attempts."""
        u, resolved = self.usage, self.score.resolved_attempts
        return u.cost / resolved if u.cost and resolved else None

    @property
    def mean_wall_sec(self) -> float | None:
        u = self.usage
        return u.wall / u.walled if u.walled else None

    def sort_value(self, key: str) -> tuple:
        value = {
            "rate": self.rate,
            "attempted_rate": self.attempted_rate,
            "name": self.name.lower(),
            "date": self.date,
            "pass_at_1": self.rate,
            "pass_at_k": self.pass_at_k,
            "pass_hat_k": self.pass_hat_k,
            "attempts": self.attempts,
            "infra": self.infra,
            "pending": self.pending,
            "mean_cost": self.mean_cost_usd,
            "mean_tokens": self.mean_tokens,
            "mean_calls": self.mean_calls,
            "mean_wall": self.mean_wall_sec,
            "cost_per_resolved": self.cost_per_resolved_usd,
        }[key]
        return (value is None, value)


@dataclass
class Leaderboard:
    suite: Suite
    view: str
    rows: list[LeaderboardRow]  # competing rows, sorted
    references: list[LeaderboardRow]  # oracle / no-op rows, apart and unranked
    groups: list[str]  # repositories of the selection, for the per-repository table
    results: SuiteResults = field(repr=False)

    @property
    def all_rows(self) -> list[LeaderboardRow]:
        return self.rows + self.references

    @property
    def leader(self) -> LeaderboardRow | None:
        return next((r for r in self.rows if r.is_leader), None)


def leaderboard(
    *,
    suite: Suite,
    view: str = "runs",
    labels: list[str] | None = None,
    date_from: dt.date | None = None,
    date_to: dt.date | None = None,
    run_ids: Collection[int] | None = None,
    exclude_tasks: Iterable[int] | None = None,
    sort: str = "rate",
    descending: bool | None = None,
    include_undated: bool = False,
    count_out_flagged: bool = False,
) -> Leaderboard:
    """The suite's leaderboard under one selection (``runs.results.scoring`` defines it).

    ``include_undated``: a date filter keeps runs of unknown date (imported without one);
    ``count_out_flagged``: successes carrying an integrity flag count as failures."""
    results = read_results(
        suite=suite,
        labels=labels,
        date_from=date_from,
        date_to=date_to,
        run_ids=run_ids,
        exclude_tasks=exclude_tasks,
        usage=True,
        include_undated=include_undated,
        count_out_flagged=count_out_flagged,
    )
    entries = results.entries(view)
    scores = {e.key: results.score(e) for e in entries}
    places = standings([(e.key, scores[e.key], e.is_reference) for e in entries])
    repos = results.repos()
    task_groups = TaskGroups.of(results.index, repos)
    rows = [
        LeaderboardRow(
            e,
            scores[e.key],
            places[e.key],
            results.entry_usage(e),
            by_group(scores[e.key], task_groups),
        )
        for e in entries
    ]
    key = sort if sort in SORT_KEYS else "rate"
    if descending is None:
        descending = key not in ASCENDING_BY_DEFAULT
    competing = _sorted([r for r in rows if not r.is_reference], key, descending)
    references = _sorted([r for r in rows if r.is_reference], key, descending)
    groups = sorted({repos[t] for t in results.universe if t not in results.excluded})
    return Leaderboard(suite, view, competing, references, groups, results)


def run_row(run) -> tuple[LeaderboardRow | None, int]:
    """A run's row of its suite's leaderboard (what every surface shows for the run), or None
    for a run the leaderboard does not list (baseline validation); and how many of the suite's
    tasks every figure leaves out (gold validation found them invalid)."""
    board = leaderboard(suite=run.suite, run_ids=[run.id])
    row = next((r for r in board.all_rows if r.entry.run and r.entry.run.id == run.id), None)
    return row, len(board.results.excluded)


def leaderboard_rows(**kwargs) -> list[LeaderboardRow]:
    """The competing rows, then the references (``leaderboard``'s arguments)."""
    return leaderboard(**kwargs).all_rows


def _sorted(rows: list[LeaderboardRow], key: str, descending: bool) -> list[LeaderboardRow]:
    present = [r for r in rows if r.sort_value(key)[1] is not None]
    absent = sorted((r for r in rows if r.sort_value(key)[1] is None), key=lambda r: r.key)
    present.sort(key=lambda r: r.sort_value(key), reverse=descending)
    if key in ("rate", "pass_at_1"):
        # Ranked rows first in rank order; pending rows (figures so far) after them.
        present.sort(key=lambda r: r.rank is None)
    return present + absent
