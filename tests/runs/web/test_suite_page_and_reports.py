"""The suite page of a Verified-sized suite, the skip link, and a report-only import's attempt
page (issue 29, item 10)."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from runs.models import Attempt
from tasks_app.models import Task
from tests.support.pages_fixtures import make_suite
from tests.support.partial_fixtures import PARTIAL, PARTIAL_IDS, run_of

pytestmark = pytest.mark.django_db


def task_links(body: str) -> list[str]:
    table = body.split('id="tasks"', 1)[1].split("</table>", 1)[0]
    return re.findall(r'href="/suites/[^/]+/tasks/([^/]+)/"', table)


def test_the_suite_page_lists_its_tasks_a_page_at_a_time_and_finds_one(client):
    make_suite("big", tasks=120)
    body = client.get(reverse("suite-detail", args=["big"])).content.decode()
    assert task_links(body) == [f"task-{i:03d}" for i in range(50)]
    assert "page 1 of 3" in body
    third = client.get(reverse("suite-detail", args=["big"]) + "?page=3").content.decode()
    assert task_links(third) == [f"task-{i:03d}" for i in range(100, 120)]
    found = client.get(reverse("suite-detail", args=["big"]), {"q": "task-07"}).content.decode()
    assert task_links(found) == [f"task-{i:03d}" for i in range(70, 80)]
    assert "10 of 120 tasks match" in found
    none = client.get(reverse("suite-detail", args=["big"]), {"q": "<b>x"}).content.decode()
    assert task_links(none) == [] and "&lt;b&gt;x" in none and "<b>x" not in none


def test_the_first_tab_stop_skips_to_the_content(client):
    make_suite("small", tasks=1)
    body = client.get(reverse("suite-detail", args=["small"])).content.decode()
    first_link = re.search(r"<a [^>]*>", body.split("<body>", 1)[1]).group(0)
    assert 'class="skip-link"' in first_link and 'href="#main"' in first_link
    assert '<main id="main"' in body


def test_a_report_only_attempt_says_its_patch_was_not_shipped(client, alice, partial_suite):
    client.force_login(alice)
    attempt = Attempt.objects.get(run=run_of(PARTIAL), task__task_id=PARTIAL_IDS[0])
    assert attempt.final_patch == ""
    body = client.get(attempt.get_absolute_url()).content.decode()
    assert 'id="patch-not-shipped"' in body
    assert "No patch.</p>" not in body.split("Agent's final patch", 1)[1].split("</div>", 1)[0]
    # A task with no attempt at all shows nothing of the kind.
    task = Task.objects.filter(suite=partial_suite).order_by("task_id").first()
    assert (
        'id="patch-not-shipped"'
        not in client.get(
            reverse("task-detail", args=[partial_suite.name, task.task_id])
        ).content.decode()
    )


def test_provenance_reads_right_for_a_given_date_and_an_unknown_one(client, alice, partial_suite):
    from tests.support.partial_fixtures import SAMPLE

    client.force_login(alice)
    given = run_of(SAMPLE)
    body = client.get(reverse("run-detail", args=[given.public_id])).content.decode()
    assert "(from --date, given on import)" in body and "(from given on" not in body
    undated = run_of(PARTIAL)
    assert not undated.date_known
    attempt = undated.attempts.exclude(status="missing").first()
    page = client.get(attempt.get_absolute_url()).content.decode()
    finished = page.split("<dt>Finished</dt>", 1)[1].split("</dd>", 1)[0]
    assert "unknown" in finished and "its source gives no date" in finished


def test_an_imported_systems_page_shows_its_model_and_what_it_did(client, partial_suite):
    from runs.models import ModelConfig
    from tests.support.partial_fixtures import FULL

    config = ModelConfig.objects.get(name=FULL)
    # The trajectories of the real mini-swe-agent run name their model.
    assert config.model_name not in ("", FULL)
    body = client.get(reverse("model-config-detail", args=[config.slug])).content.decode()
    facts = body.split('id="config-facts"', 1)[1].split("</dl>", 1)[0]
    assert config.model_name in facts and "as its trajectories name it" in facts
    assert "<dt>Budgets</dt>" not in facts and "30 steps" not in facts
    most = max(a.steps or 0 for a in Attempt.objects.filter(model_config=config))
    assert f"at most {most} model calls" in facts


def test_each_imported_attempt_keeps_its_trajectorys_time(partial_suite):
    from tests.support.partial_fixtures import FULL

    run = run_of(FULL)
    times = set(
        run.attempts.filter(status="finished")
        .exclude(finished_at=None)
        .values_list("finished_at", flat=True)
    )
    assert len(times) > 1  # not the import's (or the run's last) time for every attempt
    assert max(times) <= run.finished_at


def test_a_date_filter_on_the_leaderboard_says_it_left_undated_runs_out(client, partial_suite):
    url = reverse("suite-leaderboard", args=[partial_suite.name])
    window = {"date_from": "2025-11-01", "date_to": "2025-11-30"}
    body = client.get(url, window).content.decode()
    notice = body.split('id="undated-left-out"', 1)[1].split("</p>", 1)[0]
    assert "1 imported run of unknown date is left out by the date filter" in notice
    assert "include_undated=1" in notice and "date_from=2025-11-01" in notice
    assert 'id="undated-left-out"' not in client.get(url).content.decode()
    included = client.get(url, window | {"include_undated": "1"}).content.decode()
    assert 'id="undated-left-out"' not in included
