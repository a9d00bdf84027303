"""A results page and its API endpoint read the same parameters the same way (issue 30): the
page parses its query with the API's schema (``runs.web.query.page_query``), so one
selection gives the same rows and figures, and one bad value the same words (the page shows
them with status 400, the API answers 422)."""

from __future__ import annotations

import pytest
from django.urls import reverse

SELECTIONS = [
    "",
    "view=configs",
    "labels=python",
    "labels=python,flaky&labels=cli",
    "sort=name&order=asc",
    "sort=mean_cost&order=desc&view=configs",
    "include_undated=yes&date_from=2000-01-01",
    "date_to=2000-01-01",
    "date_from=2000-01-01T00:00:00",
]


def page_rows(client, suite: str, query: str) -> list[tuple]:
    response = client.get(reverse("suite-leaderboard", args=[suite]) + "?" + query)
    assert response.status_code == 200, response.context["errors"]
    return [
        (r.key, r.rank, r.score.rate, r.score.tasks) for r in response.context["board"].all_rows
    ]


def api_rows(client, suite: str, query: str) -> list[tuple]:
    response = client.get(f"/api/leaderboard?suite={suite}&{query}")
    assert response.status_code == 200, response.json()
    return [(r["key"], r["rank"], r["rate"], r["tasks"]) for r in response.json()["rows"]]


@pytest.mark.parametrize("query", SELECTIONS)
def test_the_leaderboard_page_and_api_read_a_selection_alike(client, seeded, query):
    suite = seeded["suite"].name
    rows = page_rows(client, suite, query)
    assert rows == api_rows(client, suite, query)
    if query == "":
        assert len(rows) == 3  # the seeded runs: the comparison is not of two empty boards


def test_a_date_filter_changes_both_alike(client, seeded):
    suite = seeded["suite"].name
    everything = page_rows(client, suite, "")
    nothing = page_rows(client, suite, "date_to=2000-01-01")
    assert everything and not nothing
    assert nothing == api_rows(client, suite, "date_to=2000-01-01")


BAD = [
    ("sort", "bogus"),
    ("view", "tables"),
    ("order", "up"),
    ("date_from", "yesterday"),
    ("date_to", "2025-13-01"),
    ("include_undated", "maybe"),
]


@pytest.mark.parametrize(("name", "value"), BAD)
def test_a_bad_parameter_gets_the_apis_words_on_the_page(client, seeded, name, value):
    suite = seeded["suite"].name
    api = client.get(f"/api/leaderboard?suite={suite}&{name}={value}")
    assert api.status_code == 422
    (error,) = api.json()["errors"]
    assert error["field"] == name
    page = client.get(reverse("suite-leaderboard", args=[suite]) + f"?{name}={value}")
    assert page.status_code == 400
    assert page.context["errors"] == [f"{name}: {error['message']}"]
    # The rest of the page is the default selection, as the API's defaults would give.
    assert len(page.context["board"].all_rows) == 3


def test_dates_out_of_order_are_refused_alike(client, seeded):
    suite = seeded["suite"].name
    query = "date_from=2025-02-01&date_to=2025-01-01"
    api = client.get(f"/api/leaderboard?suite={suite}&{query}")
    assert api.status_code == 400
    assert api.json()["detail"] == "date_to: must not be before date_from"
    page = client.get(reverse("suite-leaderboard", args=[suite]) + "?" + query)
    assert page.status_code == 400
    assert page.context["errors"] == ["date_to: must not be before date_from"]


def test_the_taxonomy_page_reads_its_parameters_with_the_apis_schema(client, seeded):
    suite = seeded["suite"].name
    api = client.get(f"/api/taxonomy?suite={suite}&include_undated=maybe")
    assert api.status_code == 422
    (error,) = api.json()["errors"]
    page = client.get(reverse("suite-taxonomy", args=[suite]) + "?include_undated=maybe")
    assert page.status_code == 400
    assert page.context["errors"] == [f"include_undated: {error['message']}"]


ATTEMPT_LIST_BAD = [
    ("outcome", "lost"),
    ("sort", "colour"),
    ("order", "up"),
    ("page_size", "9999"),
    ("page_size", "ten"),
    ("is_infra", "maybe"),
    ("q", "x" * 201),
]


@pytest.mark.parametrize(("name", "value"), ATTEMPT_LIST_BAD)
def test_the_attempt_list_page_words_a_bad_value_as_the_api(client, seeded, name, value):
    suite = seeded["suite"].name
    api = client.get(f"/api/attempts?suite={suite}&{name}={value}")
    assert api.status_code == 422
    (error,) = api.json()["errors"]
    assert error["field"] == name
    page = client.get(reverse("suite-attempts", args=[suite]) + f"?{name}={value}")
    assert page.status_code == 400
    assert page.context["errors"] == [f"{name}: {error['message']}"]
    assert page.context["page"] is None


@pytest.mark.parametrize(
    "query", ["", "outcome=resolved", "sort=outcome&order=desc", "labels=python", "page_size=2"]
)
def test_the_attempt_list_page_and_api_select_alike(client, seeded, query):
    suite = seeded["suite"].name
    page = client.get(reverse("suite-attempts", args=[suite]) + "?" + query)
    assert page.status_code == 200, page.context["errors"]
    shown = [str(a.public_id) for a in page.context["page"]]
    api = client.get(f"/api/attempts?suite={suite}&page_size={len(shown) or 1}&{query}")
    assert api.status_code == 200, api.json()
    assert [a["public_id"] for a in api.json()["items"]] == shown
    if query == "":
        assert shown  # the seeded attempts: not two empty lists


def test_the_compare_page_words_a_bad_value_as_the_api(client, seeded):
    suite = seeded["suite"].name
    models = ",".join(c.slug for c in list(seeded["models"].values())[:2])
    api = client.get(f"/api/compare?suite={suite}&models={models}&only=same")
    assert api.status_code == 422
    (error,) = api.json()["errors"]
    page = client.get(reverse("suite-compare", args=[suite]) + f"?models={models}&only=same")
    assert page.status_code == 400
    assert page.content.decode() == f"only: {error['message']}"
