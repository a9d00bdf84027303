"""Imported patches nobody asked to evaluate: status not_evaluated, outside every queue, shown
on the run page and the leaderboard, and queued only by an explicit evaluate (service, API,
CLI, admin)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from runs.imports.predictions import predictions_import
from runs.models import Attempt, AttemptStatus, Run, RunStatus
from runs.services import run_evaluate
from runs.workers.bookkeeping import attempts_reap
from tasks_app.swebench.importer import swebench_import
from tests.support.ab_cli import ab
from tests.support.swebench_fixtures import LITE_DEV, rows

LITE = rows(LITE_DEV)
IDS = [r["instance_id"] for r in LITE]


def write_predictions(path, count: int):
    path.write_text(
        "".join(
            json.dumps({"instance_id": r["instance_id"], "model_patch": r["patch"]}) + "\n"
            for r in LITE[:count]
        )
    )
    return path


@pytest.fixture
def waiting_run(db, tmp_path) -> Run:
    swebench_import(source=LITE_DEV, suite_name="lite-dev")
    report = predictions_import(
        source=write_predictions(tmp_path / "p.jsonl", 7), suite_name="lite-dev", model_name="m"
    )
    return Run.objects.get(public_id=report.run_id)


def test_no_worker_or_reaper_picks_them_up(waiting_run, broker):
    assert waiting_run.attempts.filter(status=AttemptStatus.NOT_EVALUATED).count() == 7
    assert broker.attempt_ids() == []
    # Long past the reaper's patience: a queued attempt of an active run would be re-sent.
    Attempt.objects.filter(run=waiting_run).update(queued_at=timezone.now() - timedelta(hours=1))
    report = attempts_reap(stale_after_sec=60)
    assert report.resent == [] and report.requeued == []
    assert broker.attempt_ids() == []
    assert waiting_run.attempts.filter(status=AttemptStatus.NOT_EVALUATED).count() == 7
    waiting_run.refresh_from_db()
    # Neither final nor failed: no reason, and not counted among final attempts.
    assert not Attempt.objects.filter(status="not_evaluated", failure_reason__isnull=False)
    assert waiting_run.totals["final"] == len(IDS) - 7
    assert waiting_run.totals["not_evaluated"] == 7
    assert all(not a.is_final for a in waiting_run.attempts.filter(status="not_evaluated"))


def test_the_run_page_and_the_leaderboard_say_how_many_wait(waiting_run, client, auth):
    page = client.get(waiting_run.get_absolute_url())
    assert page.status_code == 200
    assert "7 not evaluated" in page.content.decode()
    board = client.get("/suites/lite-dev/leaderboard/")
    assert "7 not evaluated" in board.content.decode()
    api = client.get("/api/leaderboard?suite=lite-dev", **auth).json()
    (row,) = api["rows"]
    assert row["not_evaluated"] == 7
    # Unrated: the 16 instances with no prediction are the only outcomes, and they are no
    # attempts: never attempted.
    assert row["scored"] == 0 and row["missing_attempts"] == len(IDS) - 7


def test_evaluate_queues_them_for_the_workers(
    waiting_run, broker, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        count = run_evaluate(run=waiting_run, by="alice")
    assert count == 7
    waiting = sorted(waiting_run.attempts.filter(status="queued").values_list("id", flat=True))
    assert len(waiting) == 7 and sorted(broker.attempt_ids()) == waiting
    waiting_run.refresh_from_db()
    assert waiting_run.status == RunStatus.QUEUED and waiting_run.finished_at is None
    assert "evaluation asked by alice" in waiting_run.notes
    # Asked twice: nothing left to queue.
    assert run_evaluate(run=waiting_run) == 0


def test_the_api_evaluates_a_run(waiting_run, client, staff_auth, broker, settings):
    response = client.post(f"/api/runs/{waiting_run.public_id}/evaluate", **staff_auth)
    assert response.status_code == 200, response.content
    assert response.json()["affected"] == 7
    assert waiting_run.attempts.filter(status="queued").count() == 7


@pytest.mark.slow
def test_ab_import_predictions_then_evaluate_run(tmp_path):
    var = tmp_path / "var"
    assert ab("import-swebench", str(LITE_DEV), "--suite", "lite", var_dir=var).returncode == 0
    preds = write_predictions(tmp_path / "p.jsonl", 3)
    out = ab("import-predictions", str(preds), "--suite", "lite", "--model", "m", var_dir=var)
    assert out.returncode == 0, out.stderr
    assert "3 not evaluated" in out.stdout
    run_id = out.stdout.split("run ", 1)[1].split(":", 1)[0]
    evaluated = ab("evaluate-run", run_id, var_dir=var)
    assert evaluated.returncode == 0, evaluated.stderr
    assert "3 not-evaluated attempt(s) queued" in evaluated.stdout
    again = ab("evaluate-run", run_id, var_dir=var)
    assert "0 not-evaluated attempt(s) queued" in again.stdout


def test_the_admin_keeps_unticked_predictions_waiting_and_its_action_queues_them(
    client, alice, tmp_path, broker, django_capture_on_commit_callbacks
):
    swebench_import(source=LITE_DEV, suite_name="lite-dev")
    client.force_login(alice)
    preds = write_predictions(tmp_path / "p.jsonl", 2)
    with preds.open("rb") as handle:
        body = client.post(
            "/admin/swebench/predictions/",
            {"file": handle, "suite": "lite-dev", "model": "m"},  # "Evaluate now" unticked
        ).content.decode()
    assert '<td class="count-queued">0</td>' in body
    assert '<td class="count-not-evaluated">2</td>' in body
    run = Run.objects.get()
    assert broker.attempt_ids() == []

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            "/admin/runs/run/", {"action": "evaluate_runs", "_selected_action": [run.pk]}
        )
    assert response.status_code == 302
    assert run.attempts.filter(status="queued").count() == 2
    assert sorted(broker.attempt_ids()) == sorted(
        run.attempts.filter(status="queued").values_list("id", flat=True)
    )


def test_the_run_pages_evaluate_button_is_for_staff(
    waiting_run, client, alice, bob, broker, django_capture_on_commit_callbacks
):
    url = f"/runs/{waiting_run.public_id}/evaluate/"
    client.force_login(bob)
    assert client.post(url).status_code == 403
    assert waiting_run.attempts.filter(status="queued").count() == 0
    assert f'action="{url}"' not in client.get(waiting_run.get_absolute_url()).content.decode()

    client.force_login(alice)
    assert f'action="{url}"' in client.get(waiting_run.get_absolute_url()).content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url, follow=True)
    assert "7 not-evaluated attempt(s) queued." in response.content.decode()
    assert len(broker.attempt_ids()) == 7
