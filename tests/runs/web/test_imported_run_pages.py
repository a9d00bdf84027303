"""An imported run on the suite's results pages, beside a run of our own harness.

The real mini-swe-agent run (20 Verified instances, 11 resolved) is imported with
`run_folder_import`; a harness run of another model gets an outcome on the same tasks. The
leaderboard's cost and calls columns carry the trajectories' ``info.model_stats``, and the
compare, taxonomy pages and the API read the imported run as any other.
"""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from runs.imports.run_import import run_folder_import
from runs.models import ModelConfig
from runs.results.compare import compare_models
from runs.results.leaderboard import leaderboard_rows
from runs.results.taxonomy_report import taxonomy_breakdown
from runs.templatetags.results import usd
from tasks_app.models import Suite, Task
from tests.runs.imports.test_run_import import INSPECT_LOG, MINI
from tests.support.pages_fixtures import make_attempt, make_model, make_run

pytestmark = pytest.mark.django_db

IMPORTED = "mini-swe-agent"
OURS = "our-agent"


def model_stats() -> dict[str, dict]:
    return {
        path.parent.name: json.loads(path.read_text())["info"]["model_stats"]
        for path in sorted((MINI / "trajs").glob("*/*.traj.json"))
    }


def resolved_ids() -> set[str]:
    return {
        path.parent.name
        for path in (MINI / "logs").glob("*/report.json")
        if json.loads(path.read_text())["resolved"]
    }


@pytest.fixture
def suite(artifacts_root) -> Suite:
    run_folder_import(path=MINI, suite_name="verified-mini", model_name=IMPORTED)
    suite = Suite.objects.get(name="verified-mini")
    # Our run resolves the first 5 tasks by id and fails the rest.
    run = make_run(suite, make_model(OURS))
    for i, task in enumerate(Task.objects.for_suite(suite).order_by("task_id")):
        make_attempt(run, task, None if i < 5 else "TESTS_FAILED", steps=7)
    return suite


@pytest.fixture
def reader(client, bob):
    client.force_login(bob)
    return client


def test_it_fills_the_cost_and_calls_columns_from_the_trajectories(reader, suite):
    stats = model_stats()
    assert len(stats) == 20
    mean_cost = sum(s["instance_cost"] for s in stats.values()) / 20
    mean_calls = sum(s["api_calls"] for s in stats.values()) / 20
    rows = {r.name: r for r in leaderboard_rows(suite=suite)}
    row = rows[IMPORTED]
    assert (row.resolved, row.denominator) == (11, 20)
    assert row.mean_cost_usd == pytest.approx(mean_cost, abs=1e-6)
    assert row.mean_calls == pytest.approx(mean_calls)
    assert row.cost_per_resolved_usd == pytest.approx(mean_cost * 20 / 11, abs=1e-6)
    assert rows[OURS].mean_calls == 7

    body = reader.get(reverse("suite-leaderboard", args=[suite.name])).content.decode()
    imported_row = body[body.index(f'data-model="{row.slug}"') :]
    imported_row = imported_row[: imported_row.index("</tr>")]
    assert "Calls / attempt" in body
    assert f">{usd(mean_cost)}<" in imported_row
    assert f">{mean_calls:.1f}<" in imported_row
    assert f">{usd(mean_cost * 20 / 11)}<" in imported_row

    api = reader.get("/api/leaderboard", {"suite": suite.name}).json()
    (out,) = [r for r in api["rows"] if r["model"]["name"] == IMPORTED]
    assert out["mean_calls"] == pytest.approx(mean_calls)
    assert out["mean_cost_usd"] == pytest.approx(mean_cost, abs=1e-6)
    csv_text = reader.get("/api/leaderboard", {"suite": suite.name, "format": "csv"})
    assert "mean_calls" in csv_text.content.decode().splitlines()[0]


def test_compare_pairs_the_imported_run_with_ours_task_by_task(reader, suite):
    imported = ModelConfig.objects.get(name=IMPORTED)
    ours = ModelConfig.objects.get(name=OURS)
    comparison = compare_models(suite=suite, models=[imported, ours])
    (pair,) = comparison.pairs
    assert pair.paired == 20
    resolved = resolved_ids()
    assert {r.task_id for r in pair.both + pair.regressed} == resolved
    assert pair.rate_a == pytest.approx(11 / 20)
    summary = {s.model.name: s for s in comparison.summaries}
    assert (summary[IMPORTED].score.resolved, summary[IMPORTED].score.scored) == (11, 20)
    # The same figure as the leaderboard's.
    rows = {r.name: r for r in leaderboard_rows(suite=suite)}
    assert summary[IMPORTED].rate == rows[IMPORTED].rate

    url = reverse("suite-compare", args=[suite.name])
    response = reader.get(url, {"models": f"{imported.slug},{ours.slug}", "format": "json"})
    data = response.json()
    assert len(data["pairs"]) == 1
    page = reader.get(url, {"models": f"{imported.slug},{ours.slug}"})
    assert page.status_code == 200 and IMPORTED in page.content.decode()


def test_the_taxonomy_counts_the_imported_run_by_reason(reader, suite):
    breakdown = taxonomy_breakdown(suite=suite)
    by_name = {m.model.name: m for m in breakdown.models}
    assert set(by_name) == {IMPORTED, OURS}
    assert by_name[IMPORTED].resolved == 11
    assert by_name[IMPORTED].counts == {"TESTS_FAILED": 9}
    assert by_name[OURS].counts == {"TESTS_FAILED": 15}
    body = reader.get(reverse("suite-taxonomy", args=[suite.name])).content.decode()
    assert IMPORTED in body and OURS in body


def test_an_imported_run_without_costs_shows_dashes_and_its_calls_per_sample(reader, suite):
    # The Inspect log: 3 of the 20 instances, one model call each, tokens but no cost.
    run_folder_import(path=INSPECT_LOG, suite_name=suite.name, model_name="insp")
    row = {r.name: r for r in leaderboard_rows(suite=suite)}["insp"]
    # 3 attempts made, 17 instances never attempted.
    assert (row.attempts, row.missing, row.attempted_tasks) == (3, 17, 3)
    # Per attempt that ran: the 17 missing instances did no work.
    assert row.mean_calls == 1
    assert row.mean_tokens == pytest.approx((1200 + 300 + 1201 + 301 + 1202 + 302) / 3)
    assert row.mean_cost_usd is None and row.cost_per_resolved_usd is None

    body = reader.get(reverse("suite-leaderboard", args=[suite.name])).content.decode()
    cells = body[body.index(f'data-model="{row.slug}"') :]
    cells = cells[: cells.index("</tr>")]
    assert "$0.0000" not in cells and ">—<" in cells and ">1.0<" in cells
