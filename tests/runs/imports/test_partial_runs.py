"""Runs that cover part of a suite, imported from real SWE-bench reports (issue 22): the
missing state on the attempt page and API, unknown usage as a dash, where a run's date comes
from and what the date filters and the over-time chart do with an unknown one, and the one
import path (a report.json alone, problems said once, one rule for unknown files)."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import re
import shutil
import zipfile

import pytest
from django.urls import reverse

from runs.imports.results import results_import
from runs.imports.run_import import run_folder_import
from runs.models import Attempt, AttemptStatus, Run, RunDateSource
from tasks_app.swebench.errors import SwebenchInputError
from tasks_app.swebench.importer import swebench_import
from tests.support.ab_cli import ab
from tests.support.partial_fixtures import (
    FULL,
    IDS,
    MINI,
    PARTIAL,
    PARTIAL_IDS,
    SAMPLE,
    SAMPLE_DATE,
    copy_reports,
    run_of,
)
from tests.support.swebench_fixtures import REPORTS, VERIFIED

pytestmark = pytest.mark.django_db


def facts(body: str) -> dict[str, str]:
    """The attempt page's facts list, <dt> -> <dd> text."""
    block = body[body.index('<dl class="facts">') : body.index("</dl>")]
    return {
        re.sub(r"<[^>]+>", "", k).strip(): re.sub(r"<[^>]+>", "", v).strip()
        for k, v in re.findall(r"<dt>(.*?)</dt><dd[^>]*>(.*?)</dd>", block, re.S)
    }


def test_a_missing_instance_is_not_attempted_on_its_page_and_in_the_api(
    client, alice, partial_suite
):
    client.force_login(alice)
    never = sorted(set(IDS) - set(PARTIAL_IDS))[0]
    missing = Attempt.objects.get(run=run_of(PARTIAL), task__task_id=never)
    assert missing.status == AttemptStatus.MISSING
    body = client.get(missing.get_absolute_url()).content.decode()
    # Its own part of the page (other attempts on the task are listed after the facts).
    own = body[: body.index("</dl>")]
    assert 'data-outcome="missing"' in own and "Not attempted" in own
    assert "TESTS_FAILED" not in own and "counts as the agent" not in own
    assert 'id="reason"' in own and "reason-box missing" in own
    shown = facts(body)
    assert shown["Grade"] == "—" and shown["Cost"] == "—" and shown["Tokens in / out"] == "— / —"

    api = client.get(f"/api/attempts/{missing.public_id}").json()
    assert (api["status"], api["outcome"], api["failure_reason"]) == ("missing", "missing", None)
    assert (api["failure_stage"], api["grade"], api["resolved"]) == ("", "", False)
    assert api["cost_usd"] is None and api["tokens_in"] is None and api["steps"] is None


