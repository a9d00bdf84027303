"""Failure taxonomy breakdown of a suite per model, and resolved % per run over time."""

from __future__ import annotations

import datetime as dt
import uuid
from collections import defaultdict
from dataclasses import dataclass, field

from django.db.models import Count

from runs.models import FailureReason, ModelConfig
from runs.results.scoring import Score
from runs.results.selection import finished_attempts, read_results
from runs.taxonomy import Category
from tasks_app.models import Suite

RESOLVED = "RESOLVED"


@dataclass(frozen=True)
class ReasonColumn:
    code: str
    description: str
    typical_cause: str
    category: str
    precedence: int

    @property
    def is_infrastructure(self) -> bool:
        return self.category == Category.INFRASTRUCTURE


@dataclass
class ModelBreakdown:
    model: ModelConfig
    resolved: int = 0
    counts: dict[str, int] = field(default_factory=dict)  # reason code -> attempts
    # The configuration's score over all its runs (the leaderboard's "configs" row).
    score: Score | None = None

    @property
    def missing(self) -> int:
        """Instances never attempted: no outcome of the agent's, so no bar and no reason."""
        return self.score.missing_attempts if self.score else 0

    @property
    def total(self) -> int:
        """Finished attempts: the bars (missing instances are none)."""
        return self.resolved + sum(self.counts.values())

    @property
    def infra(self) -> int:
        return sum(n for code, n in self.counts.items() if code in self.infra_codes)

    infra_codes: frozenset[str] = frozenset()


@dataclass(frozen=True)
class RunPoint:
    """One run's score (its leaderboard row), at the time the run finished (or was created,
    while it runs), for the over-time chart; ``dated`` False for a run of unknown date (at
    its import time), charted only when asked."""

    model_id: int
    run_public_id: uuid.UUID
    at: dt.datetime
    score: Score
    dated: bool = True

    @property
    def rate(self) -> float | None:
        return self.score.rate

    @property
    def resolved(self) -> float:
        return self.score.resolved

    @property
    def tasks(self) -> int:
        return self.score.tasks

    @property
    def pending(self) -> int:
        return self.score.pending


@dataclass
class TaxonomyBreakdown:
    suite: Suite
    reasons: list[ReasonColumn]  # precedence order
    models: list[ModelBreakdown]
    points: list[RunPoint]


def reason_columns() -> list[ReasonColumn]:
    return [
        ReasonColumn(r.code, r.description, r.typical_cause, r.category, r.precedence)
        for r in FailureReason.objects.order_by("precedence")
    ]


def taxonomy_breakdown(
    *, suite: Suite, models: list[ModelConfig] | None = None, include_undated: bool = False
) -> TaxonomyBreakdown:
    """Counts of finished attempts by model and failure reason, each model's score and each
    run's score over time (``runs.results.scoring``, the leaderboard's figures).

    Missing instances (never attempted) are no failure: counted apart (``missing``), in no
    bar. Runs of unknown date (imported without one) are left off the over-time points
    unless ``include_undated``.

    One grouped query on the attempts (model x reason) plus ``runs.results.selection.read_results``.
    """
    model_ids = [m.id for m in models] if models is not None else None
    results = read_results(suite=suite, model_ids=model_ids)
    reasons = reason_columns()
    infra_codes = frozenset(r.code for r in reasons if r.is_infrastructure)
    grouped = list(
        finished_attempts(suite=suite, model_ids=model_ids)
        .order_by()
        .values_list("model_config_id", "failure_reason_id")
        .annotate(n=Count("id"))
    )
    by_model: dict[int, ModelBreakdown] = {}
    for entry in results.entries("configs"):
        by_model[entry.model.id] = ModelBreakdown(
            entry.model, infra_codes=infra_codes, score=results.score(entry)
        )
    for model_id, code, n in grouped:
        bars = by_model.get(model_id)
        if bars is None:
            continue
        if code is None:
            bars.resolved += n
        else:
            bars.counts[code] = bars.counts.get(code, 0) + n
    ordered = sorted(
        by_model.values(),
        key=lambda b: (-((b.score and b.score.rate) or 0.0), b.model.name.lower()),
    )
    points = [
        RunPoint(
            entry.model.id,
            entry.run.public_id,  # type: ignore[union-attr, arg-type]
            entry.run.finished_at or entry.run.created_at,  # type: ignore[union-attr]
            results.score(entry),
            entry.run.date_known,  # type: ignore[union-attr]
        )
        for entry in results.entries("runs")
        if include_undated or entry.run.date_known  # type: ignore[union-attr]
    ]
    points.sort(key=lambda p: (p.model_id, p.at))
    return TaxonomyBreakdown(suite=suite, reasons=reasons, models=ordered, points=points)


