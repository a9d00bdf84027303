"""The attempt list (issue 22, the reader's tools): every filter of its form, sortable columns,
paging with counts, and the CSV / JSON export of exactly what it shows; ``/api/attempts``
takes the same names and gives the same rows in the same order."""

from __future__ import annotations

import csv
import io
import json
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from runs.models import Attempt, AttemptStatus
from tasks_app.models import Task
from tests.support.pages_fixtures import make_attempt, make_model, make_run, make_suite

pytestmark = pytest.mark.django_db

EVIL = "<script>window.__xss=1</script>"


@pytest.fixture
def listed():
    """A suite of 6 tasks in two repositories; two models: "alpha" (two runs) and "beta"."""
    suite = make_suite("lst", tasks=6)
    for task in Task.objects.for_suite(suite).order_by("task_id"):
        index = int(task.task_id[-3:])
        task.repo_url = "https://github.com/org/one" if index < 3 else "https://github.com/org/two"
        task.save()
    tasks = list(Task.objects.for_suite(suite).order_by("task_id"))
    alpha, beta = make_model("alpha"), make_model("beta")
    first, second, b_run = make_run(suite, alpha), make_run(suite, alpha), make_run(suite, beta)
    costs = [Decimal("0.30"), None, Decimal("0.10"), Decimal("0.50"), Decimal("0.20"), None]
    for i, task in enumerate(tasks):
        make_attempt(
            first,
            task,
            None if i % 2 == 0 else "TESTS_FAILED",
            cost_usd=costs[i],
            duration_sec=10.0 + i,
            error_text="" if i % 2 == 0 else f"AssertionError in case {i}",
        )
    make_attempt(second, tasks[0], "SANDBOX_ERROR", error_text="docker daemon went away")
    make_attempt(second, tasks[1], None, missing=True)
    make_attempt(b_run, tasks[2], None)
    make_attempt(b_run, tasks[3], None, status=AttemptStatus.QUEUED)
    make_attempt(b_run, tasks[4], None, status=AttemptStatus.NOT_EVALUATED)
    return suite


def url(suite) -> str:
    return reverse("suite-attempts", args=[suite.name])


def shown(response) -> list[str]:
    return [str(a.public_id) for a in response.context["page"]]


def ids(queryset) -> list[str]:
    return [str(p) for p in queryset.values_list("public_id", flat=True)]


def short(run) -> str:
    return str(run.public_id)[:8]


def test_every_filter_of_the_form_narrows_the_list(client, listed):
    first, second = listed.runs.filter(model_config__name="alpha").order_by("created_at", "id")
    cases = {
        "models=beta": Attempt.objects.filter(model_config__name="beta"),
        f"runs={short(second)}": Attempt.objects.filter(run=second),
        f"runs={short(first)},{short(second)}": Attempt.objects.filter(run__in=[first, second]),
        "outcome=missing": Attempt.objects.filter(status=AttemptStatus.MISSING),
        "outcome=failed": Attempt.objects.filter(
            failure_reason_id="TESTS_FAILED", status="finished"
        ),
        "outcome=infra": Attempt.objects.filter(failure_reason_id="SANDBOX_ERROR"),
        "outcome=not_evaluated": Attempt.objects.filter(status=AttemptStatus.NOT_EVALUATED),
        "outcome=pending": Attempt.objects.filter(
            status__in=[AttemptStatus.QUEUED, AttemptStatus.NOT_EVALUATED]
        ),
        "models=alpha&outcome=pending": Attempt.objects.none(),
        "outcome=resolved": Attempt.objects.filter(
            status="finished", is_infra=False, failure_reason__isnull=True
        ),
        "reason=TESTS_FAILED": Attempt.objects.filter(failure_reason_id="TESTS_FAILED"),
        "repo=org/two": Attempt.objects.filter(task__repo_url__endswith="/two"),
        "labels=even": Attempt.objects.filter(task__labels_text__contains=",even,"),
        "q=task-005": Attempt.objects.filter(task__task_id="task-005"),
        "status=queued": Attempt.objects.filter(status=AttemptStatus.QUEUED),
        "is_infra=true": Attempt.objects.filter(is_infra=True),
        "resolved=true": Attempt.objects.filter(
            status="finished", is_infra=False, failure_reason__isnull=True
        ),
        "task=task-000": Attempt.objects.filter(task__task_id="task-000"),
        "models=alpha&outcome=resolved&repo=org/one": Attempt.objects.filter(
            model_config__name="alpha", status="finished", failure_reason__isnull=True
        ).filter(task__repo_url__endswith="/one"),
    }
    for query, expected in cases.items():
        response = client.get(f"{url(listed)}?{query}")
        assert response.status_code == 200, query
        assert sorted(shown(response)) == sorted(ids(expected)), query
        assert response.context["page"].paginator.count == expected.count(), query


