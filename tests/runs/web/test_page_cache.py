"""The results pages' cache (runs/web/page_cache.py) and the data version behind it
(runs/data_version.py): every kind of write shows on the next request, visitors with other
rights never get each other's page, and a repeated request is answered from the cache."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from runs import data_version
from runs.models import Attempt, AttemptStatus, FailureReason
from tasks_app.models import Task
from tests.support.pages_fixtures import (
    add_stage,
    make_attempt,
    make_model,
    make_run,
    make_suite,
    write_artifact,
)

SECRET = "SECRET_PATCH_LINE_42"
PATCH = f"""--- a/calc.py
+++ b/calc.py
@@ -1 +1 @@
-x = 1
+x = "{SECRET}"
"""


def is_hit(response) -> bool:
    """Put together from cached blocks (the test client records the templates' contexts)."""
    return "blocks" in response.context and "board" not in response.context


def rate_of(client: Client, suite, slug: str) -> str:
    response = client.get(reverse("suite-leaderboard", args=[suite.name]))
    assert response.status_code == 200
    row = re.search(
        rf'<tr data-model="{slug}".*?<strong>([^<]*)</strong>', response.content.decode(), re.S
    )
    assert row, "the model's row is on the page"
    return row.group(1)


@pytest.fixture
def board(db):
    """One model on two tasks: one resolved, one failed (50.0%)."""
    suite = make_suite("cached", tasks=2)
    run = make_run(suite, make_model("solver"))
    first, second = Task.objects.for_suite(suite).order_by("task_id")
    make_attempt(run, first, None)
    failed = make_attempt(run, second, "TESTS_FAILED")
    return suite, run.model_config.slug, failed


def test_it_watches_every_table_the_results_pages_read(db):
    tables = set(data_version.watched_tables())
    assert {"runs_attempt", "runs_run", "runs_modelconfig", "tasks_app_goldvalidation"} <= tables
    assert {"tasks_app_task", "tasks_app_suite", "runs_attemptstage"} <= tables
    installed = data_version.installed_triggers()
    per_table = 3  # SQLite: insert, update, delete; PostgreSQL: rows, update, truncate
    for table in tables:
        # Attempts also stamp their run (runs.results.run_tallies): three more.
        expected = per_table * 2 if table == data_version.RUN_TABLE_OF else per_table
        assert len({name for t, name in installed if t == table}) == expected, table


def test_it_reinstalls_a_trigger_that_went_missing(db):
    # SQLite drops a table's triggers when a migration rebuilds the table.
    table = "runs_attempt"
    with connection.cursor() as cursor:
        for t, name in data_version.installed_triggers():
            if t == table:
                on = f' ON "{t}"' if connection.vendor == "postgresql" else ""
                cursor.execute(f'DROP TRIGGER "{name}"{on}')
        # One from an older version of the statements: replaced.
        then = "FOR EACH ROW BEGIN SELECT 1; END"
        if connection.vendor == "postgresql":
            then = "FOR EACH STATEMENT EXECUTE FUNCTION pagecache_bump()"
        cursor.execute(
            f'CREATE TRIGGER "pagecache_bump_runs_run_update_0" AFTER UPDATE ON "runs_run" {then}'
        )
    assert not any(t == table for t, _ in data_version.installed_triggers())
    # Its three, its run stamp's three (runs.results.run_tallies), and the outdated one.
    assert data_version.install() == 3 + 3 + 1
    assert ("runs_run", "pagecache_bump_runs_run_update_0") not in data_version.installed_triggers()
    assert data_version.install() == 0


@pytest.mark.django_db(transaction=True)
def test_the_version_changes_with_a_save_an_update_raw_sql_and_a_delete(board):
    suite, _, failed = board
    seen = [data_version.current()]

    def changed() -> bool:
        seen.append(data_version.current())
        return seen[-1] != seen[-2]

    Attempt.objects.filter(suite=suite).count()
    assert not changed(), "a read changes nothing"
    failed.cost_usd = 2
    failed.save(update_fields=["cost_usd"])
    assert changed(), "save()"
    Attempt.objects.filter(pk=failed.pk).update(tokens_in=5)
    assert changed(), "queryset.update()"
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE tasks_app_task SET labels = %s WHERE suite_id = %s", ["[]", suite.pk]
        )
    assert changed(), "raw SQL"
    FailureReason.objects.filter(code="TESTS_FAILED").update(description="changed")
    assert changed(), "another table the pages read"
    Attempt.objects.filter(pk=failed.pk).update(heartbeat_at=timezone.now())
    assert not changed(), "a heartbeat alone: no page shows it"
    Attempt.objects.filter(pk=failed.pk).update(heartbeat_at=timezone.now(), steps=3)
    assert changed(), "a heartbeat with news"
    failed.delete()
    assert changed(), "delete()"


@pytest.mark.django_db(transaction=True)
def test_the_leaderboard_shows_each_write_on_the_next_request(board):
    suite, slug, failed = board
    client = Client()
    assert rate_of(client, suite, slug) == "50.0%"
    response = client.get(reverse("suite-leaderboard", args=[suite.name]))
    assert is_hit(response), "the second request is answered from the cache"

    Attempt.objects.filter(pk=failed.pk).update(failure_reason=None)
    assert rate_of(client, suite, slug) == "100.0%", "queryset.update()"
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE runs_attempt SET failure_reason_id = %s WHERE id = %s",
            ["TESTS_FAILED", failed.pk],
        )
    assert rate_of(client, suite, slug) == "50.0%", "raw SQL"
    failed.refresh_from_db()
    failed.failure_reason = None
    failed.save()
    assert rate_of(client, suite, slug) == "100.0%", "save()"
    failed.status = AttemptStatus.RUNNING
    failed.save(update_fields=["status"])
    body = client.get(reverse("suite-leaderboard", args=[suite.name])).content.decode()
    assert "1 pending" in body, "a running attempt is pending, and the row says so"