def chart_data(breakdown: TaxonomyBreakdown, attempts_url: str) -> dict:
    """Plotly traces for the stacked bars and the over-time lines, ready for json_script.

    Every bar segment carries the URL of the attempts it stands for, so a click opens them.
    Infrastructure reasons use a warm color family and agent reasons a cool one.
    """
    names = [b.model.name for b in breakdown.models]
    slugs = [b.model.slug for b in breakdown.models]
    infra = [r for r in breakdown.reasons if r.is_infrastructure]
    agent = [r for r in breakdown.reasons if not r.is_infrastructure]
    colors = {
        **_palette(agent, _COOL),
        **_palette(infra, _WARM),
    }
    bars = [
        {
            "type": "bar",
            "name": "resolved",
            "x": names,
            "y": [b.resolved for b in breakdown.models],
            "marker": {"color": "#2e8540"},
            "customdata": [f"{attempts_url}?models={s}&outcome=resolved" for s in slugs],
            "hovertemplate": "%{x}<br>resolved: %{y}<extra></extra>",
        }
    ]
    for reason in breakdown.reasons:
        counts = [b.counts.get(reason.code, 0) for b in breakdown.models]
        if not any(counts):
            continue
        kind = "infra" if reason.is_infrastructure else "agent"
        bars.append(
            {
                "type": "bar",
                "name": f"{reason.code} ({kind})",
                "x": names,
                "y": counts,
                "marker": {
                    "color": colors[reason.code],
                    "pattern": {"shape": "/" if reason.is_infrastructure else ""},
                },
                "customdata": [f"{attempts_url}?models={s}&reason={reason.code}" for s in slugs],
                "hovertemplate": f"%{{x}}<br>{reason.code}: %{{y}}<extra>{kind}</extra>",
            }
        )
    by_id = {b.model.id: b.model.name for b in breakdown.models}
    lines: dict[int, dict] = defaultdict(
        lambda: {
            "type": "scatter",
            "mode": "lines+markers",
            "x": [],
            "y": [],
            "name": "",
            "text": [],
            "marker": {"symbol": []},
            "hovertemplate": "%{x}<br>resolved: %{y}%%{text}<extra>%{fullData.name}</extra>",
        }
    )
    for point in breakdown.points:
        if point.model_id not in by_id or point.rate is None:
            continue
        line = lines[point.model_id]
        line["name"] = by_id[point.model_id]
        line["x"].append(point.at.isoformat())
        line["y"].append(round(100 * point.rate, 2))
        line["text"].append(_partial_note(point.score))
        # A partial run (tasks never attempted count 0) is an open marker.
        line["marker"]["symbol"].append("circle-open" if point.score.partial else "circle")
    return {"bars": bars, "lines": list(lines.values())}


def _partial_note(s: Score) -> str:
    """The hover's second line for a partial run: what it tried and its rate there."""
    if not s.partial or s.attempted_rate is None:
        return ""
    return (
        f"<br>partial: {s.attempted_tasks} of {s.tasks} tasks;"
        f" {100 * s.attempted_rate:.1f}% on those"
    )


# Agent reasons: blues and purples; infrastructure: oranges, browns and greys.
_COOL = ["#1f4e9c", "#3b7dd8", "#7aa6e8", "#6a3d9a", "#9e7cc9"]
_WARM = [
    "#b35806",
    "#e08214",
    "#fdb863",
    "#8c510a",
    "#bf812d",
    "#dfc27d",
    "#a6611a",
    "#d9a066",
    "#7f7f7f",
    "#b0a089",
    "#5e4b3c",
]


def _palette(reasons: list[ReasonColumn], colors: list[str]) -> dict[str, str]:
    return {r.code: colors[i % len(colors)] for i, r in enumerate(reasons)}
