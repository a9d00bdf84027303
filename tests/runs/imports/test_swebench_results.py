"""Importing published results: run reports, report.json folders, missing instances, re-imports."""

from __future__ import annotations

import csv
import io
import json
import shutil
import zipfile

import pytest

from runs.imports.results import results_import
from runs.models import Attempt, ModelConfig, Run
from tasks_app.models import Suite
from tasks_app.swebench.errors import SwebenchInputError
from tasks_app.swebench.importer import swebench_import
from tests.support.ab_cli import ab
from tests.support.swebench_fixtures import LITE_DEV, REPORTS, VERIFIED, rows

pytestmark = pytest.mark.django_db

LITE_IDS = [r["instance_id"] for r in rows(LITE_DEV)]


@pytest.fixture
def lite(db):
    swebench_import(source=LITE_DEV, suite_name="lite-dev")
    return "lite-dev"


@pytest.fixture
def verified(db):
    swebench_import(source=VERIFIED, suite_name="verified-sample")
    return "verified-sample"


def run_report(tmp_path, **lists) -> object:
    data = {
        "total_instances": 23,
        "submitted_instances": 20,
        "schema_version": 2,
        "submitted_ids": sorted({i for ids in lists.values() for i in ids}),
        "completed_ids": [],
        "incomplete_ids": [],
        "empty_patch_ids": [],
        "resolved_ids": [],
        "unresolved_ids": [],
        "error_ids": [],
    } | lists
    path = tmp_path / "mymodel.run1.json"
    path.write_text(json.dumps(data))
    return path


def by_task(run: Run) -> dict[str, Attempt]:
    return {a.task.task_id: a for a in run.attempts.select_related("task")}


def test_a_run_report_becomes_one_finished_attempt_per_suite_instance(lite, tmp_path):
    path = run_report(
        tmp_path,
        resolved_ids=LITE_IDS[:5],
        unresolved_ids=LITE_IDS[5:12],
        empty_patch_ids=LITE_IDS[12:14],
        error_ids=LITE_IDS[14:16],
        infra_failure_ids=LITE_IDS[16:17],
    )

    report = results_import(source=path, suite_name=lite, model_name="SWE-agent + X")

    run = Run.objects.get(public_id=report.run_id)
    assert run.source == "published" and run.status == "finished"
    assert run.model_config.agent_variant == "external"
    attempts = by_task(run)
    assert len(attempts) == 23
    missing = [a for a in attempts.values() if a.status == "missing"]
    assert all(
        a.status == "finished" and a.finished_at for a in attempts.values() if a not in missing
    )
    assert attempts[LITE_IDS[0]].resolved and attempts[LITE_IDS[0]].grade == "FULL"
    unresolved = attempts[LITE_IDS[5]]
    assert unresolved.failure_reason_id == "TESTS_FAILED" and not unresolved.is_infra
    empty = attempts[LITE_IDS[12]]
    assert empty.failure_reason_id == "TESTS_FAILED" and "[empty-patch]" in empty.error_text
    error = attempts[LITE_IDS[14]]
    assert error.failure_reason_id == "SANDBOX_ERROR" and error.is_infra
    assert attempts[LITE_IDS[16]].is_infra
    # Never attempted: no failure reason, grade, time or usage.
    assert len(missing) == 6 and all(a.is_missing for a in missing)
    assert all(a.failure_reason_id is None and a.grade == "" for a in missing)
    assert all(a.finished_at is None and a.cost_usd is None for a in missing)
    assert report.resolved == 5 and report.missing == 6 and report.suite_size == 23
    # % resolved is over the whole suite: missing and empty count in the denominator.
    assert run.totals["resolved"] == 5 and run.totals["tasks"] == 23 - 3
    assert run.totals["scored"] == 23 - 3 - 6  # infrastructure excluded, missing not attempted
    assert "5/23 resolved (21.7%)" in report.summary()


