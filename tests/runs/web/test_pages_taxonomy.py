"""The failure taxonomy page: counts by model and reason, chart data, the attempts list."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from runs.results.taxonomy_report import chart_data, taxonomy_breakdown
from tests.support.pages_fixtures import make_model, make_run, make_suite, outcomes

pytestmark = pytest.mark.django_db


@pytest.fixture
def suite():
    suite = make_suite("tax", tasks=4)
    outcomes(
        make_run(suite, make_model("m1")),
        [[None], ["TESTS_FAILED"], ["SANDBOX_ERROR"], ["TESTS_FAILED"]],
    )
    outcomes(make_run(suite, make_model("m2")), [[None], [None], ["TIMEOUT"], ["TOOL_ERROR"]])
    return suite


def test_it_counts_attempts_by_model_and_reason(suite):
    breakdown = taxonomy_breakdown(suite=suite)
    by_name = {b.model.name: b for b in breakdown.models}
    assert by_name["m1"].resolved == 1
    assert by_name["m1"].counts == {"TESTS_FAILED": 2, "SANDBOX_ERROR": 1}
    assert by_name["m2"].counts == {"TIMEOUT": 1, "TOOL_ERROR": 1}
    assert [r.precedence for r in breakdown.reasons] == sorted(
        r.precedence for r in breakdown.reasons
    )
    assert len(breakdown.points) == 2
    assert sorted(p.rate for p in breakdown.points) == [pytest.approx(1 / 3), pytest.approx(2 / 3)]


def test_chart_segments_link_to_their_attempts_and_separate_the_two_families(suite):
    data = chart_data(taxonomy_breakdown(suite=suite), "/suites/tax/attempts/")
    names = [t["name"] for t in data["bars"]]
    assert names[0] == "resolved"
    assert "SANDBOX_ERROR (infra)" in names and "TESTS_FAILED (agent)" in names
    # precedence order: SANDBOX_ERROR (6) < TOOL_ERROR (8) < TIMEOUT (9) < TESTS_FAILED (11)
    assert names[1:] == [
        "SANDBOX_ERROR (infra)",
        "TOOL_ERROR (agent)",
        "TIMEOUT (infra)",
        "TESTS_FAILED (agent)",
    ]
    sandbox = next(t for t in data["bars"] if t["name"].startswith("SANDBOX_ERROR"))
    assert sandbox["customdata"][0].endswith("reason=SANDBOX_ERROR")
    assert sandbox["marker"]["pattern"]["shape"] == "/"
    tool = next(t for t in data["bars"] if t["name"].startswith("TOOL_ERROR"))
    assert tool["marker"]["pattern"]["shape"] == ""
    assert len(data["lines"]) == 2


def test_the_page_loads_plotly_and_the_chart_data_only_when_a_chart_is_seen(client, suite):
    response = client.get(reverse("suite-taxonomy", args=[suite.name]))
    assert response.status_code == 200
    body = response.content.decode()
    chart_url = reverse("suite-taxonomy-chart", args=[suite.name])
    # Two charts, one data URL (fetched once by charts.js), no data and no plotly <script>.
    assert body.count(f'data-chart-src="{chart_url}"') == 2
    assert '<script src="/static/vendor/plotly' not in body and "application/json" not in body
    assert 'data-plotly="/static/vendor/plotly-4.1.1.min.js"' in body
    data = client.get(chart_url).json()
    assert data["bars"][0]["y"] == [2, 1] or data["bars"][0]["y"] == [1, 2]


def test_model_names_in_chart_data_cannot_close_the_script(client, db):
    suite = make_suite("taxevil", tasks=1)
    outcomes(make_run(suite, make_model("</script><script>window.__xss=1</script>")), [[None]])
    body = client.get(reverse("suite-taxonomy", args=[suite.name])).content.decode()
    assert "</script><script>window.__xss=1" not in body


def test_the_attempts_list_filters_by_model_and_reason(client, suite):
    url = reverse("suite-attempts", args=[suite.name]) + "?models=m1&reason=TESTS_FAILED"
    response = client.get(url)
    assert response.status_code == 200
    page = response.context["page"]
    assert page.paginator.count == 2
    assert {a.failure_reason_id for a in page} == {"TESTS_FAILED"}
    resolved = client.get(reverse("suite-attempts", args=[suite.name]) + "?outcome=resolved")
    assert resolved.context["page"].paginator.count == 3


def test_queries_do_not_grow_with_attempts(client, db):
    counts = []
    for name, tasks in (("tsmall", 2), ("tlarge", 40)):
        suite = make_suite(name, tasks=tasks)
        for m in range(1 if tasks == 2 else 4):
            outcomes(
                make_run(suite, make_model(f"{name}-{m}")),
                [["TESTS_FAILED" if i % 2 else None] for i in range(tasks)],
            )
        for url in (
            reverse("suite-taxonomy", args=[name]),
            reverse("suite-attempts", args=[name]),
        ):
            with CaptureQueriesContext(connection) as ctx:
                assert client.get(url).status_code == 200
            counts.append((url.split("/")[-2], len(ctx)))
    assert counts[0][1] == counts[2][1]
    assert counts[1][1] == counts[3][1]