def test_usage_nothing_recorded_is_a_dash_on_every_surface(client, alice, partial_suite):
    client.force_login(alice)
    task_id = PARTIAL_IDS[0]
    report_only = Attempt.objects.get(run=run_of(PARTIAL), task__task_id=task_id)
    with_trajectory = Attempt.objects.get(run=run_of(FULL), task__task_id=task_id)
    assert report_only.cost_usd is None and report_only.tokens is None
    assert with_trajectory.cost_usd and with_trajectory.tokens

    page = facts(client.get(report_only.get_absolute_url()).content.decode())
    assert (page["Cost"], page["Tokens in / out"], page["Steps · tool calls"]) == (
        "—",
        "— / —",
        "— · —",
    )
    known = facts(client.get(with_trajectory.get_absolute_url()).content.decode())
    assert known["Cost"].startswith("$") and known["Steps · tool calls"] != "— · —"

    listing = client.get(
        reverse("suite-attempts", args=[partial_suite.name]),
        {"models": report_only.model_config.slug, "task": task_id},
    ).content.decode()
    row = listing[listing.index("<tbody>") : listing.index("</tbody>")]
    cells = re.findall(r'<td class="num">([^<]*)</td>', row)
    assert cells[1:3] == ["—", "—"]  # cost, tokens (sample index first)

    vs = client.get(
        reverse("attempt-vs", args=[report_only.public_id, with_trajectory.public_id])
    ).content.decode()
    sides = re.findall(r"<dt>Cost</dt><dd>([^<]*)</dd>", vs)
    assert sides[0] == "—" and sides[1].startswith("$")
    tokens = re.findall(r"<dt>Tokens</dt><dd>([^<]*)</dd>", vs)
    assert tokens[0] == "—" and tokens[1] != "—"

    api = client.get(f"/api/attempts/{report_only.public_id}").json()
    assert (api["cost_usd"], api["tokens_in"], api["tool_calls"]) == (None, None, None)
    text = client.get("/api/leaderboard.csv", {"suite": partial_suite.name}).content.decode()
    row = next(r for r in csv.DictReader(io.StringIO(text)) if r["model"] == PARTIAL)
    assert row["mean_cost_usd"] == "" and row["mean_tokens"] == "" and row["mean_calls"] == ""


def test_a_run_is_dated_by_its_files_else_the_date_given_else_not_at_all(
    client, alice, partial_suite
):
    full, sample, partial = run_of(FULL), run_of(SAMPLE), run_of(PARTIAL)
    # The trajectories' last model response (19 Nov 2025 for this run).
    assert full.date_source == RunDateSource.TRAJECTORIES
    assert full.finished_at.date() == dt.date(2025, 11, 19)
    assert sample.date_source == RunDateSource.GIVEN and sample.finished_at.date() == SAMPLE_DATE
    assert partial.date_source == RunDateSource.UNKNOWN and not partial.date_known
    # Each finished attempt ended when its trajectory did; the run with the last of them.
    ends = set(full.attempts.filter(status="finished").values_list("finished_at", flat=True))
    assert len(ends) > 1 and max(ends) == full.finished_at

    url = reverse("suite-leaderboard", args=[partial_suite.name])
    window = {"date_from": "2025-11-01", "date_to": "2025-11-30"}
    board = client.get(url, window).context["board"]
    assert {r.name for r in board.all_rows} == {FULL, SAMPLE}
    board = client.get(url, window | {"include_undated": "1"}).context["board"]
    assert {r.name for r in board.all_rows} == {FULL, SAMPLE, PARTIAL}
    api = client.get(
        "/api/leaderboard",
        {"suite": partial_suite.name, "date_from": "2025-11-01", "date_to": "2025-11-30"},
    ).json()
    assert {r["model"]["name"] for r in api["rows"]} == {FULL, SAMPLE}
    unfiltered = {r.name: r for r in client.get(url).context["board"].all_rows}
    assert unfiltered[PARTIAL].date is None and unfiltered[PARTIAL].imported_on is not None
    assert "imported on" in client.get(url).content.decode()

    # The over-time chart leaves the undated run out unless asked.
    chart = reverse("suite-taxonomy-chart", args=[partial_suite.name])
    names = {line["name"] for line in client.get(chart).json()["lines"]}
    assert PARTIAL not in names and FULL in names
    names = {line["name"] for line in client.get(chart, {"include_undated": "1"}).json()["lines"]}
    assert PARTIAL in names
    points = client.get("/api/taxonomy", {"suite": partial_suite.name}).json()["points"]
    assert str(partial.public_id) not in {p["run"] for p in points}
    taxonomy = client.get(reverse("suite-taxonomy", args=[partial_suite.name])).content.decode()
    assert 'id="include-undated"' in taxonomy

    # The run page and the API say where the date, and the run, came from.
    client.force_login(alice)
    page = client.get(partial.get_absolute_url()).content.decode()
    date = page[page.index('id="run-date"') :]
    assert "unknown" in date[: date.index("</dd>")]
    imported = page[page.index('id="run-import"') :]
    imported = imported[: imported.index("</dd>")]
    assert "partial" in imported and "on 20" in imported
    detail = client.get(f"/api/runs/{full.public_id}").json()
    assert (detail["date_source"], detail["date_known"]) == ("trajectories", True)
    assert detail["source_path"] == str(MINI) and detail["imported_at"]
    assert client.get(f"/api/runs/{partial.public_id}").json()["date_known"] is False


