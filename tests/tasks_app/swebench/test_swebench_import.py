"""Importing SWE-bench dataset files: every field kept, idempotent, atomic, line-exact errors."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.core.management import call_command

from runs.models import Attempt, ModelConfig, Run
from tasks_app.models import Suite, Task, TaskRevision
from tasks_app.swebench.errors import SwebenchInputError
from tasks_app.swebench.importer import swebench_import
from tests.support.ab_cli import ab
from tests.support.swebench_fixtures import LITE_DEV, SHARED_SWEBENCH, VERIFIED, rows, write_jsonl

pytestmark = pytest.mark.django_db


def test_it_imports_the_lite_dev_split_keeping_every_field():
    report = swebench_import(source=LITE_DEV, suite_name="lite-dev", dataset_version="lite-dev")

    assert len(report.created) == 23 and not report.updated and not report.unchanged
    suite = Suite.objects.get(name="lite-dev")
    assert suite.source == "swebench"
    task = Task.objects.get(suite=suite, task_id="sqlfluff__sqlfluff-1625")
    row = next(r for r in rows(LITE_DEV) if r["instance_id"] == "sqlfluff__sqlfluff-1625")
    assert task.spec == row
    assert task.source == "swebench"
    assert task.docker_image == "swebench/sweb.eval.x86_64.sqlfluff_1776_sqlfluff-1625:latest"
    assert task.workdir == "/testbed"
    assert task.repo_url == "https://github.com/sqlfluff/sqlfluff"
    assert task.repo_commit == row["base_commit"]
    assert task.environment_setup_commit == row["environment_setup_commit"]
    assert task.instance_version == "0.6"
    assert task.gold_patch == row["patch"] and task.test_patch == row["test_patch"]
    assert task.problem_statement == row["problem_statement"]
    assert task.hints_text == row["hints_text"]
    assert task.fail_to_pass == json.loads(row["FAIL_TO_PASS"])
    assert len(task.pass_to_pass) == 64
    assert task.test_command.endswith("pytest -rA test/cli/commands_test.py")
    assert task.dataset_version == "lite-dev"
    assert task.revision == 1
    assert TaskRevision.objects.filter(task__suite=suite).count() == 23
    assert Task.objects.for_suite(suite).with_label("sqlfluff").count() == 5


def test_it_keeps_the_difficulty_of_verified_instances():
    swebench_import(source=VERIFIED, suite_name="verified-sample")
    django = Task.objects.get(task_id="django__django-10097")
    assert django.difficulty == "<15 min fix"
    # Its test patch touches only .txt data files: like the harness, run the whole suite.
    assert django.test_command.endswith(
        "; ./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1"
    )
    astropy = Task.objects.get(task_id="astropy__astropy-13398")
    assert astropy.difficulty == "1-4 hours"
    assert django.docker_image == "swebench/sweb.eval.x86_64.django_1776_django-10097:latest"


def test_a_second_import_of_the_same_file_changes_nothing():
    swebench_import(source=LITE_DEV, suite_name="lite-dev")
    before = list(Task.objects.values_list("id", "revision", "updated_at", "spec_hash"))

    report = swebench_import(source=LITE_DEV, suite_name="lite-dev")

    assert len(report.unchanged) == 23 and not report.created and not report.updated
    assert list(Task.objects.values_list("id", "revision", "updated_at", "spec_hash")) == before
    assert TaskRevision.objects.count() == 23


def test_a_changed_instance_updates_its_task_and_its_old_attempts_stay_marked_stale(tmp_path):
    swebench_import(source=LITE_DEV, suite_name="lite-dev", dataset_version="v1")
    task = Task.objects.get(task_id="pydicom__pydicom-901")
    model = ModelConfig.objects.create(name="ext", agent_variant="external")
    run = Run.objects.create(suite=task.suite, model_config=model)
    attempt = Attempt.objects.create(
        run=run, task=task, suite=task.suite, model_config=model, task_revision=task.revision
    )
    changed = rows(LITE_DEV)
    target = next(r for r in changed if r["instance_id"] == "pydicom__pydicom-901")
    # What later dataset copies did: drop a flaky test from a list.
    f2p = json.loads(target["FAIL_TO_PASS"])
    target["FAIL_TO_PASS"] = json.dumps(f2p[:-1])
    path = write_jsonl(tmp_path / "lite_v2.jsonl", changed)

    report = swebench_import(source=path, suite_name="lite-dev", dataset_version="v2")

    assert report.updated == ["pydicom__pydicom-901"]
    assert len(report.unchanged) == 22
    task.refresh_from_db()
    assert task.revision == 2 and task.fail_to_pass == f2p[:-1]
    assert task.dataset_version == "v2"
    revision = TaskRevision.objects.get(task=task, revision=2)
    assert revision.changed_fields == ["fail_to_pass", "spec"]
    assert revision.previous_values["fail_to_pass"] == f2p
    assert revision.dataset_version == "v2" and revision.source_file == "lite_v2.jsonl"
    attempt.refresh_from_db()
    assert attempt.task_revision == 1 and attempt.is_stale_revision


def test_a_bad_row_names_its_line_and_field_and_nothing_is_imported(tmp_path):
    items = rows(LITE_DEV)
    items[2]["FAIL_TO_PASS"] = json.dumps([1, 2])
    items[5]["version"] = 3.0
    del items[7]["base_commit"]
    path = write_jsonl(tmp_path / "bad.jsonl", items)
    with path.open("a") as f:
        f.write("{not json\n")

    with pytest.raises(SwebenchInputError) as caught:
        swebench_import(source=path, suite_name="lite-dev")

    problems = [str(p) for p in caught.value.problems]
    assert problems == [
        "line 24: invalid JSON (Expecting property name enclosed in double quotes at column 2)"
    ]
    # Once the JSON reads, every field problem is listed, each with its line.
    path = write_jsonl(tmp_path / "bad.jsonl", items)
    with pytest.raises(SwebenchInputError) as caught:
        swebench_import(source=path, suite_name="lite-dev")
    problems = [str(p) for p in caught.value.problems]
    assert "line 3, field FAIL_TO_PASS: item 0 must be a string, got a number" in problems
    assert "line 6, field version: must be a string, got a number" in problems
    assert "line 8, field base_commit: missing" in problems
    assert Suite.objects.count() == 0 and Task.objects.count() == 0


def test_a_bad_row_does_not_touch_an_existing_suite(tmp_path):
    swebench_import(source=LITE_DEV, suite_name="lite-dev")
    before = list(Task.objects.values_list("id", "spec_hash"))
    items = rows(LITE_DEV)
    items[0]["problem_statement"] = "changed"
    items[1]["PASS_TO_PASS"] = '"not a list"'
    path = write_jsonl(tmp_path / "half.jsonl", items)

    with pytest.raises(SwebenchInputError, match="line 2, field PASS_TO_PASS"):
        swebench_import(source=path, suite_name="lite-dev")

    assert list(Task.objects.values_list("id", "spec_hash")) == before


def test_a_json_list_error_names_the_index(tmp_path):
    items = rows(VERIFIED)
    items[4]["repo"] = None
    path = tmp_path / "verified.json"
    path.write_text(json.dumps(items))
    with pytest.raises(SwebenchInputError) as caught:
        swebench_import(source=path, suite_name="verified")
    assert [str(p) for p in caught.value.problems] == ["index 4, field repo: missing"]


def test_it_reads_parquet_and_names_the_row_of_a_bad_value(tmp_path):
    items = rows(VERIFIED)
    path = tmp_path / "verified.parquet"
    pq.write_table(pa.Table.from_pylist(items), path)

    report = swebench_import(source=path, suite_name="verified")
    assert len(report.created) == 6
    assert Task.objects.get(task_id="psf__requests-1142").fail_to_pass == [
        "test_requests.py::RequestsTestCase::test_no_content_length"
    ]

    items[3]["PASS_TO_PASS"] = "[oops"
    pq.write_table(pa.Table.from_pylist(items), path)
    with pytest.raises(SwebenchInputError, match=r"row 4, field PASS_TO_PASS: is not valid JSON"):
        swebench_import(source=path.read_bytes(), filename="upload.parquet", suite_name="verified")


def test_a_duplicate_instance_is_an_error(tmp_path):
    items = rows(VERIFIED)
    path = write_jsonl(tmp_path / "dup.jsonl", [*items, items[0]])
    with pytest.raises(SwebenchInputError, match="line 7, field instance_id: duplicate of line 1"):
        swebench_import(source=path, suite_name="verified")


def test_an_image_template_or_a_row_image_overrides_the_published_image(tmp_path):
    items = rows(VERIFIED)[:2]
    items[1]["image_name"] = "local/requests:dev"
    path = write_jsonl(tmp_path / "two.jsonl", items)
    swebench_import(source=path, suite_name="two", image_template="mirror/{key}:v1")
    images = dict(Task.objects.values_list("task_id", "docker_image"))
    assert images == {
        "psf__requests-1142": "mirror/psf_1776_requests-1142:v1",
        "psf__requests-1724": "local/requests:dev",
    }


def test_the_setup_demo_command_imports_the_sample_once():
    call_command("import_swebench_sample")
    call_command("import_swebench_sample")
    suite = Suite.objects.get(name="swebench-lite-dev")
    assert suite.tasks.count() == 23
    assert TaskRevision.objects.filter(task__suite=suite).count() == 23


def test_the_suite_page_lists_the_imported_instances(client):
    call_command("import_swebench_sample")
    response = client.get("/suites/swebench-lite-dev/")
    assert response.status_code == 200
    body = response.content.decode()
    assert "pvlib__pvlib-python-1707" in body and "pydicom__pydicom-901" in body
    page = client.get("/suites/swebench-lite-dev/tasks/pydicom__pydicom-901/")
    assert page.status_code == 200


def test_the_shared_reference_copy_matches_the_shipped_sample():
    # The examples are a copy of the shared reference data; when it is here, they agree.
    if SHARED_SWEBENCH.exists():
        assert (SHARED_SWEBENCH / "lite_dev.jsonl").read_bytes() == LITE_DEV.read_bytes()
    assert len(rows(LITE_DEV)) == 23


@pytest.mark.slow
def test_ab_import_swebench_reports_and_fails_with_lines(tmp_path):
    out = ab("import-swebench", str(LITE_DEV), "--suite", "lite-dev", var_dir=tmp_path / "var")
    assert out.returncode == 0, out.stderr
    assert "created 23, updated 0, unchanged 0, errors 0" in out.stdout
    again = ab("import-swebench", str(LITE_DEV), "--suite", "lite-dev", var_dir=tmp_path / "var")
    assert "created 0, updated 0, unchanged 23" in again.stdout

    bad = tmp_path / "bad.jsonl"
    bad.write_text(LITE_DEV.read_text().replace('"version": "0.6"', '"version": 6', 1))
    out = ab("import-swebench", str(bad), "--suite", "lite-dev", var_dir=tmp_path / "var")
    assert out.returncode == 1
    assert "bad.jsonl: line 1, field version: must be a string, got a number" in out.stdout
    assert "nothing imported" in out.stderr
