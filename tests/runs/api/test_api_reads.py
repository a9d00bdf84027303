"""Every API read answers with the figures of the function its page renders."""

from __future__ import annotations

import csv
import io

import pytest

from runs.results.compare import compare_models
from runs.results.leaderboard import leaderboard_rows
from runs.results.taxonomy_report import taxonomy_breakdown

pytestmark = pytest.mark.django_db


def approx(value):
    return None if value is None else pytest.approx(value)


def test_it_serves_the_leaderboard_page_figures(client, seeded):
    expected = leaderboard_rows(suite=seeded["suite"])
    response = client.get("/api/leaderboard", {"suite": "custom-dev"})
    assert response.status_code == 200
    body = response.json()
    assert body["suite"] == "custom-dev"
    assert [r["model"]["name"] for r in body["rows"]] == [r.name for r in expected]
    assert [r.name for r in expected] == ["alpha", "beta", "gamma"]
    for got, row in zip(body["rows"], expected, strict=True):
        assert got["resolved"] == approx(row.resolved)
        assert got["resolved_attempts"] == row.resolved_attempts
        assert got["scored"] == row.scored
        assert got["infra"] == row.infra
        assert got["attempts"] == row.attempts
        assert got["rank"] == row.rank
        assert got["k"] == row.k
        assert got["rate"] == approx(row.rate)
        assert got["resolved_pct"] == approx(row.rate * 100)
        assert got["ci_low"] == approx(row.ci_low)
        assert got["ci_high"] == approx(row.ci_high)
        assert got["pass_at_1"] == approx(row.pass_at_1)
        assert got["pass_at_k"] == approx(row.pass_at_k)
        assert got["mean_cost_usd"] == approx(row.mean_cost_usd)
        assert got["total_cost_usd"] == approx(row.total_cost_usd)
        assert got["p_value_vs_leader"] == approx(row.p_value_vs_leader)
        assert got["tied_with_leader"] == row.tied_with_leader
    alpha = body["rows"][0]
    tasks = len(seeded["tasks"])
    # Every task resolved on every scored sample: the share is 1 on each of the tasks.
    assert (alpha["resolved"], alpha["tasks"], alpha["rate"]) == (tasks, tasks, 1.0)
    assert (alpha["resolved_attempts"], alpha["infra"], alpha["scored"]) == (
        2 * tasks - 1,
        1,
        2 * tasks - 1,
    )
    assert alpha["is_leader"] is True
    gamma = body["rows"][2]
    assert (gamma["is_reference"], gamma["rank"], gamma["status"]) == (True, None, "reference")


def test_it_filters_the_leaderboard_like_the_page(client, seeded):
    label = next(label for t in seeded["tasks"] for label in t.labels)
    expected = leaderboard_rows(suite=seeded["suite"], labels=[label], sort="name")
    body = client.get("/api/leaderboard", {"suite": "custom-dev", "labels": label, "sort": "name"})
    rows = body.json()["rows"]
    assert [(r["model"]["name"], r["scored"], r["resolved"]) for r in rows] == [
        (r.name, r.scored, pytest.approx(r.resolved)) for r in expected
    ]


def test_it_exports_the_leaderboard_as_csv_both_ways(client, seeded):
    expected = leaderboard_rows(suite=seeded["suite"])
    for response in (
        client.get("/api/leaderboard.csv", {"suite": "custom-dev"}),
        client.get("/api/leaderboard", {"suite": "custom-dev", "format": "csv"}),
    ):
        assert response.status_code == 200
        assert response["Content-Type"].startswith("text/csv")
        rows = list(csv.DictReader(io.StringIO(response.content.decode())))
        assert [r["model"] for r in rows] == [r.name for r in expected]
        for got, row in zip(rows, expected, strict=True):
            assert float(got["resolved"]) == pytest.approx(row.resolved)
            assert int(got["excluded"]) == row.infra
            assert float(got["resolved_pct"]) == pytest.approx(row.rate * 100)


def test_it_names_an_unknown_suite(client, seeded):
    response = client.get("/api/leaderboard", {"suite": "nope"})
    assert response.status_code == 404
    assert response.json()["errors"][0]["field"] == "suite"
    missing = client.get("/api/leaderboard")
    assert missing.status_code == 422
    assert missing.json()["errors"][0]["field"] == "suite"


