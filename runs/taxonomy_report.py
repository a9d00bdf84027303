"""Failure taxonomy breakdown of a suite per model, and resolved % per run over time."""

from __future__ import annotations

import datetime as dt
import uuid
from collections import defaultdict
from dataclasses import dataclass, field

from django.db.models import Count

from runs.leaderboard import finished_attempts
from runs.models import AgentVariant, FailureReason, ModelConfig, Run
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

    @property
    def total(self) -> int:
        return self.resolved + sum(self.counts.values())

    @property
    def infra(self) -> int:
        return sum(n for code, n in self.counts.items() if code in self.infra_codes)

    infra_codes: frozenset[str] = frozenset()


@dataclass(frozen=True)
class RunPoint:
    """One run's resolved share of its scored attempts, at the time the run finished (or was
    created, while it runs), for the over-time chart."""

    model_id: int
    run_public_id: uuid.UUID
    at: dt.datetime
    scored: int
    resolved: int

    @property
    def rate(self) -> float | None:
        return self.resolved / self.scored if self.scored else None


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
    *, suite: Suite, models: list[ModelConfig] | None = None
) -> TaxonomyBreakdown:
    """Counts of finished attempts by model and failure reason, plus resolved % per run.

    One grouped query on the attempts (run x reason) and small ones for the reasons, the
    models' names and the runs' public ids.
    """
    model_ids = [m.id for m in models] if models is not None else None
    attempts = finished_attempts(suite=suite, model_ids=model_ids)
    reasons = reason_columns()
    infra_codes = frozenset(r.code for r in reasons if r.is_infrastructure)
    # One grouped query (run x reason) gives both the bars and the per-run points.
    grouped = list(
        attempts.order_by()
        .values_list("run_id", "model_config_id", "failure_reason_id", "is_infra", "is_missing")
        .annotate(n=Count("id"))
    )
    present = {model_id for _, model_id, *_ in grouped}
    if models is not None:
        configs = {m.id: m for m in models}
    else:
        configs = {
            m.id: m
            for m in ModelConfig.objects.filter(id__in=present).exclude(
                agent_variant=AgentVariant.BASELINE
            )
        }
    by_model: dict[int, ModelBreakdown] = {}
    runs: dict[int, list[int]] = {}
    for run_id, model_id, code, is_infra, is_missing, n in grouped:
        if model_id not in configs:
            continue
        entry = by_model.setdefault(
            model_id, ModelBreakdown(configs[model_id], infra_codes=infra_codes)
        )
        if code is None:
            entry.resolved += n
        else:
            entry.counts[code] = entry.counts.get(code, 0) + n
        point = runs.setdefault(run_id, [model_id, 0, 0])
        if not is_infra:
            point[1] += n
            point[2] += n if code is None and not is_missing else 0
    ordered = sorted(
        by_model.values(),
        key=lambda b: (-(b.resolved / b.total if b.total else 0), b.model.name.lower()),
    )
    facts = {
        run_id: (public_id, finished or created)
        for run_id, public_id, finished, created in Run.objects.filter(
            id__in=list(runs)
        ).values_list("id", "public_id", "finished_at", "created_at")
    }
    points = [
        RunPoint(model_id, facts[run_id][0], facts[run_id][1], scored, resolved)
        for run_id, (model_id, scored, resolved) in runs.items()
        if run_id in facts
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
            "customdata": [f"{attempts_url}?model={s}&outcome=resolved" for s in slugs],
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
                "customdata": [f"{attempts_url}?model={s}&reason={reason.code}" for s in slugs],
                "hovertemplate": f"%{{x}}<br>{reason.code}: %{{y}}<extra>{kind}</extra>",
            }
        )
    by_id = {b.model.id: b.model.name for b in breakdown.models}
    lines: dict[int, dict] = defaultdict(
        lambda: {"type": "scatter", "mode": "lines+markers", "x": [], "y": [], "name": ""}
    )
    for point in breakdown.points:
        if point.model_id not in by_id or point.rate is None:
            continue
        line = lines[point.model_id]
        line["name"] = by_id[point.model_id]
        line["x"].append(point.at.isoformat())
        line["y"].append(round(100 * point.rate, 2))
    return {"bars": bars, "lines": list(lines.values())}


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
