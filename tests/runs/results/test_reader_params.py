"""Pages and API take the same parameter names (issue 22, point 7): the leaderboard, compare,
taxonomy and attempt list pages and their endpoints; old names redirect (pages) or are
deprecated aliases (API); an unknown parameter is a notice on a page and a 422 in the API."""

from __future__ import annotations

import pytest
from django.urls import reverse

from runs.api.schemas import AttemptListQuery, CompareQuery
from runs.queries import LeaderboardQuery, TaxonomyQuery
from runs.results import params
from runs.results.attempt_list import AttemptFilters
from tests.support.pages_fixtures import make_model, make_run, make_suite, outcomes

pytestmark = pytest.mark.django_db


def declared(schema) -> set[str]:
    """A query schema's current names: its fields without the deprecated old ones."""
    return {
        name
        for name, f in schema.model_fields.items()
        if not (isinstance(f.json_schema_extra, dict) and f.json_schema_extra.get("deprecated"))
    }


def test_each_page_and_its_endpoint_declare_the_same_names():
    assert declared(LeaderboardQuery) == {"suite", *params.LEADERBOARD}
    assert declared(CompareQuery) == {"suite", *params.COMPARE}
    assert declared(TaxonomyQuery) == {"suite", *params.TAXONOMY}
    assert declared(AttemptListQuery) == {"suite", *params.ATTEMPTS}
    assert tuple(AttemptFilters.__dataclass_fields__) == params.ATTEMPT_FILTER
    old = set(AttemptListQuery.model_fields) - declared(AttemptListQuery)
    assert old == {"model", "run", "failure_reason", "task_id"}
    assert all(params.OLD_NAMES[name] in params.ATTEMPTS for name in old)


@pytest.fixture
def board():
    suite = make_suite("prm", tasks=4, labels={0: ["a"], 1: ["a", "b"], 2: ["b"], 3: []})
    outcomes(make_run(suite, make_model("one")), [[None], [None], ["TESTS_FAILED"], [None]])
    outcomes(make_run(suite, make_model("two")), [["TESTS_FAILED"], [None], [None], [None]])
    return suite


@pytest.mark.parametrize(
    ("page", "old", "new"),
    [
        (
            "suite-leaderboard",
            "label=a&label=b&from=2026-01-01&to=2026-12-31&undated=1&sort=name",
            "labels=a%2Cb&date_from=2026-01-01&date_to=2026-12-31&include_undated=1&sort=name",
        ),
        ("suite-compare", "models=one,two&label=a", "models=one%2Ctwo&labels=a"),
        ("suite-taxonomy", "undated=1", "include_undated=1"),
        ("suite-attempts", "model=one&task_id=task-000", "models=one&task=task-000"),
        # An old name beside its new one: the new one's value is kept.
        ("suite-attempts", "failure_reason=X&reason=TESTS_FAILED", "reason=TESTS_FAILED"),
    ],
)
def test_a_page_redirects_old_names_to_its_canonical_url(client, board, page, old, new):
    base = reverse(page, args=[board.name])
    response = client.get(f"{base}?{old}")
    assert response.status_code == 301
    assert response["Location"] == f"{base}?{new}"
    assert client.get(response["Location"]).status_code == 200


def test_the_leaderboard_page_and_api_read_labels_the_same_way(client, board):
    base = reverse("suite-leaderboard", args=[board.name])
    repeated = client.get(base + "?labels=a&labels=b").context["board"]
    joined = client.get(base + "?labels=a,b").context["board"]
    api = client.get("/api/leaderboard?suite=prm&labels=a&labels=b").json()
    api_joined = client.get("/api/leaderboard?suite=prm&labels=a,b").json()
    assert [r.scored for r in repeated.all_rows] == [r.scored for r in joined.all_rows] == [1, 1]
    assert [r["scored"] for r in api["rows"]] == [r["scored"] for r in api_joined["rows"]]
    assert api["labels"] == ["a", "b"] and [r["scored"] for r in api["rows"]] == [1, 1]