def test_reimporting_the_same_results_is_a_no_op_and_new_results_replace_the_run(lite, tmp_path):
    path = run_report(tmp_path, resolved_ids=LITE_IDS[:3], unresolved_ids=LITE_IDS[3:])
    first = results_import(source=path, suite_name=lite, model_name="m")

    again = results_import(source=path, suite_name=lite, model_name="m")

    assert again.unchanged and again.run_id == first.run_id
    assert Run.objects.count() == 1 and Attempt.objects.count() == 23

    path = run_report(tmp_path, resolved_ids=LITE_IDS[:4], unresolved_ids=LITE_IDS[4:])
    changed = results_import(source=path, suite_name=lite, model_name="m")

    # One import for every source: new results update the model's run in place.
    assert not changed.unchanged and changed.run_id == first.run_id
    assert Run.objects.count() == 1 and Attempt.objects.count() == 23
    assert Attempt.objects.resolved().count() == 4


def test_a_folder_of_sample_reports_keeps_per_test_statuses(verified, tmp_path):
    folder = tmp_path / "reports"
    shutil.copytree(REPORTS, folder)

    report = results_import(source=folder, suite_name=verified, model_name="mini-swe-agent")

    attempts = by_task(Run.objects.get(public_id=report.run_id))
    assert {k for k, a in attempts.items() if a.resolved} == {
        "django__django-10097",
        "psf__requests-1142",
        "psf__requests-1724",
    }
    requests = attempts["psf__requests-1142"]
    assert requests.test_results["FAIL_TO_PASS"]["success"] == [
        "test_requests.py::RequestsTestCase::test_no_content_length"
    ]
    astropy = attempts["astropy__astropy-13977"]
    assert astropy.grade == "NO" and len(astropy.test_results["FAIL_TO_PASS"]["failure"]) == 8
    assert not any(a.is_missing for a in attempts.values())


def test_reports_may_be_wrapped_or_in_per_instance_folders_with_their_patch(verified, tmp_path):
    folder = tmp_path / "logs"
    for path in REPORTS.glob("*.report.json"):
        instance_id = path.name.removesuffix(".report.json")
        target = folder / instance_id
        target.mkdir(parents=True)
        inner = json.loads(path.read_text())
        if instance_id.startswith("psf"):
            (target / "report.json").write_text(json.dumps({instance_id: inner}))
        else:
            (target / "report.json").write_text(json.dumps(inner))
        (target / "patch.diff").write_text(f"diff --git a/x b/x\n+fix for {instance_id}\n")

    report = results_import(source=folder, suite_name=verified, model_name="m")

    attempts = by_task(Run.objects.get(public_id=report.run_id))
    assert sum(a.resolved for a in attempts.values()) == 3
    assert "+fix for psf__requests-1724" in attempts["psf__requests-1724"].final_patch


def test_predictions_beside_a_run_report_give_the_patches(lite, tmp_path):
    path = run_report(tmp_path, resolved_ids=LITE_IDS[:1], empty_patch_ids=LITE_IDS[1:2])
    preds = tmp_path / "preds.jsonl"
    preds.write_text(
        json.dumps({"instance_id": LITE_IDS[0], "model_name_or_path": "m", "model_patch": "P"})
        + "\n"
        + json.dumps({"instance_id": LITE_IDS[1], "model_name_or_path": "m", "model_patch": None})
        + "\n"
    )

    report = results_import(source=path, suite_name=lite, model_name="m", predictions=preds)

    attempts = by_task(Run.objects.get(public_id=report.run_id))
    assert attempts[LITE_IDS[0]].final_patch == "P"
    assert attempts[LITE_IDS[1]].final_patch == ""


def test_unknown_instances_are_errors_unless_ignored(lite, tmp_path):
    path = run_report(tmp_path, resolved_ids=[LITE_IDS[0], "django__django-99999"])
    with pytest.raises(SwebenchInputError, match="django__django-99999 is not in suite lite-dev"):
        results_import(source=path, suite_name=lite, model_name="m")
    assert not Run.objects.exists() and not ModelConfig.objects.exists()

    report = results_import(source=path, suite_name=lite, model_name="m", ignore_unknown=True)
    assert report.ignored_unknown == ["django__django-99999"] and report.resolved == 1


def test_bad_results_name_the_file_and_field(lite, tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"schema_version": 2, "resolved_ids": "all of them"}))
    with pytest.raises(SwebenchInputError, match=r"r\.json, field resolved_ids: must be a list"):
        results_import(source=path, suite_name=lite, model_name="m")

    bad = tmp_path / "sqlfluff__sqlfluff-1625.report.json"
    bad.write_text(json.dumps({"resolved": "yes", "tests_status": {}}))
    with pytest.raises(SwebenchInputError, match="field resolved: must be true or false"):
        results_import(source=bad, suite_name=lite, model_name="m")

    broken = tmp_path / "broken.json"
    broken.write_text("{\n  nope")
    with pytest.raises(SwebenchInputError, match=r"broken.json: invalid JSON at line 2"):
        results_import(source=broken, suite_name=lite, model_name="m")