def test_free_text_looks_in_errors_only_for_readers(client, bob, listed):
    # An error text is an artifact: a visitor's search must not find (reveal) it.
    assert client.get(url(listed) + "?q=daemon").context["page"].paginator.count == 0
    client.force_login(bob)
    found = client.get(url(listed) + "?q=DAEMON").context["page"]
    assert [a.failure_reason_id for a in found] == ["SANDBOX_ERROR"]
    assert "docker daemon went away" in client.get(url(listed) + "?q=daemon").content.decode()


def test_columns_sort_both_ways_with_unknown_values_last(client, listed):
    every = list(Attempt.objects.filter(suite=listed).select_related("task", "model_config"))

    def tie(a):
        return (a.task.task_id, a.model_config.name, a.sample_index, a.id)

    response = client.get(url(listed) + "?sort=cost&order=desc")
    known = sorted((a for a in every if a.cost_usd is not None), key=tie)
    known.sort(key=lambda a: a.cost_usd, reverse=True)
    unknown = sorted((a for a in every if a.cost_usd is None), key=tie)
    assert shown(response) == [str(a.public_id) for a in known + unknown]
    response = client.get(url(listed) + "?sort=cost&order=asc")
    known.sort(key=lambda a: (a.cost_usd, tie(a)))
    assert shown(response) == [str(a.public_id) for a in known + unknown]

    by_model = client.get(url(listed) + "?sort=model&order=desc")
    names = [a.model_config.name for a in by_model.context["page"]]
    assert names == sorted(names, reverse=True)
    by_outcome = client.get(url(listed) + "?sort=outcome")
    outcomes = [a.outcome for a in by_outcome.context["page"]]
    order = ["resolved", "failed", "infra", "missing", "not_evaluated", "pending"]
    assert outcomes == sorted(outcomes, key=order.index)
    assert outcomes[0] == "resolved" and outcomes[-1] == "pending"

    # The header of the sorted column reverses it; another column starts its own way.
    columns = {c["key"]: c for c in by_model.context["columns"]}
    assert "sort=model&order=asc" in columns["model"]["url"]
    assert columns["model"]["sorted"] == "desc"
    assert "sort=cost&order=desc" in columns["cost"]["url"]
    assert "sort=task&order=asc" in columns["task"]["url"]


def test_pages_count_and_keep_the_filter(client, listed):
    response = client.get(url(listed) + "?models=alpha&page_size=3&page=2&sort=wall&order=asc")
    page = response.context["page"]
    assert (page.paginator.count, page.number, page.paginator.num_pages) == (8, 2, 3)
    body = response.content.decode()
    dash = "\N{EN DASH}"
    assert f'showing <span id="shown-range">4{dash}6</span>' in body
    assert f"page 2 of 3 · 4{dash}6 of 8" in body
    # The paging links keep the filter, the order and the page size.
    assert "?models=alpha&amp;sort=wall&amp;order=asc&amp;page_size=3&amp;page=3" in body
    # Each outcome's count under the other filters, as a link.
    counts = {o["outcome"]: o["count"] for o in response.context["outcomes"]}
    assert counts == {"resolved": 3, "failed": 3, "infra": 1, "missing": 1}


