"""Usage numbers no attempt can have, already stored (older imports, raw SQL), on every page.

An imported ``total_cost_usd`` of 1e308 made the suite's attempts list (page, API, CSV, for
anonymous visitors too), the run page and the admin's attempt list answer 500 for good; 9e18
tokens or calls overflowed SQLite's ``sum()`` on the leaderboard. The values are written here
with raw SQL, as older code left them, and each page must answer 200 with the value shown as
unknown ("—", null, an empty CSV cell) and left out of the means (runs/usage_fields.py).
"""

from __future__ import annotations

import csv
import io
import json
import re
from decimal import Decimal
from types import SimpleNamespace

import pytest
from django.db import connection
from django.urls import reverse

from runs.results.leaderboard import leaderboard_rows
from tasks_app.models import Task
from tests.support.pages_fixtures import (
    make_attempt,
    make_model,
    make_run,
    make_suite,
    write_artifact,
)

pytestmark = pytest.mark.django_db

# Each broken attempt's columns, as SQL literals (1e999 is an infinity in SQLite).
BROKEN = [
    {
        "cost_usd": "1e308",
        "tokens_in": "9223372036854775807",
        "duration_sec": "1e999",
        "steps": "9223372036854775807",
    },
    {
        "cost_usd": "-5000",
        "tokens_in": "1e30",
        "duration_sec": "-1e999",
        "steps": "1e30",
        "tool_calls": "9223372036854775807",
    },
    {"cost_usd": "1e999", "tokens_out": "9223372036854775807", "duration_sec": "1e308"},
    {"cost_usd": "-1e999", "duration_sec": "-5"},
    {"cost_usd": "1e30", "tokens_in": "1e999"},
]
# What must never be shown: the broken values in any notation.
# Not inside a hex word: the pages carry UUIDs, and "...-1e18-..." in one is no number.
SHOWN_NEVER = re.compile(
    r"(?<![0-9a-f-])(?:1e\+?308|1e\+?30\b|inf\b|nan\b|infinity|-5,?000|-\$5|\$-5|9223372036854"
    r"|1000000000000000019884624838656|1e\+?18|9\.22)(?![0-9a-f-])"
)


@pytest.fixture
def broken(alice):
    """Suite "broken" of 6 tasks; model "broken-numbers" has 5 broken attempts and one of
    $0.25, 2,000 + 200 tokens, 4 calls, 30 s; model "sound" has ordinary attempts."""
    suite = make_suite("broken", tasks=6)
    tasks = list(Task.objects.for_suite(suite).order_by("task_id"))
    run = make_run(suite, make_model("broken-numbers"))
    attempts = [make_attempt(run, task, steps=2) for task in tasks[:5]]
    make_attempt(
        run,
        tasks[5],
        cost_usd=Decimal("0.25"),
        tokens_in=2000,
        tokens_out=200,
        steps=4,
        duration_sec=30.0,
    )
    sound = make_run(suite, make_model("sound"))
    for task in tasks:
        make_attempt(sound, task, "TESTS_FAILED", steps=3)
    with connection.cursor() as cursor:
        for attempt, columns in zip(attempts, BROKEN, strict=True):
            # The cost column first held 0.10 and tokens 1000: every broken one is replaced.
            columns = {"cost_usd": "0.1", "tokens_in": "1000"} | columns
            sets = ", ".join(f"{name} = {value}" for name, value in columns.items())
            cursor.execute(f"UPDATE runs_attempt SET {sets} WHERE id = %s", [attempt.pk])
    return SimpleNamespace(suite=suite, run=run, attempts=attempts)


def _body(response) -> str:
    assert response.status_code == 200, response.status_code
    content = b"".join(response.streaming_content) if response.streaming else response.content
    return content.decode()


def _shows_no_broken_value(body: str) -> None:
    found = SHOWN_NEVER.search(body.lower())
    assert found is None, body[max(found.start() - 200, 0) : found.end() + 100]