def test_a_zip_upload_of_reports_imports(verified):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in REPORTS.glob("*.report.json"):
            archive.writestr(f"reports/{path.name}", path.read_text())

    report = results_import(
        source=buffer.getvalue(), filename="reports.zip", suite_name=verified, model_name="m"
    )
    assert report.resolved == 3 and report.suite_size == 6


def test_a_model_name_taken_by_a_harness_configuration_is_refused(lite, tmp_path):
    ModelConfig.objects.create(name="gpt", agent_variant="llm")
    path = run_report(tmp_path, resolved_ids=LITE_IDS[:1])
    with pytest.raises(SwebenchInputError, match="existing llm configuration"):
        results_import(source=path, suite_name=lite, model_name="gpt")


def test_ab_import_results_prints_the_summary(tmp_path):
    var = tmp_path / "var"
    assert ab("import-swebench", str(VERIFIED), "--suite", "v", var_dir=var).returncode == 0
    out = ab("import-results", str(REPORTS), "--suite", "v", "--model", "mini", var_dir=var)
    assert out.returncode == 0, out.stderr
    assert "3/6 resolved (50.0%)" in out.stdout
    again = ab("import-results", str(REPORTS), "--suite", "v", "--model", "mini", var_dir=var)
    assert "unchanged" in again.stdout


def test_imported_results_show_on_the_leaderboard_run_and_attempt_pages(
    lite, tmp_path, client, alice
):
    path = run_report(tmp_path, resolved_ids=LITE_IDS[:4], unresolved_ids=LITE_IDS[4:20])
    report = results_import(source=path, suite_name=lite, model_name="published-agent")
    client.force_login(alice)

    board = client.get(f"/suites/{lite}/leaderboard/").content.decode()
    assert "published-agent" in board
    assert "published results" in board and "3 of 23 not attempted" in board
    assert client.get(f"/runs/{report.run_id}/").status_code == 200
    attempt = Attempt.objects.get(run__public_id=report.run_id, task__task_id=LITE_IDS[22])
    page = client.get(attempt.get_absolute_url()).content.decode()
    assert "not attempted" in page and LITE_IDS[22] in page
    assert "TESTS_FAILED" not in page and "counts as the agent&#x27;s result" not in page


def test_a_stale_published_attempt_is_marked_after_a_dataset_update(lite, tmp_path, client, alice):
    path = run_report(tmp_path, resolved_ids=LITE_IDS[:1])
    report = results_import(source=path, suite_name=lite, model_name="m")
    items = rows(LITE_DEV)
    items[0]["problem_statement"] += "\n(clarified)"
    changed = tmp_path / "lite_v2.jsonl"
    changed.write_text("".join(json.dumps(i) + "\n" for i in items))
    swebench_import(source=changed, suite_name=lite, dataset_version="v2")

    attempt = Attempt.objects.get(run__public_id=report.run_id, task__task_id=LITE_IDS[0])
    assert attempt.is_stale_revision and attempt.resolved
    client.force_login(alice)
    page = client.get(attempt.get_absolute_url()).content.decode()
    assert "stale: task revision 1 &lt; 2" in page
    # The same results imported again now count as new: the dataset changed under them.
    again = results_import(source=path, suite_name=lite, model_name="m")
    assert not again.unchanged and again.run_id == report.run_id
    attempt.refresh_from_db()
    assert not attempt.is_stale_revision


