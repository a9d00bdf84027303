"""SWE-bench datasets, predictions and published results uploaded through the API."""

from __future__ import annotations

import io
import json

import pytest

from benchsite.accounts.models import Action, AuditEvent
from runs.models import Run, RunSource
from runs.results.leaderboard import leaderboard_rows
from tasks_app.models import Suite
from tests.support.swebench_fixtures import LITE_DEV, rows

pytestmark = pytest.mark.django_db

LITE_IDS = [r["instance_id"] for r in rows(LITE_DEV)]


def upload(name: str, content: bytes) -> io.BytesIO:
    buffer = io.BytesIO(content)
    buffer.name = name
    return buffer


@pytest.fixture
def lite(client, staff_auth):
    response = client.post(
        "/api/imports/swebench",
        {"suite": "lite-dev", "file": upload("lite_dev.jsonl", LITE_DEV.read_bytes())},
        **staff_auth,
    )
    assert response.status_code == 200, response.content
    return response.json()


def test_it_imports_a_swebench_dataset_and_audits_it(lite, alice):
    assert sorted(lite["created"]) == sorted(LITE_IDS)
    assert Suite.objects.get(name="lite-dev").tasks.count() == len(LITE_IDS)
    (event,) = AuditEvent.objects.filter(action=Action.SWEBENCH_IMPORT)
    assert event.actor == alice and len(event.object_ids) == len(LITE_IDS)


def test_a_bad_dataset_row_names_line_and_field_and_stores_nothing(client, staff_auth):
    bad = LITE_DEV.read_bytes().replace(b'"base_commit": "', b'"base_commit": 7, "x": "', 1)
    response = client.post(
        "/api/imports/swebench", {"suite": "s", "file": upload("lite.jsonl", bad)}, **staff_auth
    )
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert {"field": "base_commit", "location": "line 1"}.items() <= errors[0].items()
    assert not Suite.objects.filter(name="s").exists()
    bad_name = client.post(
        "/api/imports/swebench",
        {"suite": "no spaces", "file": upload("l.jsonl", LITE_DEV.read_bytes())},
        **staff_auth,
    )
    assert bad_name.status_code == 422
    assert bad_name.json()["errors"][0]["field"] == "suite"


def test_it_imports_predictions_as_a_run_to_evaluate(client, lite, staff_auth, alice):
    predictions = [
        {"instance_id": LITE_IDS[0], "model_patch": "diff --git a/x b/x\n"},
        {"instance_id": LITE_IDS[1], "model_patch": ""},
    ]
    content = "".join(json.dumps(p) + "\n" for p in predictions).encode()
    response = client.post(
        "/api/imports/predictions",
        {"suite": "lite-dev", "model": "m", "enqueue": "false", "file": upload("p.jsonl", content)},
        **staff_auth,
    )
    assert response.status_code == 200, response.content
    body = response.json()
    run = Run.objects.get(public_id=body["run"])
    assert run.source == RunSource.PREDICTIONS and run.created_by == alice
    # enqueue false: the patch waits as not evaluated, outside every queue.
    assert (body["queued"], body["not_evaluated"]) == (0, 1)
    assert body["empty_patch"] == [LITE_IDS[1]]
    assert len(body["no_prediction"]) == len(LITE_IDS) - 2
    (event,) = AuditEvent.objects.filter(action=Action.PREDICTIONS_IMPORT)
    assert event.object_ids == [body["run"]]
    unknown = client.post(
        "/api/imports/predictions",
        {"suite": "nope", "model": "m", "file": upload("p.jsonl", content)},
        **staff_auth,
    )
    assert unknown.status_code == 400
    assert unknown.json()["errors"][0]["field"] == "suite"


def test_published_results_reach_the_leaderboard_with_the_same_figures(client, lite, staff_auth):
    report = {
        "resolved_ids": LITE_IDS[:5],
        "unresolved_ids": LITE_IDS[5:12],
        "submitted_ids": LITE_IDS[:12],
        "schema_version": 2,
    }
    response = client.post(
        "/api/imports/results",
        {
            "suite": "lite-dev",
            "model": "Agent X",
            "file": upload("agentx.run1.json", json.dumps(report).encode()),
        },
        **staff_auth,
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["resolved"], body["suite_size"]) == (5, len(LITE_IDS))
    assert AuditEvent.objects.filter(action=Action.RESULTS_IMPORT).count() == 1
    (row,) = leaderboard_rows(suite=Suite.objects.get(name="lite-dev"))
    (api_row,) = client.get("/api/leaderboard", {"suite": "lite-dev"}).json()["rows"]
    assert api_row["is_published"] is row.is_published is True
    assert (api_row["resolved"], api_row["denominator"]) == (row.resolved, row.denominator)
    assert api_row["rate"] == pytest.approx(row.rate) == pytest.approx(5 / len(LITE_IDS))
    again = client.post(
        "/api/imports/results",
        {
            "suite": "lite-dev",
            "model": "Agent X",
            "file": upload("agentx.run1.json", json.dumps(report).encode()),
        },
        **staff_auth,
    )
    assert again.json()["unchanged"] is True
    alike = client.post(
        "/api/imports/results",
        {
            "suite": "lite-dev",
            "model": "agent x",
            "file": upload("agentx.run1.json", json.dumps(report).encode()),
        },
        **staff_auth,
    )
    assert alike.status_code == 400
    assert alike.json()["errors"][0]["field"] == "model"


def test_imports_need_a_token(client, db):
    for path in ("/api/imports/swebench", "/api/imports/predictions", "/api/imports/results"):
        response = client.post(path, {"suite": "x", "model": "m", "file": upload("a.jsonl", b"")})
        assert response.status_code == 401


def test_it_imports_a_run_folder_archive_with_its_plan(client, staff_auth, settings, tmp_path):
    from tests.runs.imports.test_run_import import MINI
    from tests.tasks_app.swebench.test_swebench_admin import zip_of

    settings.API_UPLOADS_ROOT = tmp_path / "uploads"
    settings.ARTIFACTS_ROOT = tmp_path / "artifacts"
    settings.STORAGES = settings.STORAGES | {
        "artifacts": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path / "artifacts")},
        }
    }
    content = zip_of(MINI)
    form = {"suite": "verified-mini", "model": "mini-swe-agent"}
    dry = client.post(
        "/api/imports/run",
        {**form, "dry_run": "true", "file": upload("run.zip", content)},
        **staff_auth,
    )
    assert dry.status_code == 200, dry.content
    assert dry.json()["run"] == "" and not Run.objects.exists()
    assert "20 with a trajectory" in dry.json()["plan"][0]

    response = client.post(
        "/api/imports/run", {**form, "file": upload("run.zip", content)}, **staff_auth
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["resolved"], body["suite_size"], body["added"]) == (11, 20, 20)
    assert body["plan"][0].startswith("run.zip: 20 instance(s)")
    run = Run.objects.get(public_id=body["run"])
    (row,) = leaderboard_rows(suite=run.suite)
    assert (row.resolved, row.denominator) == (11, 20)
    (event,) = AuditEvent.objects.filter(action="run.import")
    assert event.object_ids == [body["run"]]

    again = client.post(
        "/api/imports/run", {**form, "file": upload("run.zip", content)}, **staff_auth
    )
    assert (again.json()["added"], again.json()["unchanged"]) == (0, 20)

    bad = client.post(
        "/api/imports/run", {**form, "file": upload("notes.json", b'{"a": [1, 2,]}')}, **staff_auth
    )
    assert bad.status_code == 400
    assert "notes.json" in bad.content.decode() and "trailing comma" in bad.content.decode()
