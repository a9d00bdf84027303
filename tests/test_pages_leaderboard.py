"""The leaderboard page and ``leaderboard_rows``: figures, ties, published results, filters."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from runs.leaderboard import leaderboard_rows
from runs.models import AgentVariant, RunSource
from tasks_app.models import Task
from tests.pages_fixtures import make_attempt, make_model, make_run, make_suite, outcomes

pytestmark = pytest.mark.django_db


@pytest.fixture
def board():
    suite = make_suite("board", tasks=4)
    a = make_model("alpha")
    b = make_model("beta")
    p = make_model("published-sys", AgentVariant.EXTERNAL)
    base = make_model("validation", AgentVariant.BASELINE)
    outcomes(
        make_run(suite, a, samples=3),
        [
            [None, None, "TESTS_FAILED"],
            [None, None, None],
            ["TESTS_FAILED"] * 3,
            ["SANDBOX_ERROR", None, "TESTS_FAILED"],
        ],
    )
    outcomes(make_run(suite, b), [["TESTS_FAILED"], [None], ["TESTS_FAILED"], ["AGENT_GAVE_UP"]])
    tasks = list(Task.objects.for_suite(suite).order_by("task_id"))
    run_p = make_run(suite, p, source=RunSource.PUBLISHED)
    make_attempt(run_p, tasks[0], None)
    make_attempt(run_p, tasks[1], "UNKNOWN", missing=True)
    make_attempt(run_p, tasks[2], "TESTS_FAILED")
    outcomes(make_run(suite, base), [["BASELINE_NOT_FAILING"]] * 4)
    return suite


def by_name(rows):
    return {r.name: r for r in rows}


def test_it_rates_scored_attempts_and_counts_infrastructure_apart(board):
    rows = by_name(leaderboard_rows(suite=board))
    alpha = rows["alpha"]
    assert (alpha.resolved, alpha.scored, alpha.infra, alpha.attempts) == (6, 11, 1, 12)
    assert alpha.rate == pytest.approx(6 / 11)
    assert alpha.ci_low == pytest.approx(0.2801, abs=1e-3)
    assert alpha.ci_high == pytest.approx(0.7873, abs=1e-3)
    assert alpha.mean_cost_usd == pytest.approx(0.10)
    assert alpha.mean_tokens == pytest.approx(1100)
    assert alpha.cost_per_resolved_usd == pytest.approx(1.2 / 6)


def test_it_computes_pass_at_1_and_pass_at_k_per_task(board):
    alpha = by_name(leaderboard_rows(suite=board))["alpha"]
    assert alpha.k == 3
    assert alpha.pass_at_1 == pytest.approx((2 / 3 + 1 + 0 + 1 / 2) / 4)
    assert alpha.pass_at_k == pytest.approx(3 / 4)
    beta = by_name(leaderboard_rows(suite=board))["beta"]
    assert beta.pass_at_k is None


def test_it_rates_published_results_over_the_whole_suite(board):
    published = by_name(leaderboard_rows(suite=board))["published-sys"]
    assert published.is_published
    assert published.denominator == 4
    assert published.rate == pytest.approx(1 / 4)
    assert published.missing == 2  # one missing entry, one instance absent altogether


def test_it_leaves_baseline_validation_out(board):
    assert "validation" not in by_name(leaderboard_rows(suite=board))


def test_it_marks_models_tied_with_the_leader(board):
    rows = by_name(leaderboard_rows(suite=board))
    assert rows["alpha"].is_leader
    # beta differs from alpha on one task only: exact McNemar p = 1.
    assert rows["beta"].p_value_vs_leader == pytest.approx(1.0)
    assert rows["beta"].tied_with_leader


def test_it_marks_a_clearly_worse_model_as_not_tied(db):
    suite = make_suite("clear", tasks=8)
    outcomes(make_run(suite, make_model("strong")), [[None]] * 8)
    outcomes(make_run(suite, make_model("weak")), [["TESTS_FAILED"]] * 8)
    rows = by_name(leaderboard_rows(suite=suite))
    assert rows["weak"].p_value_vs_leader == pytest.approx(2 / 2**8)
    assert not rows["weak"].tied_with_leader


def test_it_filters_by_label_and_date(board):
    rows = by_name(leaderboard_rows(suite=board, labels=["even"]))
    assert rows["alpha"].scored == 6  # tasks 0 and 2
    assert rows["alpha"].resolved == 2
    later = dt.date(2026, 10, 2)
    assert leaderboard_rows(suite=board, date_from=later) == []
    assert leaderboard_rows(suite=board, date_to=dt.date(2026, 10, 1))


def test_the_page_shows_rows_sorted_and_escapes_model_names(client, board):
    make_model("<script>window.__xss=1</script>")
    from runs.models import ModelConfig

    evil = ModelConfig.objects.get(name__startswith="<script>")
    outcomes(make_run(board, evil), [[None]])
    response = client.get(reverse("suite-leaderboard", args=[board.name]) + "?sort=name&order=asc")
    assert response.status_code == 200
    body = response.content.decode()
    assert "<script>window.__xss=1</script>" not in body
    assert "&lt;script&gt;window.__xss=1&lt;/script&gt;" in body
    names = [r.name for r in response.context["rows"]]
    assert names == sorted(names, key=str.lower)
    assert "54.5%" in body  # alpha: 6 of 11


def test_the_page_names_a_bad_date_filter(client, board):
    response = client.get(reverse("suite-leaderboard", args=[board.name]) + "?from=yesterday")
    assert response.status_code == 400
    assert "from: expected a date as YYYY-MM-DD" in response.content.decode()


def test_anonymous_visitors_are_sent_to_log_in_when_leaderboards_are_private(
    client, board, settings
):
    settings.ANONYMOUS_READ_LEADERBOARDS = False
    response = client.get(reverse("suite-leaderboard", args=[board.name]))
    assert response.status_code == 302
    assert "login" in response["Location"]


def _grow(suite, models: int, samples: int) -> None:
    tasks = list(Task.objects.for_suite(suite).order_by("task_id"))
    for m in range(models):
        run = make_run(suite, make_model(f"{suite.name}-model-{m}"), samples=samples)
        for t, task in enumerate(tasks):
            for s in range(samples):
                make_attempt(run, task, None if (t + s + m) % 3 else "TESTS_FAILED", sample=s)


def test_the_number_of_queries_does_not_grow_with_attempts(client, db):
    small = make_suite("small", tasks=3)
    _grow(small, models=2, samples=1)
    large = make_suite("large", tasks=30)
    _grow(large, models=6, samples=3)
    counts = []
    for suite in (small, large):
        with CaptureQueriesContext(connection) as ctx:
            assert client.get(reverse("suite-leaderboard", args=[suite.name])).status_code == 200
        counts.append(len(ctx))
    assert counts[1] == counts[0]
    assert counts[0] <= 10