def test_order_is_one_name_and_descending_a_deprecated_alias(client, board):
    def names(query: str) -> list[str]:
        return [
            r["model"]["name"]
            for r in client.get(f"/api/leaderboard?suite=prm&{query}").json()["rows"]
        ]

    assert names("sort=name&order=desc") == ["two", "one"]
    assert names("sort=name&order=asc") == ["one", "two"]
    assert names("sort=name&descending=true") == ["two", "one"]
    page = client.get(reverse("suite-leaderboard", args=["prm"]) + "?sort=name&order=desc")
    assert [r.name for r in page.context["board"].rows] == ["two", "one"]
    assert (
        client.get(reverse("suite-leaderboard", args=["prm"]) + "?order=sideways").status_code
        == 400
    )


@pytest.mark.parametrize(
    ("page", "endpoint"),
    [
        ("suite-leaderboard", "/api/leaderboard?suite=prm"),
        ("suite-taxonomy", "/api/taxonomy?suite=prm"),
        ("suite-attempts", "/api/attempts?suite=prm"),
    ],
)
def test_an_unknown_parameter_is_a_notice_on_the_page_and_a_422_in_the_api(
    client, board, page, endpoint
):
    response = client.get(reverse(page, args=[board.name]) + "?colour=red")
    assert response.status_code == 200
    assert "not applied: &#x27;colour&#x27;" in response.content.decode()
    refused = client.get(endpoint + "&colour=red")
    assert refused.status_code == 422
    assert refused.json()["errors"] == [
        {"field": "colour", "location": "query", "message": refused.json()["errors"][0]["message"]}
    ]
    assert "not a parameter of this endpoint" in refused.json()["detail"]


def test_compare_takes_only_and_labels_on_page_and_api(client, board):
    base = reverse("suite-compare", args=[board.name])
    page = client.get(base + "?models=one,two&only=differ&labels=a")
    assert [r.task_id for r in page.context["rows"]] == ["task-000"]
    api = client.get("/api/compare?suite=prm&models=one,two&only=differ&labels=a").json()
    assert [r["task_id"] for r in api["rows"]] == ["task-000"]
    assert (
        "not applied: &#x27;lables&#x27;"
        in client.get(base + "?models=one,two&lables=a").content.decode()
    )
    assert client.get("/api/compare?suite=prm&models=one,two&lables=a").status_code == 422
    assert client.get(base + "?models=one,two&only=same").status_code == 400


def test_a_page_hands_format_to_its_endpoint_with_the_same_query(client, board):
    base = reverse("suite-leaderboard", args=[board.name])
    response = client.get(base + "?labels=a&sort=name&format=csv")
    assert response.status_code == 302
    assert response["Location"] == "/api/leaderboard.csv?suite=prm&labels=a&sort=name"
    assert client.get(response["Location"]).content.decode().startswith("rank,status,key")
    taxonomy = client.get(reverse("suite-taxonomy", args=[board.name]) + "?models=one&format=json")
    assert taxonomy["Location"] == "/api/taxonomy?suite=prm&models=one"
    assert [m["model"]["name"] for m in client.get(taxonomy["Location"]).json()["models"]] == [
        "one"
    ]
    assert client.get(base + "?format=xml").status_code == 400


def test_the_taxonomy_page_and_its_chart_take_models(client, board):
    page = client.get(reverse("suite-taxonomy", args=[board.name]) + "?models=two")
    assert [b.model.name for b in page.context["breakdown"].models] == ["two"]
    chart_url = reverse("suite-taxonomy-chart", args=[board.name])
    assert page.context["chart_url"] == chart_url + "?models=two"
    assert client.get(chart_url + "?models=two").json()["bars"][0]["x"] == ["two"]
    assert client.get(chart_url + "?undated=1").status_code == 301
    assert client.get(chart_url + "?colour=red").status_code == 400
    bad = client.get(reverse("suite-taxonomy", args=[board.name]) + "?models=nobody")
    assert bad.status_code == 400 and "models: no model configuration" in bad.content.decode()