def test_it_serves_the_comparison_page_figures(client, seeded):
    models = seeded["models"]
    expected = compare_models(suite=seeded["suite"], models=[models["alpha"], models["beta"]])
    response = client.get("/api/compare", {"suite": "custom-dev", "models": "alpha,beta"})
    assert response.status_code == 200
    body = response.json()
    assert [s["resolved"] for s in body["summaries"]] == [
        pytest.approx(s.score.resolved) for s in expected.summaries
    ]
    assert [s["rate"] for s in body["summaries"]] == [approx(s.rate) for s in expected.summaries]
    assert [s["excluded"] for s in body["summaries"]] == [
        s.score.excluded for s in expected.summaries
    ]
    (pair,) = body["pairs"]
    (want,) = expected.pairs
    assert pair["regressed"] == [r.task_id for r in want.regressed]
    assert pair["fixed_by_b"] == [r.task_id for r in want.fixed_by_b]
    assert pair["p_value"] == pytest.approx(want.p_value)
    assert pair["delta"] == approx(want.delta)
    assert len(pair["regressed"]) >= 1
    assert [r["task_id"] for r in body["rows"]] == [r.task_id for r in expected.rows]
    assert [[c["outcome"] for c in r["cells"]] for r in body["rows"]] == [
        [c.outcome for c in r.cells] for r in expected.rows
    ]


def test_it_exports_the_comparison_as_csv(client, seeded):
    response = client.get("/api/compare.csv", {"suite": "custom-dev", "models": "alpha,beta"})
    assert response.status_code == 200
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert len(rows) == len(seeded["tasks"])
    assert {"alpha:outcome", "beta:outcome"} <= set(rows[0])


def test_it_refuses_a_comparison_of_one_or_unknown_models(client, seeded):
    one = client.get("/api/compare", {"suite": "custom-dev", "models": "alpha"})
    assert one.status_code == 400
    assert one.json()["errors"][0]["field"] == "models"
    unknown = client.get("/api/compare", {"suite": "custom-dev", "models": "alpha,zeta"})
    assert unknown.status_code == 404
    assert "zeta" in unknown.json()["detail"]


def test_it_serves_the_taxonomy_page_figures(client, seeded):
    expected = taxonomy_breakdown(suite=seeded["suite"])
    response = client.get("/api/taxonomy", {"suite": "custom-dev"})
    assert response.status_code == 200
    body = response.json()
    assert [m["model"]["name"] for m in body["models"]] == [b.model.name for b in expected.models]
    for got, want in zip(body["models"], expected.models, strict=True):
        assert got["counts"] == want.counts
        assert (got["resolved"], got["infra"], got["total"]) == (
            want.resolved,
            want.infra,
            want.total,
        )
    assert [r["code"] for r in body["reasons"]] == [r.code for r in expected.reasons]
    assert len(body["points"]) == len(expected.points) == 3
    csv_rows = list(
        csv.DictReader(
            io.StringIO(client.get("/api/taxonomy.csv", {"suite": "custom-dev"}).content.decode())
        )
    )
    assert [int(r["TESTS_FAILED"]) for r in csv_rows] == [
        b.counts.get("TESTS_FAILED", 0) for b in expected.models
    ]


def test_it_lists_suites_and_tasks_with_filters_and_pages(client, seeded):
    suites = client.get("/api/suites").json()
    assert suites["count"] == 1
    assert suites["items"][0]["task_count"] == len(seeded["tasks"])
    tasks = client.get("/api/tasks", {"suite": "custom-dev", "page_size": 2}).json()
    assert tasks["count"] == len(seeded["tasks"])
    assert len(tasks["items"]) == 2
    second = client.get("/api/tasks", {"suite": "custom-dev", "page_size": 2, "page": 2}).json()
    assert {t["task_id"] for t in tasks["items"]}.isdisjoint(t["task_id"] for t in second["items"])
    label = seeded["tasks"][0].labels[0]
    labelled = client.get("/api/tasks", {"label": label}).json()
    assert labelled["count"] == sum(label in t.labels for t in seeded["tasks"])
    detail = client.get(f"/api/tasks/{seeded['tasks'][0].public_id}").json()
    assert detail["test_command"] == seeded["tasks"][0].test_command


