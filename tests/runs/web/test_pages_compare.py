"""Comparing models on a suite: matrix, buckets, McNemar, exports, escaping, query counts."""

from __future__ import annotations

import csv
import io

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from runs.results.compare import compare_models
from tests.support.pages_fixtures import make_model, make_run, make_suite, outcomes

pytestmark = pytest.mark.django_db


@pytest.fixture
def pair():
    suite = make_suite("pair", tasks=6)
    a, b = make_model("model-a"), make_model("model-b")
    # task: 0 both, 1 fixed by b, 2 fixed by b, 3 regressed, 4 neither, 5 a infra only
    outcomes(
        make_run(suite, a),
        [[None], ["TESTS_FAILED"], ["TESTS_FAILED"], [None], ["AGENT_GAVE_UP"], ["LLM_ERROR"]],
    )
    outcomes(
        make_run(suite, b),
        [[None], [None], [None], ["TESTS_FAILED"], ["TESTS_FAILED"], [None]],
    )
    return suite, a, b


def ids(rows):
    return [r.task_id for r in rows]


def test_it_sorts_tasks_into_buckets_and_tests_the_pair(pair):
    suite, a, b = pair
    comparison = compare_models(suite=suite, models=[a, b])
    (result,) = comparison.pairs
    assert ids(result.both) == ["task-000"]
    assert ids(result.fixed_by_b) == ["task-001", "task-002"]
    assert ids(result.regressed) == ["task-003"]
    assert ids(result.neither) == ["task-004"]
    assert result.paired == 5  # task-005 has no outcome for model-a
    # Rates are the leaderboard's, each over its own scored tasks; the test is paired.
    assert (result.rate_a, result.rate_b) == (pytest.approx(2 / 5), pytest.approx(4 / 6))
    assert result.delta == pytest.approx(4 / 6 - 2 / 5)
    assert result.test.mean_difference == pytest.approx((2 - 1) / 5)
    assert result.p_value == pytest.approx(1.0)
    assert result.test.exact
    cell = comparison.rows[5].cells[0]
    assert cell.outcome == "infra"
    assert cell.reason == "LLM_ERROR"


def test_the_page_shows_the_matrix_with_links_to_attempts(client, pair):
    suite, a, b = pair
    url = reverse("suite-compare", args=[suite.name]) + f"?models={a.slug},{b.slug}"
    response = client.get(url)
    assert response.status_code == 200
    body = response.content.decode()
    assert body.count('class="small attempt-link chip') == 12
    assert "Better with model-b" in body
    assert "side by side" in body


def test_only_differing_tasks_can_be_shown(client, pair):
    suite, a, b = pair
    url = reverse("suite-compare", args=[suite.name]) + f"?models={a.slug},{b.slug}&only=differ"
    rows = client.get(url).context["rows"]
    assert ids(rows) == ["task-001", "task-002", "task-003"]


def test_it_exports_what_is_shown_as_csv_and_json(client, pair):
    suite, a, b = pair
    base = reverse("suite-compare", args=[suite.name]) + f"?models={a.slug},{b.slug}&only=differ"
    response = client.get(base + "&format=csv")
    assert response["Content-Type"].startswith("text/csv")
    records = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [r["task_id"] for r in records] == ["task-001", "task-002", "task-003"]
    assert records[0]["model-b:outcome"] == "resolved"
    assert records[2]["model-b:reason"] == "TESTS_FAILED"
    data = client.get(base + "&format=json").json()
    assert data["pairs"][0]["fixed_by_b"] == ["task-001", "task-002"]
    assert data["pairs"][0]["p_value"] == pytest.approx(1.0)
    assert len(data["tasks"]) == 3


def test_it_names_an_unknown_model(client, pair):
    suite, a, _ = pair
    response = client.get(reverse("suite-compare", args=[suite.name]) + f"?models={a.slug},nope")
    assert response.status_code == 400
    assert "models: no results for model configuration 'nope'" in response.content.decode()


def test_with_fewer_than_two_models_it_offers_a_choice(client, pair):
    suite, _, _ = pair
    response = client.get(reverse("suite-compare", args=[suite.name]))
    assert response.status_code == 200
    assert "Pick two or more" in response.content.decode()
    available = response.context["available"]
    assert [e.key for e in available if e.kind == "config"] == ["model-a", "model-b"]
    assert [e.model.name for e in available if e.kind == "run"] == ["model-a", "model-b"]


def test_it_compares_single_runs_of_one_model_and_pools_them_per_configuration(client, db):
    suite = make_suite("runs", tasks=4)
    model = make_model("twice")
    first = make_run(suite, model, samples=2)
    outcomes(first, [[None, None], [None, "TESTS_FAILED"], [None, None], ["TESTS_FAILED"] * 2])
    second = make_run(suite, model)
    outcomes(second, [["TESTS_FAILED"], ["TESTS_FAILED"], [None], ["TESTS_FAILED"]])
    keys = [f"twice@{str(r.public_id)[:8]}" for r in (first, second)]
    url = reverse("suite-compare", args=[suite.name])
    comparison = client.get(url, {"models": ",".join(keys)}).context["comparison"]
    assert [s.rate for s in comparison.summaries] == [
        pytest.approx((1 + 0.5 + 1 + 0) / 4),
        pytest.approx(1 / 4),
    ]
    (pair,) = comparison.pairs
    assert [r.task_id for r in pair.regressed] == ["task-000", "task-001"]
    pooled = client.get(url, {"models": f"twice,{keys[1]}"}).context["comparison"]
    # Three samples a task pooled: 2/3, 1/3, 3/3, 0/3; never a majority vote.
    assert pooled.summaries[0].rate == pytest.approx((2 / 3 + 1 / 3 + 1 + 0) / 4)
    assert pooled.rows[1].cells[0].outcome == "partial"


def test_it_escapes_task_ids_labels_and_model_names(client, db):
    suite = make_suite("evil", tasks=1, labels={0: ["<img src=x onerror=alert(1)>"]})
    from tasks_app.models import Task

    Task.objects.filter(suite=suite).update(task_id="<script>window.__xss=1</script>")
    a = make_model('<img src=x onerror="window.__xss=1">')
    b = make_model("plain")
    outcomes(make_run(suite, a), [[None]])
    outcomes(make_run(suite, b), [["TESTS_FAILED"]])
    url = reverse("suite-compare", args=[suite.name]) + f"?models={a.slug},{b.slug}"
    body = client.get(url).content.decode()
    assert "<script>window.__xss" not in body
    assert "<img src=x" not in body
    assert "&lt;img src=x onerror=alert(1)&gt;" in body


def test_the_number_of_queries_does_not_grow_with_attempts(client, db):
    counts = []
    for name, tasks, samples in (("few", 2, 1), ("many", 40, 3)):
        suite = make_suite(name, tasks=tasks)
        a, b = make_model(f"{name}-a"), make_model(f"{name}-b")
        outcomes(make_run(suite, a, samples=samples), [[None] * samples] * tasks)
        outcomes(make_run(suite, b, samples=samples), [["TESTS_FAILED"] * samples] * tasks)
        url = reverse("suite-compare", args=[name]) + f"?models={a.slug},{b.slug}"
        with CaptureQueriesContext(connection) as ctx:
            assert client.get(url).status_code == 200
        counts.append(len(ctx))
    assert counts[0] == counts[1]
