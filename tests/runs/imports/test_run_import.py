"""ab import-run: run folders (trajectories, reports, legacy reports, Inspect logs) become runs.

Real files: the mini-swe-agent run in examples/swebench/mini_swe_agent_run (20 Verified
instances, 11 resolved) and a real Inspect .eval log; the legacy v1 report and SWE-agent .traj
files are written from their documented shapes (examples/imports/SOURCE.md).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from django.core.files.storage import storages

from runs.imports.inspect_log import read_member, sample_members
from runs.imports.results import results_import
from runs.imports.run_import import run_folder_import
from runs.models import Attempt, AttemptStatus, Run
from runs.results.leaderboard import leaderboard_rows
from runs.taxonomy import Reason, from_exit_status
from tasks_app.models import Suite
from tasks_app.swebench.errors import SwebenchInputError
from tasks_app.swebench.importer import swebench_import
from tests.conftest import REPO_ROOT
from tests.support.ab_cli import ab
from tests.support.swebench_fixtures import LITE_DEV

MINI = REPO_ROOT / "examples" / "swebench" / "mini_swe_agent_run"
IMPORTS = REPO_ROOT / "examples" / "imports"
LEGACY = IMPORTS / "legacy_v1"
INSPECT_LOG = IMPORTS / "inspect" / "swe-mini.eval"
INSPECT_JSON_LOG = IMPORTS / "inspect" / "swe-tools.json"
MODEL = "mini-swe-agent + Gemini 3 Pro"


@pytest.fixture(autouse=True)
def artifacts(settings, tmp_path) -> Path:
    """Each test's artifacts storage of its own."""
    root = tmp_path / "artifacts"
    settings.ARTIFACTS_ROOT = root
    settings.STORAGES = settings.STORAGES | {
        "artifacts": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(root)},
        }
    }
    return root


def traj_path(root: Path, instance_id: str) -> Path:
    return root / "trajs" / instance_id / f"{instance_id}.traj.json"


@pytest.fixture
def run_copy(tmp_path) -> Path:
    """A writable copy of the mini-swe-agent run."""
    return Path(shutil.copytree(MINI, tmp_path / "run"))


def attempts(suite: str, model: str = MODEL) -> dict[str, Attempt]:
    return {
        a.task.task_id: a
        for a in Attempt.objects.filter(suite__name=suite, model_config__name=model).select_related(
            "task"
        )
    }


def read_artifact(attempt: Attempt, name: str) -> bytes:
    with storages["artifacts"].open(f"{attempt.artifacts_dir}/{name}", "rb") as handle:
        return handle.read()


@pytest.mark.django_db
def test_the_mini_swe_agent_run_reaches_the_leaderboard_with_trajectories(run_copy):
    report = run_folder_import(path=run_copy, suite_name="verified-mini", model_name=MODEL)

    # instances.jsonl in the folder created the suite.
    assert report.suite_created and report.tasks_added == 20
    (row,) = leaderboard_rows(suite=Suite.objects.get(name="verified-mini"))
    assert (row.resolved, row.denominator, row.is_published) == (11, 20, True)
    assert row.mean_cost_usd and row.mean_cost_usd > 0.2 and row.mean_tokens
    assert row.mean_wall_sec and row.mean_wall_sec > 60
    by_id = attempts("verified-mini")
    assert len(by_id) == 20
    for instance_id, attempt in by_id.items():
        source = traj_path(MINI, instance_id)
        data = json.loads(source.read_bytes())
        # Stored byte for byte, under the viewer's name; the patch is the submission.
        assert read_artifact(attempt, "trajectory.traj.json") == source.read_bytes()
        assert (
            read_artifact(attempt, "report.json")
            == (MINI / "logs" / instance_id / "report.json").read_bytes()
        )
        assert attempt.final_patch == data["info"]["submission"]
        stats = data["info"]["model_stats"]
        assert float(attempt.cost_usd) == pytest.approx(stats["instance_cost"], abs=1e-6)
        assert attempt.steps == data["info"]["model_stats"]["api_calls"]
        report_json = json.loads((MINI / "logs" / instance_id / "report.json").read_bytes())
        assert attempt.resolved is report_json["resolved"]
        if not attempt.resolved:
            assert attempt.failure_reason_id == Reason.TESTS_FAILED and not attempt.is_infra