def test_it_lists_runs_and_attempts_with_filters(client, seeded):
    runs = client.get("/api/runs", {"model": "beta"}).json()
    assert runs["count"] == 1
    assert runs["items"][0]["model"]["name"] == "beta"
    assert runs["items"][0]["created_by"] == "bob"
    beta_run = seeded["runs"]["beta"]
    attempts = client.get("/api/attempts", {"run": str(beta_run.public_id)}).json()
    assert attempts["count"] == beta_run.attempts.count()
    infra = client.get("/api/attempts", {"model": "alpha", "is_infra": "true"}).json()
    assert infra["count"] == 1
    assert infra["items"][0]["failure_reason"] == "SANDBOX_ERROR"
    resolved = client.get("/api/attempts", {"model": "beta", "resolved": "true"}).json()
    assert resolved["count"] == 2
    assert client.get("/api/failure-reasons").json()["count"] == 15
    configs = client.get("/api/model-configs", {"agent_variant": "llm"}).json()
    assert [c["name"] for c in configs["items"]] == ["beta"]


def test_it_links_an_attempts_artifacts_and_serves_them_as_text(
    client, attempt_with_artifacts, auth
):
    response = client.get(f"/api/attempts/{attempt_with_artifacts.public_id}", **auth)
    assert response.status_code == 200
    body = response.json()
    assert {a["name"] for a in body["artifacts"]} == {"final.patch", "logs/tests.txt"}
    (stage,) = body["stages"]
    log = client.get(stage["output_url"], **auth)
    assert log.status_code == 200
    assert b"".join(log.streaming_content) == b"FAILED tests/test_calc.py::test_add\n"
    patch_url = next(a["url"] for a in body["artifacts"] if a["name"] == "final.patch")
    patch = client.get(patch_url, **auth)
    assert patch["Content-Type"].startswith("text/plain")
    assert patch["X-Content-Type-Options"] == "nosniff"
    escape = client.get(
        f"/api/attempts/{attempt_with_artifacts.public_id}/artifacts/../../etc/passwd", **auth
    )
    assert escape.status_code == 404


def test_list_endpoints_take_a_fixed_number_of_queries(client, seeded, django_assert_num_queries):
    # A count and a page, whatever the page holds: related rows come in the same query.
    for path in ("/api/attempts", "/api/runs", "/api/tasks", "/api/suites", "/api/model-configs"):
        with django_assert_num_queries(2):
            response = client.get(path, {"page_size": 100})
        assert response.status_code == 200
        assert response.json()["count"] >= 1


def test_the_api_and_the_rendered_pages_show_the_same_figures(client, seeded):
    page = client.get("/suites/custom-dev/leaderboard/")
    assert page.status_code == 200
    api = client.get("/api/leaderboard", {"suite": "custom-dev"}).json()["rows"]
    shown = page.context["board"].all_rows
    assert [
        (r["key"], r["resolved_attempts"], r["scored"], r["infra"], r["rank"]) for r in api
    ] == [(r.key, r.resolved_attempts, r.scored, r.infra, r.rank) for r in shown]
    assert [r["rate"] for r in api] == [approx(r.rate) for r in shown]

    page = client.get("/suites/custom-dev/compare/", {"models": "beta,alpha"})
    api = client.get("/api/compare", {"suite": "custom-dev", "models": "beta,alpha"}).json()
    comparison = page.context["comparison"]
    assert [s["rate"] for s in api["summaries"]] == [approx(s.rate) for s in comparison.summaries]
    assert api["pairs"][0]["fixed_by_b"] == [r.task_id for r in comparison.pairs[0].fixed_by_b]

    page = client.get("/suites/custom-dev/taxonomy/")
    api = client.get("/api/taxonomy", {"suite": "custom-dev"}).json()
    assert [(m["model"]["slug"], m["counts"]) for m in api["models"]] == [
        (b.model.slug, b.counts) for b in page.context["breakdown"].models
    ]


def test_it_compares_single_runs_named_by_configuration_and_run_id(client, seeded):
    runs = seeded["runs"]
    refs = f"alpha@{str(runs['alpha'].public_id)[:8]},beta"
    body = client.get("/api/compare", {"suite": "custom-dev", "models": refs}).json()
    assert [e["kind"] for e in body["entries"]] == ["run", "config"]
    assert body["entries"][0]["run"] == str(runs["alpha"].public_id)
    board = client.get("/api/leaderboard", {"suite": "custom-dev"}).json()["rows"]
    alpha_run = next(r for r in board if r["key"] == body["entries"][0]["key"])
    assert body["summaries"][0]["rate"] == pytest.approx(alpha_run["rate"])
    wrong = client.get("/api/compare", {"suite": "custom-dev", "models": "alpha@00000000,beta"})
    assert wrong.status_code == 404
    assert "00000000" in wrong.json()["detail"]