def test_the_folders_metadata_date_wins_over_the_date_given(tmp_path, artifacts_root):
    swebench_import(source=VERIFIED, suite_name="v")
    folder = tmp_path / "run"
    shutil.copytree(REPORTS, folder)
    # YAML reads an unquoted date as a date, not a string.
    (folder / "metadata.yaml").write_text("info:\n  name: Agent X\n  date: 2024-06-04\n")
    report = run_folder_import(
        path=folder, suite_name="v", model_name="x", date=dt.date(2025, 1, 1)
    )
    run = Run.objects.get(public_id=report.run_id)
    assert run.date_source == RunDateSource.METADATA
    assert run.finished_at == dt.datetime(2024, 6, 4, tzinfo=dt.UTC)
    assert any("2025-01-01" in line and "not used" in line for line in report.plan)
    # Re-importing the same folder changes nothing, the date included.
    again = run_folder_import(path=folder, suite_name="v", model_name="x")
    assert not (again.added or again.updated) and again.run_id == report.run_id


@pytest.mark.slow
def test_a_report_json_alone_takes_its_id_from_its_folder_and_each_problem_is_said_once(
    tmp_path,
):
    var = tmp_path / "var"
    assert (
        ab("import-swebench", str(MINI / "instances.jsonl"), "--suite", "v", var_dir=var).returncode
        == 0
    )
    one = MINI / "logs" / "django__django-10097" / "report.json"
    out = ab("import-run", str(one), "--suite", "v", "--model", "one", var_dir=var)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "cannot tell the instance id" not in out.stdout
    assert "1/20 resolved (5.0%)" in out.stdout and "missing 19" in out.stdout
    results = ab("import-results", str(one), "--suite", "v", "--model", "two", var_dir=var)
    assert results.returncode == 0 and "1/20 resolved" in results.stdout

    bad = tmp_path / "bad" / "logs" / "django__django-10097"
    bad.mkdir(parents=True)
    (bad / "report.json").write_text('{"resolved": "yes", "tests_status": {}}')
    out = ab("import-run", str(bad / "report.json"), "--suite", "v", "--model", "m", var_dir=var)
    assert out.returncode == 1
    assert out.stdout.count("must be true or false") == 1, out.stdout


@pytest.mark.parametrize("command", ["import-run", "import-results"])
@pytest.mark.slow
def test_both_imports_refuse_a_file_of_no_known_format_and_skip_known_auxiliary_ones(
    tmp_path, command
):
    var = tmp_path / "var"
    assert (
        ab("import-swebench", str(MINI / "instances.jsonl"), "--suite", "v", var_dir=var).returncode
        == 0
    )
    folder = copy_reports(PARTIAL_IDS, tmp_path / "run")
    (folder / "results_summary.json").write_text('{"resolved": 5, "total": 10}')
    (folder / "stats.json").write_text('{"cost": 1.5}')
    (folder / "odd.json").write_text('{"what": "is this"}')

    refused = ab(command, str(folder), "--suite", "v", "--model", "m", var_dir=var)
    assert refused.returncode == 1
    assert refused.stdout.count("odd.json: not a format this import reads") == 1
    assert "--skip-bad" in refused.stderr and "nothing imported" in refused.stderr

    done = ab(command, str(folder), "--suite", "v", "--model", "m", "--skip-bad", var_dir=var)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "skipped  odd.json: not a format this import reads" in done.stdout
    assert "ignored  results_summary.json (a known auxiliary file, no outcomes)" in done.stdout
    assert "ignored  stats.json (a known auxiliary file, no outcomes)" in done.stdout
    assert "5/20 resolved (25.0%)" in done.stdout