def test_the_export_is_exactly_the_list_in_its_order(client, bob, listed):
    client.force_login(bob)
    query = "models=alpha&sort=cost&order=desc&page_size=2"
    on_pages = []
    for number in range(1, 5):
        on_pages += shown(client.get(f"{url(listed)}?{query}&page={number}"))
    exported = client.get(f"{url(listed)}?{query}&format=csv")
    assert exported.streaming and exported["Content-Type"].startswith("text/csv")
    assert 'filename="attempts-lst.csv"' in exported["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(b"".join(exported.streaming_content).decode())))
    assert [r["attempt"] for r in rows] == on_pages and len(on_pages) == 8
    missing = next(r for r in rows if r["outcome"] == "missing")
    assert (missing["reason"], missing["cost_usd"], missing["tokens_in"]) == ("", "", "")
    assert next(r for r in rows if r["reason"] == "SANDBOX_ERROR")["error"].startswith("docker")

    as_json = client.get(f"{url(listed)}?{query}&format=json")
    document = json.loads(b"".join(as_json.streaming_content))
    assert [r["attempt"] for r in document["items"]] == on_pages
    assert document["suite"] == "lst" and document["filters"]["models"] == "alpha"
    assert next(r for r in document["items"] if r["outcome"] == "missing")["cost_usd"] is None


def test_the_export_escapes_what_spreadsheets_would_run(client, bob, listed):
    task = Task.objects.for_suite(listed).get(task_id="task-001")
    task.task_id = "=HYPERLINK(1)"
    task.save()
    client.force_login(bob)
    body = b"".join(client.get(url(listed) + "?format=csv").streaming_content).decode()
    assert "'=HYPERLINK(1)" in body and "\n=HYPERLINK" not in body


def test_the_api_takes_the_same_names_and_gives_the_same_rows(client, listed):
    for query in (
        "models=alpha&sort=cost&order=desc",
        "outcome=missing",
        "repo=org/two&sort=wall",
        "labels=odd&sort=finished&order=asc",
    ):
        page = shown(client.get(f"{url(listed)}?{query}&page_size=500"))
        api = client.get(f"/api/attempts?suite=lst&{query}&page_size=500").json()
        assert [a["public_id"] for a in api["items"]] == page, query
        assert api["count"] == len(page)
        page_csv = b"".join(client.get(f"{url(listed)}?{query}&format=csv").streaming_content)
        api_csv = b"".join(
            client.get(f"/api/attempts?suite=lst&{query}&format=csv").streaming_content
        )
        assert api_csv == page_csv, query


def test_old_names_redirect_on_the_page_and_are_aliases_in_the_api(client, listed):
    run = listed.runs.get(model_config__name="beta")
    old = client.get(f"{url(listed)}?model=beta&run={short(run)}&failure_reason=TESTS_FAILED")
    assert old.status_code == 301
    assert old["Location"] == (f"{url(listed)}?models=beta&runs={short(run)}&reason=TESTS_FAILED")
    new = client.get("/api/attempts", {"models": "beta", "runs": short(run)}).json()
    aliased = client.get("/api/attempts", {"model": "beta", "run": str(run.public_id)}).json()
    assert aliased == new and new["count"] == 3


def test_an_unknown_or_bad_parameter_is_never_ignored_in_silence(client, listed):
    response = client.get(url(listed) + "?modle=beta")
    assert response.status_code == 200
    assert (
        "Not a parameter of this page, not applied: &#x27;modle&#x27;" in response.content.decode()
    )
    refused = client.get("/api/attempts?modle=beta")
    assert refused.status_code == 422
    assert refused.json()["errors"][0]["field"] == "modle"
    for query, field in (
        ("outcome=lost", "outcome"),
        ("reason=NOPE", "reason"),
        ("sort=colour", "sort"),
        ("runs=abc", "runs"),
        ("page_size=9999", "page_size"),
        ("is_infra=maybe", "is_infra"),
        ("models=nobody", "models"),
    ):
        bad = client.get(f"{url(listed)}?{query}")
        assert bad.status_code == 400, query
        assert f"{field}: " in bad.content.decode(), query
        assert bad.context["page"] is None  # nothing shown that the filter did not ask for
    assert client.get("/api/attempts?models=nobody").status_code == 404
    assert client.get("/api/attempts?reason=NOPE").json()["errors"][0]["field"] == "reason"


def test_untrusted_task_ids_and_errors_are_escaped(client, bob, listed):
    task = Task.objects.for_suite(listed).get(task_id="task-003")
    task.task_id = EVIL
    task.save()
    Attempt.objects.filter(task=task).update(error_text=EVIL)
    client.force_login(bob)
    body = client.get(url(listed) + "?q=script").content.decode()
    assert EVIL not in body and "&lt;script&gt;window.__xss=1&lt;/script&gt;" in body


def test_queries_do_not_grow_with_the_page_size(client, bob, listed):
    client.force_login(bob)
    run = listed.runs.filter(model_config__name="alpha").first()
    tasks = list(Task.objects.for_suite(listed))
    for sample in range(1, 40):
        make_attempt(run, tasks[sample % len(tasks)], "TESTS_FAILED", sample=sample)
    counts = []
    for size in (10, 200):
        with CaptureQueriesContext(connection) as ctx:
            response = client.get(f"{url(listed)}?page_size={size}&models=alpha&sort=outcome")
        assert response.status_code == 200
        assert len(response.context["page"]) == min(size, 47)
        counts.append(len(ctx))
    assert counts[0] == counts[1]


def test_the_list_length_comes_from_the_outcome_counts(client, listed):
    """The outcome counts split every attempt the other filters select, so the list's length
    is read with them: no COUNT of its own (one scan of the attempts fewer)."""
    for query in ("", "?outcome=pending", "?models=alpha&outcome=failed"):
        with CaptureQueriesContext(connection) as ctx:
            response = client.get(url(listed) + query)
        assert response.status_code == 200
        counts = [q["sql"] for q in ctx if "COUNT(*)" in q["sql"] and "runs_attempt" in q["sql"]]
        assert counts == [], query
    everything = client.get(url(listed))
    assert everything.context["page"].paginator.count == Attempt.objects.count() == 11