@pytest.mark.django_db
def test_a_second_import_changes_nothing_and_a_changed_file_updates_its_attempt(run_copy):
    first = run_folder_import(path=run_copy, suite_name="verified-mini", model_name=MODEL)
    before = {a.task.task_id: (a.pk, a.public_id) for a in attempts("verified-mini").values()}

    again = run_folder_import(path=run_copy, suite_name="verified-mini", model_name=MODEL)
    assert (again.run_id, again.added, again.updated, again.unchanged) == (first.run_id, 0, 0, 20)
    assert again.summary().startswith("unchanged")
    assert Run.objects.count() == 1 and Attempt.objects.count() == 20

    # One report now says unresolved, one trajectory gained a note: those two attempts change.
    report_file = run_copy / "logs" / "psf__requests-1142" / "report.json"
    report_data = json.loads(report_file.read_text())
    report_data["resolved"] = False
    report_file.write_text(json.dumps(report_data))
    traj_file = traj_path(run_copy, "django__django-10097")
    traj = json.loads(traj_file.read_text())
    traj["info"]["model_stats"]["instance_cost"] = 9.5
    traj_file.write_text(json.dumps(traj))

    changed = run_folder_import(path=run_copy, suite_name="verified-mini", model_name=MODEL)
    assert (changed.run_id, changed.added, changed.updated, changed.unchanged) == (
        first.run_id,
        0,
        2,
        18,
    )
    after = attempts("verified-mini")
    assert {k: (a.pk, a.public_id) for k, a in after.items()} == before
    assert not after["psf__requests-1142"].resolved
    assert float(after["django__django-10097"].cost_usd) == 9.5
    assert read_artifact(after["django__django-10097"], "trajectory.traj.json") == (
        traj_file.read_bytes()
    )
    (row,) = leaderboard_rows(suite=Suite.objects.get(name="verified-mini"))
    assert (row.resolved, row.denominator) == (10, 20)


@pytest.mark.django_db
def test_a_corrupt_trajectory_names_the_file_and_imports_nothing(run_copy):
    bad = traj_path(run_copy, "django__django-13417")  # in the middle of the folder
    text = bad.read_text()
    # A trailing comma before the last closing brace.
    bad.write_text(text.rstrip()[:-1].rstrip() + ",\n}")

    with pytest.raises(SwebenchInputError) as caught:
        run_folder_import(path=run_copy, suite_name="verified-mini", model_name=MODEL)

    message = str(caught.value)
    assert "trajs/django__django-13417/django__django-13417.traj.json" in message
    assert "line" in message and "column" in message and "trailing comma" in message
    assert not Run.objects.exists() and not Attempt.objects.exists()
    assert not Suite.objects.filter(name="verified-mini").exists()
    assert not storages["artifacts"].exists("imports")

    report = run_folder_import(
        path=run_copy, suite_name="verified-mini", model_name=MODEL, skip_bad=True
    )
    assert len(report.skipped) == 1 and "django__django-13417.traj.json" in report.skipped[0]
    by_id = attempts("verified-mini")
    assert len(by_id) == 20 and report.resolved == 11
    # Its report still came in; only the trajectory was left out.
    skipped = by_id["django__django-13417"]
    assert skipped.final_patch == "" and not storages["artifacts"].exists(
        f"{skipped.artifacts_dir}/trajectory.traj.json"
    )


@pytest.mark.django_db
def test_a_dry_run_says_what_it_found_and_stores_nothing():
    report = run_folder_import(
        path=MINI, suite_name="verified-mini", model_name=MODEL, dry_run=True
    )
    plan = "\n".join(report.plan)
    assert "20 instance(s), 20 with a trajectory, 20 with a report" in plan
    assert "mini-swe-agent trajectory: 20 file(s)" in plan
    assert "suite verified-mini: would be created with 20 task(s)" in plan
    assert report.counts == {"resolved": 11, "TESTS_FAILED": 9}
    assert not Suite.objects.exists() and not Run.objects.exists()


@pytest.mark.django_db
def test_a_file_of_no_known_format_is_named_with_the_formats_tried(tmp_path):
    swebench_import(source=LITE_DEV, suite_name="lite-dev")
    (tmp_path / "notes.json").write_text('{"hello": "world"}')
    with pytest.raises(SwebenchInputError) as caught:
        run_folder_import(path=tmp_path, suite_name="lite-dev", model_name="m")
    message = str(caught.value)
    assert "notes.json" in message and "formats tried" in message
    assert "legacy v1 report" in message and "Inspect AI log (.eval, or .json" in message