def zipped(folder) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(folder).as_posix())
    return buffer.getvalue()


def named(name: str, content: bytes) -> io.BytesIO:
    buffer = io.BytesIO(content)
    buffer.name = name
    return buffer


def test_the_api_uploads_take_the_same_rule_and_a_date(
    client, staff_auth, tmp_path, artifacts_root
):
    swebench_import(source=MINI / "instances.jsonl", suite_name="v")
    folder = copy_reports(PARTIAL_IDS, tmp_path / "run")
    (folder / "stats.json").write_text('{"cost": 1.5}')
    (folder / "odd.json").write_text('{"what": "is this"}')
    content = zipped(folder)

    for path in ("/api/imports/results", "/api/imports/run"):
        refused = client.post(
            path, {"suite": "v", "model": "m", "file": named("run.zip", content)}, **staff_auth
        )
        assert refused.status_code == 400, refused.content
        assert "odd.json" in json.dumps(refused.json())
    assert not Run.objects.exists()

    done = client.post(
        "/api/imports/results",
        {
            "suite": "v",
            "model": "m",
            "file": named("run.zip", content),
            "skip_bad": "true",
            "date": "2025-11-18",
        },
        **staff_auth,
    )
    assert done.status_code == 200, done.content
    body = done.json()
    assert any("odd.json" in line for line in body["skipped_files"])
    assert any("stats.json" in line and "auxiliary" in line for line in body["plan"])
    run = Run.objects.get(public_id=body["run"])
    assert run.date_source == RunDateSource.GIVEN and run.finished_at.date() == dt.date(
        2025, 11, 18
    )
    assert run.source_path == "run.zip" and run.imported_by is not None

    run_import = client.post(
        "/api/imports/run",
        {"suite": "v", "model": "n", "file": named("run.zip", content), "skip_bad": "true"},
        **staff_auth,
    ).json()
    assert run_import["date_source"] == "unknown" and run_import["date"] == ""


def test_the_admin_results_upload_takes_skip_bad_and_a_date(client, alice, tmp_path):
    swebench_import(source=MINI / "instances.jsonl", suite_name="v")
    client.force_login(alice)
    folder = copy_reports(PARTIAL_IDS, tmp_path / "run")
    (folder / "odd.json").write_text('{"what": "is this"}')
    body = client.post(
        "/admin/swebench/results/",
        {
            "file": named("run.zip", zipped(folder)),
            "suite": "v",
            "model": "m",
            "skip_bad": "on",
            "date": "2025-11-18",
        },
    ).content.decode()
    run = Run.objects.get(model_config__name="m")
    assert run.date_source == RunDateSource.GIVEN and run.imported_by == alice
    assert "odd.json" in body and "5/20 resolved (25.0%)" in body


