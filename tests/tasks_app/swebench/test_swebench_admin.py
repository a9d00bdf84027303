"""The admin upload pages for SWE-bench datasets, predictions and published results."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from runs.models import Run
from tasks_app.models import Suite, Task
from tasks_app.swebench.importer import swebench_import
from tests.support.swebench_fixtures import LITE_DEV, REPORTS, VERIFIED, rows

pytestmark = pytest.mark.django_db


def upload(path, name: str | None = None) -> SimpleUploadedFile:
    return SimpleUploadedFile(name or path.name, path.read_bytes())


def test_only_staff_reach_the_upload_pages(client, bob):
    for url in ("/admin/swebench/dataset/", "/admin/swebench/results/"):
        assert client.get(url).status_code == 302  # anonymous: to the admin login
    client.force_login(bob)
    response = client.get("/admin/swebench/dataset/")
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
    response = client.post("/admin/swebench/dataset/", {"file": upload(LITE_DEV), "suite": "lite"})
    assert response.status_code == 302 and not Suite.objects.exists()


def test_a_dataset_upload_shows_its_report_and_a_second_one_is_unchanged(client, alice):
    client.force_login(alice)
    response = client.post(
        "/admin/swebench/dataset/",
        {"file": upload(LITE_DEV), "suite": "lite-dev", "dataset_version": "dev-1"},
    )
    assert response.status_code == 200
    body = response.content.decode()
    assert '<td class="count-created">23</td>' in body
    assert Task.objects.filter(suite__name="lite-dev", dataset_version="dev-1").count() == 23

    again = client.post(
        "/admin/swebench/dataset/", {"file": upload(LITE_DEV), "suite": "lite-dev"}
    ).content.decode()
    assert '<td class="count-unchanged">23</td>' in again
    assert '<td class="count-created">0</td>' in again


def test_a_bad_dataset_upload_lists_its_problems_escaped_and_stores_nothing(
    client, alice, tmp_path
):
    client.force_login(alice)
    items = rows(VERIFIED)
    items[1]["instance_id"] = "<script>alert(1)</script>"
    items[2]["FAIL_TO_PASS"] = ["already", "a list"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(json.dumps(i) + "\n" for i in items))

    body = client.post(
        "/admin/swebench/dataset/", {"file": upload(bad), "suite": "verified"}
    ).content.decode()

    assert "Nothing was imported: fix 2 problems" in body
    assert "bad.jsonl: line 2, field instance_id: must look like owner__name-NUMBER" in body
    assert "line 3, field FAIL_TO_PASS: must be a string, got a list" in body
    assert "got &#x27;&lt;script&gt;alert(1)&lt;/script&gt;&#x27;" in body
    assert "<script>alert(1)</script>" not in body
    assert not Suite.objects.exists()


def test_a_results_upload_creates_the_published_run(client, alice, tmp_path):
    swebench_import(source=VERIFIED, suite_name="verified")
    client.force_login(alice)
    wrapped = {
        path.name.removesuffix(".report.json"): json.loads(path.read_text())
        for path in REPORTS.glob("*.report.json")
    }
    report_file = tmp_path / "report.json"
    report_file.write_text(json.dumps(wrapped))

    body = client.post(
        "/admin/swebench/results/",
        {"file": upload(report_file), "suite": "verified", "model": "mini-swe-agent"},
    ).content.decode()

    run = Run.objects.get(source="published")
    assert run.created_by == alice
    assert f"/runs/{run.public_id}/" in body
    assert '<td class="count-resolved">3</td>' in body
    assert "3/6 resolved (50.0%)" in body


def test_a_predictions_upload_reports_empty_and_missing_instances(client, alice, tmp_path):
    swebench_import(source=LITE_DEV, suite_name="lite")
    client.force_login(alice)
    preds = tmp_path / "preds.json"
    first = rows(LITE_DEV)[0]
    preds.write_text(
        json.dumps({first["instance_id"]: {"model_patch": "", "model_name_or_path": "x"}})
    )

    body = client.post(
        "/admin/swebench/predictions/",
        {"file": upload(preds), "suite": "lite", "model": "x"},
    ).content.decode()

    assert '<td class="count-empty">1</td>' in body
    assert '<td class="count-missing">22</td>' in body
    assert Run.objects.get(source="predictions").attempts.count() == 23


def test_the_suite_changelist_links_the_upload_pages(client, alice):
    client.force_login(alice)
    body = client.get("/admin/tasks_app/suite/").content.decode()
    assert 'href="/admin/swebench/dataset/"' in body
    assert 'href="/admin/swebench/results/"' in body


def zip_of(folder) -> bytes:
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(folder).as_posix())
    return buffer.getvalue()


def test_a_run_folder_upload_shows_the_plan_and_its_run(client, alice, settings, tmp_path):
    from tests.runs.imports.test_run_import import MINI

    settings.API_UPLOADS_ROOT = tmp_path / "uploads"
    settings.STORAGES = settings.STORAGES | {
        "artifacts": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path / "artifacts")},
        }
    }
    settings.ARTIFACTS_ROOT = tmp_path / "artifacts"
    client.force_login(alice)
    body = client.post(
        "/admin/swebench/run/",
        {
            "file": SimpleUploadedFile("mini.zip", zip_of(MINI)),
            "suite": "verified-mini",
            "model": "mini <b>agent</b>",
        },
    ).content.decode()
    assert "20 instance(s), 20 with a trajectory, 20 with a report" in body
    assert "11/20 resolved" in body
    assert "mini &lt;b&gt;agent&lt;/b&gt;" in body and "<b>agent</b>" not in body
    assert Run.objects.get().config_snapshot["kind"] == "run_folder"
    # The unpacked upload is gone: what is kept was copied into the artifacts.
    assert not any((tmp_path / "uploads" / "runs").iterdir())