@pytest.fixture
def lite(db) -> str:
    swebench_import(source=LITE_DEV, suite_name="lite-dev")
    return "lite-dev"


def test_a_legacy_v1_report_is_rated_resolved_over_the_suite(lite):
    report = run_folder_import(path=LEGACY, suite_name=lite, model_name="autocoderover-v1")

    assert report.counts == {
        "resolved": 5,
        "TESTS_FAILED": 10,  # 8 applied and unresolved, 2 no_generation
        "TOOL_ERROR": 1,  # no_apply
        "SETUP_FAILED": 1,  # install_fail
        "GIT_CHECKOUT_FAILED": 1,  # reset_failed
        "SANDBOX_ERROR": 1,  # test_errored
        "TIMEOUT": 1,  # test_timeout
        "missing": 3,  # generated but never evaluated, and 2 ids in no list
    }
    (row,) = leaderboard_rows(suite=Suite.objects.get(name=lite))
    # The published figure: resolved / suite size, infrastructure outcomes included.
    assert (row.resolved, row.denominator) == (5, 23)
    assert row.rate == pytest.approx(5 / 23)
    by_id = attempts(lite, "autocoderover-v1")
    install = next(a for a in by_id.values() if a.failure_reason_id == "SETUP_FAILED")
    assert install.is_infra and install.failure_stage == "setup"
    timeout = next(a for a in by_id.values() if a.failure_reason_id == "TIMEOUT")
    assert timeout.is_infra and timeout.is_timeout
    no_apply = next(a for a in by_id.values() if a.failure_reason_id == "TOOL_ERROR")
    assert not no_apply.is_infra and "[patch-apply-failed]" in no_apply.error_text


def test_import_results_reads_a_legacy_report_too(lite):
    report = results_import(
        source=LEGACY / "new_eval_results" / "report.json", suite_name=lite, model_name="acr"
    )
    assert (report.resolved, report.suite_size) == (5, 23)


def test_swe_agent_trajectories_keep_their_patch_and_exit_status(lite):
    report = run_folder_import(path=IMPORTS / "swe_agent", suite_name=lite, model_name="swe-agent")
    by_id = attempts(lite, "swe-agent")
    submitted = by_id["marshmallow-code__marshmallow-1359"]
    # A patch with no evaluation waits for one, outside every queue.
    assert submitted.status == AttemptStatus.NOT_EVALUATED
    assert submitted.final_patch.startswith("diff --git a/src/marshmallow/fields.py")
    assert (submitted.tokens_in, submitted.tokens_out, submitted.steps) == (40210, 812, 3)
    assert (
        read_artifact(submitted, "trajectory.traj")
        == (IMPORTS / "swe_agent" / "marshmallow-code__marshmallow-1359.traj").read_bytes()
    )
    limited = by_id["marshmallow-code__marshmallow-1343"]
    assert limited.failure_reason_id == "AGENT_GAVE_UP" and not limited.is_infra
    assert "exit_cost" in limited.error_text
    assert report.counts["not_evaluated"] == 1 and report.counts["missing"] == 21
    (row,) = leaderboard_rows(suite=Suite.objects.get(name=lite))
    assert row.not_evaluated == 1


@pytest.mark.django_db
def test_an_inspect_log_gives_one_attempt_per_sample_scored_by_its_scorer():
    swebench_import(source=MINI / "instances.jsonl", suite_name="verified-mini")
    report = run_folder_import(path=INSPECT_LOG, suite_name="verified-mini", model_name="insp")
    assert report.counts == {"resolved": 1, "TESTS_FAILED": 2, "missing": 17}
    by_id = attempts("verified-mini", "insp")
    resolved = by_id["psf__requests-1142"]
    assert resolved.resolved and resolved.final_patch.startswith("diff --git a/x.py")
    assert (resolved.tokens_in, resolved.tokens_out, resolved.steps) == (1200, 300, 1)
    member = next(m for m in sample_members(INSPECT_LOG) if "psf__requests-1142" in m.filename)
    # The sample object, decompressed, byte for byte.
    assert read_artifact(resolved, "trajectory.inspect.json") == read_member(
        INSPECT_LOG, member, 10**7
    )