def test_import_results_with_an_unknown_file_and_no_skip_bad_stores_nothing(tmp_path):
    swebench_import(source=MINI / "instances.jsonl", suite_name="v")
    folder = copy_reports(PARTIAL_IDS[:2], tmp_path / "run")
    (folder / "odd.json").write_text("[1, 2]")
    with pytest.raises(SwebenchInputError, match=r"odd\.json: not a format this import reads"):
        results_import(source=folder, suite_name="v", model_name="m")
    assert not Run.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_the_migration_turns_flagged_missing_rows_into_the_missing_state():
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    from runs import data_version

    mine = ("runs", "0012_partial_runs_missing_state")
    executor = MigrationExecutor(connection)
    graph = executor.loader.graph
    # Back to every migration but this one and what depends on it (the other apps' and
    # branches' migrations stay applied). SQLite refuses to drop a column a trigger names, so
    # the page cache's triggers go first and are installed again at the end, as after a migrate.
    gone = graph.backwards_plan(mine)
    on = "" if connection.vendor == "sqlite" else ' ON "{}"'
    with connection.cursor() as cursor:
        for table, name in data_version.installed_triggers():
            cursor.execute(f'DROP TRIGGER IF EXISTS "{name}"' + on.format(table))
    executor.migrate([], plan=[(graph.nodes[key], True) for key in gone])
    old = executor.loader.project_state([n for n in graph.nodes if n not in set(gone)]).apps
    Suite, Task = old.get_model("tasks_app", "Suite"), old.get_model("tasks_app", "Task")
    Model, Run = old.get_model("runs", "ModelConfig"), old.get_model("runs", "Run")
    Attempt = old.get_model("runs", "Attempt")
    suite = Suite.objects.create(name="old", source="swebench")
    tasks = [
        Task.objects.create(suite=suite, task_id=f"o__o-{i}", repo_url="x", test_command="t")
        for i in range(3)
    ]
    model = Model.objects.create(name="paper", slug="paper", agent_variant="external")
    run = Run.objects.create(
        suite=suite,
        model_config=model,
        source="published",
        status="finished",
        config_snapshot={
            "kind": "run_folder",
            "source_path": "/data/run",
            "metadata": {"date": "2025-11-18"},
        },
    )
    when = dt.datetime(2026, 1, 2, tzinfo=dt.UTC)
    common = {"run": run, "suite": suite, "model_config": model, "status": "finished"}
    Attempt.objects.create(task=tasks[0], finished_at=when, **common)
    Attempt.objects.create(
        task=tasks[1],
        failure_reason_id="TESTS_FAILED",
        failure_stage="final_test",
        grade="NO",
        finished_at=when,
        **common,
    )
    Attempt.objects.create(
        task=tasks[2],
        failure_reason_id="TESTS_FAILED",
        failure_stage="final_test",
        grade="NO",
        is_missing=True,
        finished_at=when,
        **common,
    )

    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    executor.migrate(latest)
    data_version.install()
    new = executor.loader.project_state(latest).apps
    rows = {
        a.task.task_id: a for a in new.get_model("runs", "Attempt").objects.select_related("task")
    }
    gone = rows["o__o-2"]
    assert (gone.status, gone.failure_reason_id, gone.failure_stage, gone.grade) == (
        "missing",
        None,
        "",
        "",
    )
    assert gone.finished_at is None and gone.cost_usd is None
    # Report-only attempts (every usage figure 0) now say they recorded none.
    assert rows["o__o-1"].cost_usd is None and rows["o__o-1"].tokens_in is None
    assert rows["o__o-1"].failure_reason_id == "TESTS_FAILED"
    migrated = new.get_model("runs", "Run").objects.get()
    assert (migrated.date_source, migrated.source_path) == ("metadata", "/data/run")
    assert migrated.finished_at == dt.datetime(2025, 11, 18, tzinfo=dt.UTC)
    assert rows["o__o-0"].finished_at == migrated.finished_at


def test_an_inspect_log_dates_its_run_by_when_it_was_created(artifacts_root):
    from tests.runs.imports.test_run_import import INSPECT_JSON_LOG, INSPECT_LOG

    swebench_import(source=MINI / "instances.jsonl", suite_name="v")
    for path, model in ((INSPECT_LOG, "eval-log"), (INSPECT_JSON_LOG, "json-log")):
        report = run_folder_import(path=path, suite_name="v", model_name=model)
        run = Run.objects.get(public_id=report.run_id)
        assert run.date_source == RunDateSource.INSPECT, model
        assert run.finished_at.isoformat()[:10] == report.date[:10]
        assert report.date_source == "inspect" and report.date < "2027"