@pytest.mark.django_db(transaction=True)
def test_a_running_attempts_page_stays_live(artifacts_root, settings):
    settings.ANONYMOUS_READ_ARTIFACTS = True
    suite = make_suite("live", tasks=1)
    task = Task.objects.get(suite=suite)
    attempt = make_attempt(
        make_run(suite, make_model("solver")), task, None, status=AttemptStatus.RUNNING
    )
    log = write_artifact(attempt, "stages/agent_run.log", b"step one\n")
    add_stage(attempt, "agent_run", "stages/agent_run.log")
    url = reverse("attempt-detail", args=[attempt.public_id])
    client = Client()
    body = client.get(url).content.decode()
    assert "step one" in body and 'data-outcome="pending"' in body
    assert is_hit(client.get(url))

    # The log grows without a database write.
    with open(artifacts_root / log, "ab") as handle:
        handle.write(b"step two\n")
    assert "step two" in client.get(url).content.decode()

    Attempt.objects.filter(pk=attempt.pk).update(
        status=AttemptStatus.FINISHED, finished_at=timezone.now(), final_patch=PATCH
    )
    body = client.get(url).content.decode()
    assert SECRET in body and 'data-outcome="resolved"' in body
    assert 'data-outcome="pending"' not in body


def test_visitors_with_other_rights_never_get_each_others_page(
    alice,
    bob,
    dave,
    artifacts_root,
    settings,
):
    settings.ANONYMOUS_READ_ARTIFACTS = False
    suite = make_suite("rights", tasks=1)
    task = Task.objects.get(suite=suite)
    attempt = make_attempt(make_run(suite, make_model("solver")), task, None, final_patch=PATCH)
    url = reverse("attempt-detail", args=[attempt.public_id])
    clients = {}
    for user in (bob, alice, dave, None):
        clients[user.username if user else "anonymous"] = client = Client()
        if user:
            client.force_login(user)

    def page(name: str) -> str:
        response = clients[name].get(url)
        assert response.status_code == 200
        return response.content.decode()

    def who(body: str) -> str | None:
        found = re.search(r'<span class="who" id="who">([^<]*)</span>', body)
        return found.group(1) if found else None

    # The reader first, so that everything after could find his page in the cache.
    first = page("bob")
    assert SECRET in first and who(first) == "bob"
    for _ in range(2):
        body = page("dave")
        assert SECRET not in body and "your account is not one" in body and who(body) == "dave"
        body = page("anonymous")
        assert SECRET not in body and 'id="login-prompt"' in body and who(body) is None
        assert "Log in</a> to see them" in body
        body = page("alice")
        assert SECRET in body and who(body) == "alice" and "/admin/" in body
        body = page("bob")
        assert SECRET in body and who(body) == "bob" and "/admin/" not in body
    assert is_hit(clients["bob"].get(url))
    # Each one's own CSRF token in the logout form (masked anew each time: compare unmasked).
    tokens = {
        name: _unmask(re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page(name))[1])
        for name in ("bob", "alice", "dave")
    }
    assert tokens == {name: clients[name].cookies["csrftoken"].value for name in tokens}
    assert len(set(tokens.values())) == 3


def _unmask(token: str) -> str:
    from django.middleware.csrf import _unmask_cipher_token

    return _unmask_cipher_token(token)


def test_a_cached_leaderboard_takes_one_query(client, board, django_assert_num_queries):
    suite, _, _ = board
    url = reverse("suite-leaderboard", args=[suite.name])
    first = client.get(url)
    with django_assert_num_queries(1):  # the data version
        second = client.get(url)
    assert is_hit(second) and second.content == first.content


def test_compare_and_its_exports_from_the_cache_match_a_full_render(client, board, settings):
    suite, slug, _ = board
    other = make_run(suite, make_model("other"))
    make_attempt(other, Task.objects.for_suite(suite).first(), "TESTS_FAILED")
    url = reverse("suite-compare", args=[suite.name]) + f"?models={slug},other"
    full = client.get(url).content
    assert is_hit(response := client.get(url)) and response.content == full
    csv = client.get(url + "&format=csv")
    assert (
        csv["Content-Type"].startswith("text/csv")
        and csv.content == client.get(url + "&format=csv").content
    )
    settings.PAGE_CACHE = False
    response = client.get(url)
    assert not is_hit(response) and response.content == full


def test_it_never_keeps_a_csrf_token_a_redirect_or_a_download():
    from django.http import HttpResponse, HttpResponseRedirect

    from runs.web.page_cache import _cacheable

    page = HttpResponse("<p>page</p>")
    assert _cacheable(page, {"content": "<p>figures</p>"})
    token = '<form><input type="hidden" name="csrfmiddlewaretoken" value="x"></form>'
    assert not _cacheable(page, {"content": token})
    assert not _cacheable(HttpResponseRedirect("/login/"), {"content": "<p>figures</p>"})
    csv = HttpResponse("a,b", content_type="text/csv")
    assert not _cacheable(csv, {"content": "<p>figures</p>"})
    assert not _cacheable(page, {"title": "no content block"})