@pytest.mark.django_db
def test_an_inspect_json_log_imports_like_an_eval_log(tmp_path):
    swebench_import(source=MINI / "instances.jsonl", suite_name="verified-mini")
    log = json.loads(INSPECT_JSON_LOG.read_text())
    report = run_folder_import(path=INSPECT_JSON_LOG, suite_name="verified-mini", model_name="j")
    assert report.counts == {"resolved": 1, "TESTS_FAILED": 1, "missing": 18}
    by_id = attempts("verified-mini", "j")
    resolved, failed = by_id["psf__requests-1142"], by_id["psf__requests-1724"]
    assert resolved.resolved and resolved.final_patch.startswith("diff --git a/x.py")
    assert failed.failure_reason_id == Reason.TESTS_FAILED
    # Two model calls, one tool call; tokens from the sample's model_usage.
    assert (resolved.tokens_in, resolved.tokens_out) == (1700, 100)
    assert (resolved.steps, resolved.tool_calls) == (2, 1)
    # The sample object is the attempt's trajectory.
    stored = json.loads(read_artifact(resolved, "trajectory.inspect.json"))
    assert stored == log["samples"][0]
    again = run_folder_import(path=INSPECT_JSON_LOG, suite_name="verified-mini", model_name="j")
    assert (again.added, again.updated, again.unchanged) == (0, 0, 20)

    # A log written header-only has no samples: named, nothing imported.
    header_only = tmp_path / "header.json"
    header_only.write_text(json.dumps({k: v for k, v in log.items() if k != "samples"}))
    with pytest.raises(
        SwebenchInputError, match=r"header\.json: an Inspect log .* without samples"
    ):
        run_folder_import(path=header_only, suite_name="verified-mini", model_name="h")


def test_exit_statuses_map_onto_our_reasons():
    assert from_exit_status("Submitted") is None
    assert from_exit_status("submitted") is None
    assert from_exit_status("LimitsExceeded").reason is Reason.AGENT_GAVE_UP
    assert from_exit_status("FormatError").reason is Reason.TOOL_ERROR
    assert from_exit_status("submitted (exit_cost)").reason is Reason.AGENT_GAVE_UP
    assert from_exit_status("exit_total_execution_time").reason is Reason.TIMEOUT
    assert from_exit_status("RateLimitError").reason is Reason.LLM_ERROR
    assert from_exit_status("limit:message").reason is Reason.AGENT_GAVE_UP
    assert from_exit_status("SomethingNew").reason is Reason.UNKNOWN


@pytest.mark.slow
def test_ab_import_run_imports_the_sample_with_one_command(tmp_path):
    var = tmp_path / "var"
    args = ("import-run", str(MINI), "--suite", "verified-mini", "--model", MODEL)
    dry = ab(*args, "--dry-run", var_dir=var)
    assert dry.returncode == 0, dry.stderr
    assert "20 with a trajectory" in dry.stdout and "nothing stored" in dry.stdout

    first = ab(*args, var_dir=var)
    assert first.returncode == 0, first.stderr
    assert "11/20 resolved (55.0%)" in first.stdout
    # The plan comes before the import's result.
    assert first.stdout.index("20 with a trajectory") < first.stdout.index("11/20 resolved")
    assert "reading" in first.stderr and "copying" in first.stderr

    second = ab(*args, var_dir=var)
    assert second.returncode == 0 and "unchanged: run" in second.stdout

    bad = ab("import-run", str(tmp_path / "nope"), "--suite", "s", "--model", "m", var_dir=var)
    assert bad.returncode != 0 and "nope" in bad.stdout + bad.stderr