def test_a_run_from_one_file_is_dated_by_its_name_and_names_the_file(lite, tmp_path):
    """Issue 29 item 3: seven runs from seven files of one folder said the same folder, and
    the date in SWE-bench's submission names (20250807_...) was ignored."""
    first = run_report(tmp_path, resolved_ids=LITE_IDS[:3])
    dated = first.rename(tmp_path / "20250807_mini-v1.7.0_gpt-5.json")
    other = run_report(tmp_path, resolved_ids=LITE_IDS[:2])  # mymodel.run1.json, no date

    a = Run.objects.get(
        public_id=results_import(source=dated, suite_name=lite, model_name="mini gpt-5").run_id
    )
    b = Run.objects.get(
        public_id=results_import(source=other, suite_name=lite, model_name="other").run_id
    )

    assert a.source_path == str(dated) and b.source_path == str(other)
    assert (a.date_source, a.finished_at.date().isoformat()) == ("filename", "2025-08-07")
    assert b.date_source == "unknown"
    # A date the folder gives itself still wins, and an impossible one in a name is none.
    bad = run_report(tmp_path, resolved_ids=LITE_IDS[:1]).rename(tmp_path / "20251399_x.json")
    c = Run.objects.get(
        public_id=results_import(source=bad, suite_name=lite, model_name="bad date").run_id
    )
    assert c.date_source == "unknown"


def test_a_published_per_instance_file_keeps_its_cost_and_calls_on_every_surface(
    lite, tmp_path, client, alice
):
    """Issue 29 item 5: swebench.com's per-instance files say ``cost`` and ``api_calls`` for
    each entry beside ``resolved``; every such row showed "—". Tokens stay unknown."""
    from runs.results.leaderboard import leaderboard_rows
    from runs.templatetags.results import tenths, usd

    entries = {
        instance_id: {"resolved": i < 3, "cost": 0.25 * (i + 1), "api_calls": 10 + i}
        for i, instance_id in enumerate(LITE_IDS[:6])
    }
    entries[LITE_IDS[6]] = {"resolved": False}  # an entry that does not say: unknown
    path = tmp_path / "20250807_mini-v1.7.0_gpt-5.json"
    path.write_text(json.dumps(entries))

    report = results_import(source=path, suite_name=lite, model_name="mini gpt-5")

    attempts = by_task(Run.objects.get(public_id=report.run_id))
    first = attempts[LITE_IDS[0]]
    assert (first.cost_usd, first.steps, first.tokens) == (0.25, 10, None)
    assert first.resolved and not attempts[LITE_IDS[3]].resolved
    quiet = attempts[LITE_IDS[6]]
    assert (quiet.cost_usd, quiet.steps) == (None, None)
    # Means over the attempts that say: (0.25 + ... + 1.5) / 6 and (10 + ... + 15) / 6.
    rows = leaderboard_rows(suite=Suite.objects.get(name=lite))
    (row,) = [r for r in rows if r.entry.run and str(r.entry.run.public_id) == report.run_id]
    assert abs(row.mean_cost_usd - 0.875) < 1e-9 and abs(row.mean_calls - 12.5) < 1e-9

    client.force_login(alice)
    page = client.get(f"/suites/{lite}/leaderboard/").content.decode()
    # The cost cell: the mean first (then its classes and how many were reported).
    assert f'<td class="num cost">{usd(row.mean_cost_usd)}' in page
    assert f'<td class="num">{tenths(row.mean_calls)}</td>' in page
    (api,) = [
        r
        for r in client.get("/api/leaderboard", {"suite": lite}).json()["rows"]
        if r["key"] == row.key
    ]
    assert abs(api["mean_cost_usd"] - 0.875) < 1e-9 and api["mean_calls"] == 12.5
    text = client.get("/api/leaderboard.csv", {"suite": lite}).content.decode()
    (line,) = [r for r in csv.DictReader(io.StringIO(text)) if r["key"] == row.key]
    assert float(line["mean_cost_usd"]) == 0.875 and float(line["mean_calls"]) == 12.5

    # The same file again changes nothing; a wrong value is refused naming entry and field.
    assert results_import(source=path, suite_name=lite, model_name="mini gpt-5").unchanged
    entries[LITE_IDS[1]]["cost"] = -1
    path.write_text(json.dumps(entries))
    with pytest.raises(SwebenchInputError, match=rf"key {LITE_IDS[1]}, field cost: must be a"):
        results_import(source=path, suite_name=lite, model_name="mini gpt-5")
    entries[LITE_IDS[1]] |= {"cost": 0.5, "api_calls": 2.5}
    path.write_text(json.dumps(entries))
    with pytest.raises(SwebenchInputError, match="field api_calls: must be a whole number"):
        results_import(source=path, suite_name=lite, model_name="mini gpt-5")
    assert Attempt.objects.get(pk=first.pk).cost_usd == 0.25  # nothing stored was lost