def test_the_attempts_list_shows_a_broken_value_as_unknown_on_the_page_api_and_exports(
    client, broken
):
    suite = broken.suite
    url = reverse("suite-attempts", args=[suite.name])
    for who in ("anonymous", "alice"):
        if who == "alice":
            client.force_login(_alice())
        page = _body(client.get(url + "?models=broken-numbers"))
        _shows_no_broken_value(page)
        assert "$0.25" in page

        exported = list(csv.DictReader(io.StringIO(_body(client.get(url + "?format=csv")))))
        by_task = {(r["model"], r["task_id"]): r for r in exported}
        first = by_task[("broken-numbers", "task-000")]
        assert (first["cost_usd"], first["tokens_in"], first["steps"]) == ("", "", "")
        assert first["duration_sec"] == ""
        assert by_task[("broken-numbers", "task-005")]["cost_usd"] == "0.25"

        lines = _body(client.get(url + "?format=json")).splitlines()
        items = [json.loads(line.rstrip(",")) for line in lines[1:-1]]
        costs = {i["task_id"]: i["cost_usd"] for i in items if i["model"] == "broken-numbers"}
        assert costs == {f"task-00{i}": None for i in range(5)} | {"task-005": 0.25}

    api = client.get(f"/api/attempts?suite={suite.name}&model=broken-numbers")
    assert api.status_code == 200
    items = {i["task_id"]: i for i in api.json()["items"]}
    assert items["task-000"]["cost_usd"] is None and items["task-000"]["tokens_in"] is None
    assert items["task-001"]["tool_calls"] is None and items["task-002"]["tokens_out"] is None
    assert items["task-002"]["duration_sec"] is None and items["task-005"]["cost_usd"] == 0.25
    _shows_no_broken_value(api.content.decode())


def _alice():
    from django.contrib.auth.models import User

    return User.objects.get(username="alice")


def test_the_results_pages_count_only_valid_values(client, broken):
    suite = broken.suite
    row = {r.name: r for r in leaderboard_rows(suite=suite)}["broken-numbers"]
    # Only the sound attempt's cost counts; tokens of the two whose counts are
    # valid (1000 + 100, 2000 + 200); calls of the four with a valid count.
    assert row.mean_cost_usd == pytest.approx(0.25)
    assert row.total_cost_usd == pytest.approx(0.25)
    assert row.mean_tokens == pytest.approx((1100 + 2200) / 2)
    assert row.mean_calls == pytest.approx((2 + 2 + 2 + 4) / 4)
    assert row.mean_wall_sec == pytest.approx((10.0 + 30.0) / 2)  # the last broken one's is 10
    both = "models=broken-numbers,sound"
    for name, query in (("suite-leaderboard", ""), ("suite-compare", both), ("suite-taxonomy", "")):
        for who in (None, _alice()):
            if who:
                client.force_login(who)
            page = client.get(reverse(name, args=[suite.name]) + "?" + query)
            _shows_no_broken_value(_body(page))
    for path in (
        "leaderboard",
        "leaderboard.csv",
        f"compare?{both}",
        "compare.csv?" + both,
        "taxonomy",
        "taxonomy.csv",
    ):
        sep = "&" if "?" in path else "?"
        _shows_no_broken_value(_body(client.get(f"/api/{path}{sep}suite={suite.name}")))


def test_the_run_attempt_and_admin_pages_show_a_broken_value_as_unknown(client, broken):
    run, attempts = broken.run, broken.attempts
    client.force_login(_alice())
    pages = [
        reverse("run-detail", args=[run.public_id]),
        f"/api/runs/{run.public_id}",
        "/admin/runs/attempt/",
        "/admin/runs/run/",
        *(reverse("attempt-detail", args=[a.public_id]) for a in attempts),
        *(f"/api/attempts/{a.public_id}" for a in attempts),
        *(reverse("admin:runs_attempt_change", args=[a.pk]) for a in attempts),
    ]
    for page in pages:
        body = _body(client.get(page))
        if "/admin/" not in page:  # the admin's forms hold other numbers (ids, sizes)
            _shows_no_broken_value(body)


# A trajectory an older import stored: ``json`` reads Infinity and NaN, which JSON has not.
STORED_ATIF = (
    '{"schema_version": "ATIF-v1.6", "session_id": "s", "agent": {"name": "x", "version": "1"},'
    ' "steps": [{"step_id": 1, "source": "user", "message": "Fix it."},'
    ' {"step_id": 2, "source": "agent", "message": "Done.",'
    '  "metrics": {"prompt_tokens": Infinity, "completion_tokens": NaN, "cost_usd": -Infinity}}],'
    ' "final_metrics": {"total_cost_usd": NaN, "total_prompt_tokens": Infinity}}'
)


def test_a_stored_trajectory_with_infinities_shows_them_as_unknown(
    client,
    broken,
    artifacts_root,
):
    attempt = broken.attempts[0]
    write_artifact(attempt, "trajectory.atif.json", STORED_ATIF.encode())
    client.force_login(_alice())
    page = _body(client.get(reverse("attempt-detail", args=[attempt.public_id])))
    assert "Done." in page
    _shows_no_broken_value(page)
    answer = client.get(f"/api/attempts/{attempt.public_id}/transcript")
    body = _body(answer)
    assert "Infinity" not in body and "NaN" not in body
    shown = json.loads(body)
    assert (shown["cost_usd"], shown["tokens_in"]) == (None, None)
    assert [t["tokens_in"] for t in shown["turns"]] == [None, None]
    exported = _body(client.get(reverse("attempt-atif", args=[attempt.public_id])))
    assert "Infinity" not in exported and "NaN" not in exported