@pytest.mark.django_db
def test_the_agents_exit_status_explains_an_unresolved_instance_on_the_taxonomy(run_copy):
    from runs.results.compare import compare_models
    from runs.results.taxonomy_report import taxonomy_breakdown

    unresolved = [i for i in sorted(p.name for p in (run_copy / "logs").iterdir())]
    unresolved = [
        i
        for i in unresolved
        if not json.loads((run_copy / "logs" / i / "report.json").read_text())["resolved"]
    ]
    for instance_id, status in zip(unresolved, ("LimitsExceeded", "RateLimitError"), strict=False):
        path = traj_path(run_copy, instance_id)
        data = json.loads(path.read_text())
        data["info"]["exit_status"] = status
        path.write_text(json.dumps(data))

    run_folder_import(path=run_copy, suite_name="verified-mini", model_name=MODEL)

    by_id = attempts("verified-mini")
    gave_up, api = by_id[unresolved[0]], by_id[unresolved[1]]
    assert (gave_up.failure_reason_id, gave_up.is_infra) == ("AGENT_GAVE_UP", False)
    assert "LimitsExceeded" in gave_up.error_text and gave_up.failure_stage == "agent_run"
    assert (api.failure_reason_id, api.is_infra) == ("LLM_ERROR", True)
    suite = Suite.objects.get(name="verified-mini")
    (model,) = taxonomy_breakdown(suite=suite).models
    assert model.resolved == 11
    assert model.counts == {"AGENT_GAVE_UP": 1, "LLM_ERROR": 1, "TESTS_FAILED": 7}
    # Published: still rated over the suite, the API failure in the denominator.
    (row,) = leaderboard_rows(suite=suite)
    assert (row.resolved, row.denominator) == (11, 20)
    comparison = compare_models(suite=suite, models=[model.model])
    assert len(comparison.rows) == 20


def test_an_experiments_style_folder_brings_its_patches_and_metadata(lite, tmp_path):
    legacy = json.loads((LEGACY / "new_eval_results" / "report.json").read_text())
    folder = tmp_path / "20240604_agent"
    (folder / "results").mkdir(parents=True)
    (folder / "results" / "results.json").write_text(json.dumps(legacy))
    (folder / "results" / "resolved_by_repo.json").write_text('{"sqlfluff/sqlfluff": 2}')
    resolved = legacy["resolved"]
    (folder / "all_preds.jsonl").write_text(
        "".join(
            json.dumps({"instance_id": i, "model_patch": f"diff --git a/{n}.py b/{n}.py\n"}) + "\n"
            for n, i in enumerate(resolved)
        )
    )
    (folder / "metadata.yaml").write_text(
        "info:\n  name: Agent X\n  site: https://example.org/agent-x\n"
        "  report: https://example.org/agent-x/report\ntags:\n  checked: false\n"
    )
    (folder / "README.md").write_text("# Agent X on Lite\n\nSee https://example.org/agent-x.\n")
    (folder / "logs.txt").write_text("harness output")

    report = run_folder_import(path=folder, suite_name=lite, model_name="agent-x")

    assert report.resolved == 5
    plan = "\n".join(report.plan)
    assert "legacy v1 report: 1 file(s)" in plan and "predictions: 1 file(s)" in plan
    assert "name=Agent X" in plan and "ignored  1 other file(s)" in plan
    # A JSON file of the layout that holds no outcomes is skipped with a notice, by name.
    assert "ignored  results/resolved_by_repo.json (a known auxiliary file" in plan
    run = Run.objects.get(public_id=report.run_id)
    metadata = run.config_snapshot["metadata"]
    assert (
        metadata["name"] == "Agent X" and "https://example.org/agent-x/report" in metadata["links"]
    )
    assert "Agent X" in run.notes
    by_id = attempts(lite, "agent-x")
    assert by_id[resolved[0]].final_patch == "diff --git a/0.py b/0.py\n"


@pytest.mark.django_db
def test_an_inspect_sample_that_hit_a_limit_or_an_error_gets_that_reason():
    swebench_import(source=MINI / "instances.jsonl", suite_name="verified-mini")
    run_folder_import(
        path=IMPORTS / "inspect" / "swe-limits.eval", suite_name="verified-mini", model_name="lim"
    )
    by_id = attempts("verified-mini", "lim")
    limited, errored = by_id["psf__requests-1142"], by_id["psf__requests-1724"]
    assert (limited.failure_reason_id, limited.is_infra) == ("AGENT_GAVE_UP", False)
    assert "limit:message" in limited.error_text
    assert (errored.failure_reason_id, errored.is_infra) == ("SANDBOX_ERROR", True)
    assert "sandbox container exited unexpectedly" in errored.error_text


def test_the_shipped_run_is_the_shared_reference_copy():
    from tests.support.swebench_fixtures import SHARED_SWEBENCH

    shared = SHARED_SWEBENCH / "mini_swe_agent_run"
    shipped = sorted(p.relative_to(MINI) for p in MINI.rglob("*") if p.is_file())
    assert len(shipped) == 42  # README, instances.jsonl, 20 reports, 20 trajectories
    if shared.exists():
        for relative in shipped:
            assert (shared / relative).read_bytes() == (MINI / relative).read_bytes(), relative