def test_a_configurations_page_dates_its_runs_as_the_run_page_does(client, alice, partial_suite):
    """A run of unknown date is "imported on ..." there too, never dated by its import."""
    client.force_login(alice)
    for name, undated in ((PARTIAL, True), (FULL, False), (SAMPLE, False)):
        run = run_of(name)
        page = client.get(reverse("model-config-detail", args=[run.model_config.slug]))
        body = page.content.decode()
        shown = body[body.index(str(run.public_id)[:8]) :]
        shown = shown[shown.index('class="run-date"') : shown.index("</li>")]
        assert ("imported on" in shown) is undated, name
        if not undated:
            assert run.finished_at.strftime("%Y-%m-%d") in shown, name
    assert run_of(SAMPLE).finished_at.date() == SAMPLE_DATE


def test_a_harbor_job_is_dated_by_its_trajectories_last_step(tmp_path, artifacts_root):
    from tests.runs.transcript.test_transcript_atif import TASKS, harbor_job

    job = harbor_job(tmp_path, TASKS)
    report = run_folder_import(path=job, suite_name="verified-mini", model_name="cc (Harbor)")
    run = Run.objects.get(public_id=report.run_id)
    assert (run.date_source, report.date_source) == (RunDateSource.TRAJECTORIES, "trajectories")
    assert run.finished_at == dt.datetime(2026, 1, 5, 10, 1, 7, tzinfo=dt.UTC)


def test_a_partial_runs_repository_cells_and_trend_point_give_its_rate_on_what_it_tried(
    client, alice, partial_suite
):
    """Issue 29 item 6: the per-repository table and the over-time chart showed a partial run's
    whole-suite rates only (its untried tasks as 0), with nothing to tell them apart."""
    from runs.results.taxonomy_report import chart_data, taxonomy_breakdown

    client.force_login(alice)
    page = client.get(reverse("suite-leaderboard", args=[partial_suite.name]))
    board = page.context["board"]
    rows = {r.name: r for r in board.all_rows}
    partial, full = rows[PARTIAL], rows[FULL]
    assert len(partial.groups) > 1
    # Each repository's attempted figures add up to the row's own.
    cells = partial.groups.values()
    assert sum(c.attempted_tasks for c in cells) == partial.score.attempted_tasks == 10
    assert sum(c.attempted_resolved for c in cells) == partial.score.attempted_resolved
    assert any(c.partial for c in cells) and not any(c.partial for c in full.groups.values())

    body = page.content.decode()
    table = body[body.index('id="by-repo"') :]
    html = table[table.index(f'data-key="{partial.key}"') :].split("</tr>")[0]
    for cell in cells:
        if cell.partial and cell.attempted_tasks:
            shown = f"{100 * cell.attempted_rate:.0f}% of {cell.attempted_tasks} tried"
            assert shown in html, (cell.group, shown)
    full_html = table[table.index(f'data-key="{full.key}"') :].split("</tr>")[0]
    assert " tried" not in full_html

    api = client.get("/api/leaderboard", {"suite": partial_suite.name}).json()["rows"]
    by_repo = next(r for r in api if r["key"] == partial.key)["by_repo"]
    for group, cell in partial.groups.items():
        got = by_repo[group]
        assert (got["attempted_tasks"], got["attempted_rate"]) == (
            cell.attempted_tasks,
            cell.attempted_rate,
        )

    # The over-time chart: the partial run's point is an open marker saying what it tried.
    chart = chart_data(taxonomy_breakdown(suite=partial_suite, include_undated=True), "/a")
    line = next(t for t in chart["lines"] if t["name"] == PARTIAL)
    assert line["marker"]["symbol"] == ["circle-open"]
    rate = 100 * partial.score.attempted_rate
    assert line["text"] == [f"<br>partial: 10 of 20 tasks; {rate:.1f}% on those"]
    whole = next(t for t in chart["lines"] if t["name"] == FULL)
    assert whole["marker"]["symbol"] == ["circle"] and whole["text"] == [""]
