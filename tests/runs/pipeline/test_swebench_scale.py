"""SWE-bench evaluation at suite scale: gold validation and predictions through the workers,
each ending with a summary (valid / approximate-valid / invalid / not buildable, reasons
grouped), and the run summary's score being the leaderboard's (invalid instances left out).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from runs.cli.runs import summary_table as run_summary
from runs.pipeline.swebench_validation import (
    GoldReport,
    GoldRow,
    network_tests,
    summary_table,
)
from sandbox.environments.build import BuiltInstance
from tasks_app.models import GoldValidation, GoldValidationStatus, Task
from tests.support.pages_fixtures import make_model, make_run, make_suite, outcomes
from tests.support.swebench_cache_fixtures import drop_root, new_root, seed_base
from tests.support.swebench_fixtures import EXAMPLES, LITE_DEV, rows, write_jsonl
from tests.support.worker_stack import create_stack

REPOS = EXAMPLES / "repos"
VALID = "marshmallow-code__marshmallow-1359"
NO_REPO = "pydicom__pydicom-901"  # its repository is not in examples/swebench/repos


# --- the summaries (pure) -------------------------------------------------------------------


def test_the_summary_counts_verdicts_and_groups_alike_reasons():
    python = "not buildable: the specification asks for Python {}: no Debian suite reachable"
    report = GoldReport(
        suite="s",
        backend="docker",
        rows=[
            GoldRow("a__a-1", "valid", "built"),
            GoldRow("a__a-2", "valid", "cached", python_asked="3.10", python_used="3.11"),
            GoldRow(
                "b__b-1",
                "invalid",
                "built",
                failing_tests=["t.py::x", "t.py::y"],
                reason="gold patch grades NO: t.py::x, t.py::y",
            ),
            GoldRow(
                "b__b-2",
                "invalid",
                "built",
                failing_tests=["t.py::z"],
                reason="gold patch grades NO: t.py::z",
            ),
            GoldRow("c__c-1", "not_buildable", "not buildable", reason=python.format("3.6")),
            GoldRow("c__c-2", "not_buildable", "not buildable", reason=python.format("3.6")),
            GoldRow(
                "d__d-1",
                "not_buildable",
                "failed",
                reason="failed: instance d__d-1: repository d/d is not in /repos",
            ),
        ],
    )

    lines = summary_table(report)

    counts = {line[:20].strip(): line[20:].strip() for line in lines[1:5]}
    assert counts == {
        "valid": "1",
        "approximate-valid": "1",
        "invalid": "2",
        "not buildable": "3",
    }
    why = [line for line in lines if line.startswith(("invalid:", "not buildable:"))]
    assert why[0].startswith("invalid: gold patch grades NO ") and why[0].endswith(
        "2  b__b-1, b__b-2"
    )
    assert why[1].startswith("not buildable: " + python.format("3.6")[:60])
    assert why[1].endswith("2  c__c-1, c__c-2")
    assert "instance <instance>: repository d/d is not in /repos" in why[2]
    assert report.summary() == (
        "2 valid (1 on an approximate environment), 2 invalid, 3 not buildable of 7 instance(s) "
        "on docker"
    )


def test_an_approximate_build_makes_a_valid_instance_approximate_valid():
    # The hook: swebench-envs' build records the Python asked for beside the one used.
    built = BuiltInstance(
        instance_id="x__x-1",
        key="k",
        base_commit="c",
        rootfs="/r",
        python="3.11",
        python_asked="3.10",
    )
    assert built.approximate
    row = GoldRow(
        "x__x-1", "valid", "cached", python_asked=built.python_asked, python_used=built.python
    )
    assert row.verdict == "approximate-valid"
    exact = GoldRow("x__x-2", "valid", "cached", python_asked="3.9", python_used="3.9")
    assert exact.verdict == "valid"
    assert (
        GoldRow("x__x-1", "invalid", "cached", python_asked="3.10", python_used="3.11").verdict
        == "invalid"
    )


def test_it_names_only_the_failing_tests_whose_own_output_shows_a_network_error():
    log = "\n".join(
        [
            "=================================== FAILURES ===================================",
            "____________________________ TestApi.test_download ____________________________",
            "E   requests.exceptions.ConnectionError: HTTPSConnectionPool(host='pypi.org', "
            "port=443): Max retries exceeded (Caused by NewConnectionError('Failed to "
            "establish a new connection: [Errno -3] Temporary failure in name resolution'))",
            "________________________________ test_parse ____________________________________",
            "E   AssertionError: assert 1 == 2",
            "=========================== short test summary info ============================",
            "FAILED tests/test_api.py::TestApi::test_download - requests.exceptions...",
            "FAILED tests/test_api.py::test_parse - AssertionError: assert 1 == 2",
            "FAILED tests/test_api.py::test_fetch - socket.timeout: timed out",
        ]
    )
    failing = [
        "tests/test_api.py::TestApi::test_download",
        "tests/test_api.py::test_parse",
        "tests/test_api.py::test_fetch",
    ]

    assert network_tests(log, failing) == [
        "tests/test_api.py::TestApi::test_download",
        "tests/test_api.py::test_fetch",
    ]


@pytest.mark.django_db
def test_a_run_summary_scores_as_the_leaderboard_does_leaving_invalid_instances_out():
    suite = make_suite("scale-summary", tasks=2)
    run = make_run(suite, make_model("alpha"))
    outcomes(run, [[None], ["TESTS_FAILED"]])
    before = run_summary(run)
    invalid = Task.objects.for_suite(suite).order_by("task_id")[1]
    GoldValidation.objects.create(
        task=invalid,
        backend="docker",
        status=GoldValidationStatus.INVALID,
        gold_grade="NO",
        empty_grade="NO",
        reason="gold patch grades NO",
    )

    after = run_summary(run)

    assert "score 50.0% (1 / 2 tasks; the leaderboard's figure for this run)" in before
    assert "score 100.0% (1 / 1 tasks; the leaderboard's figure for this run)" in after
    assert "1 task(s) of the suite left out of every rate: gold validation found them" in after


# --- through the workers ----------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.docker
def test_gold_validation_and_predictions_run_through_the_workers_and_end_with_a_summary(
    tmp_path, django_db_blocker
):
    """Real Celery workers (started by the commands themselves) on the embedded database and
    broker; marshmallow-1359 is built in a cache root of the test's own (on the shared base
    level); pydicom-901's repository is not in the examples' folder, so its build fails."""
    root = new_root()
    stack = create_stack("sqlite+sqla", tmp_path, {"SWEBENCH_CACHE_DIR": str(root)})
    try:
        seed_base(root)
        dataset = write_jsonl(
            tmp_path / "lite.jsonl",
            [r for r in rows(LITE_DEV) if r["instance_id"] in (VALID, NO_REPO)],
        )
        stack.ab("import-swebench", str(dataset), "--suite", "lite-workers")
        validated = stack.ab(
            "validate-suite",
            "lite-workers",
            "--variant",
            "oracle",
            "--backend",
            "docker",
            "--repos",
            str(REPOS),
            "--jobs",
            "2",
            "--worker",
            "--concurrency",
            "2",
            timeout=3600,
        ).stdout
        gold = {VALID: next(r for r in rows(LITE_DEV) if r["instance_id"] == VALID)["patch"]}
        predictions = tmp_path / "preds.jsonl"
        predictions.write_text(
            json.dumps(
                {"instance_id": VALID, "model_patch": gold[VALID], "model_name_or_path": "gold"}
            )
            + "\n"
        )
        predicted = stack.ab(
            "import-predictions",
            str(predictions),
            "--suite",
            "lite-workers",
            "--model",
            "gold-as-predictions",
            "--worker",
            "--concurrency",
            "2",
            timeout=1800,
        ).stdout
        alias = stack.connect()
        from runs.models import Attempt

        with django_db_blocker.unblock():  # the stack's own database, not the test's
            workers = set(
                Attempt.objects.using(alias)
                .filter(task__task_id=VALID)
                .values_list("worker", flat=True)
            )
            stored = {
                (g.task.task_id, g.backend, g.status)
                for g in GoldValidation.objects.using(alias).select_related("task")
            }
    finally:
        stack.close()
        drop_root(root)

    assert f"[1/2] {VALID}: valid" in validated, validated  # the suite's order
    table = validated[validated.index("verdict ") :]
    assert re.search(r"^valid +1$", table, re.MULTILINE), table
    assert re.search(r"^not buildable +1$", table, re.MULTILINE), table
    assert re.search(
        r"^not buildable: failed: instance <instance>: repository pydicom/pydicom is not in .* 1  "
        + NO_REPO
        + "$",
        table,
        re.MULTILINE,
    ), table
    folder = Path(re.search(r"^run folder: (.*)$", validated, re.MULTILINE).group(1))
    report = json.loads((folder / "gold_validation.json").read_text())
    assert report["counts"] == {
        "valid": 1,
        "approximate-valid": 0,
        "invalid": 0,
        "not_buildable": 1,
    }
    # Three attempts on the instance (gold, empty, the prediction), each claimed by a worker.
    assert len(workers) >= 1 and "" not in workers
    assert (VALID, "docker", "valid") in stored and (
        NO_REPO,
        "docker",
        "not_buildable",
    ) in stored
    assert f"[1/1] {VALID}" not in predicted  # not inline
    assert re.search(
        r"score \d+\.\d% \(1 / \d+ tasks; the leaderboard's figure for this run\)", predicted
    ), predicted


def test_an_instance_record_with_fields_this_build_does_not_know_is_still_read(
    tmp_path, monkeypatch
):
    """The cache is shared by every checkout on the machine: a newer build's record (more
    fields) must not break an older reader."""
    from sandbox.environments.build import built_instance

    monkeypatch.setenv("SWEBENCH_CACHE_DIR", str(tmp_path))
    (tmp_path / "tree" / "testbed").mkdir(parents=True)
    (tmp_path / "instances").mkdir()
    record = {
        "instance_id": "x__x-1",
        "key": "k",
        "base_commit": "c",
        "rootfs": str(tmp_path / "tree"),
        "python": "3.11",
        "python_asked": "3.10",
        "date": "2020-11-15T00:00:00Z",
    }
    (tmp_path / "instances" / "x__x-1.json").write_text(json.dumps(record))

    built = built_instance("x__x-1")

    assert built is not None and (built.key, built.python) == ("k", "3.11")


@pytest.mark.django_db
@pytest.mark.parametrize("budget", ["lots", "inf"])
def test_a_budget_that_is_not_a_number_of_gb_is_an_error_naming_it(budget, tmp_path, monkeypatch):
    from tests.support.ab_cli import ab_main

    monkeypatch.setenv("SWEBENCH_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("SWEBENCH_CACHE_MAX_GB", budget)

    refused = ab_main("swebench", "du")

    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        f"ab swebench: SWEBENCH_CACHE_MAX_GB must be a number of GB, got {budget!r}"
    )
