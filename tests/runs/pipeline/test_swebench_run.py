"""Evaluating predictions for real: a tiny SWE-bench "instance image" built offline FROM the
runner image (a toy repo at /testbed), instance rows in SWE-bench format pointing at it, and
predictions run through the pipeline in Docker (patch, test patch, tests, grading)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from runs.imports.predictions import predictions_execute_inline, predictions_import
from runs.models import Attempt, Run
from tasks_app.swebench.importer import swebench_import
from tests.conftest import REPO_ROOT
from tests.support.ab_cli import ab

pytestmark = [pytest.mark.docker, pytest.mark.slow]

RUNNER_IMAGE = "agentbench/py-runner:0.1.0"
LABEL = "agentbench.test=swebench-instance-image"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.org",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.org",
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2024-01-01T00:00:00Z",
}
BASE_TESTS = """import pytest

from toy.calc import mean, total


def test_total():
    assert total([1, 2, 3]) == 6


def test_mean_of_even_total():
    assert mean([2, 4]) == 3


def test_mean_of_empty_list_raises():
    with pytest.raises(ValueError):
        mean([])
"""
NEW_TEST = """

def test_mean_of_odd_total():
    assert mean([1, 2]) == 1.5
"""
F2P = ["tests/test_calc.py::test_mean_of_odd_total"]
P2P = [
    "tests/test_calc.py::test_total",
    "tests/test_calc.py::test_mean_of_even_total",
    "tests/test_calc.py::test_mean_of_empty_list_raises",
]


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
        env=os.environ | GIT_ENV,
    ).stdout


def diff_of(repo: Path, path: str, new_text: str) -> str:
    """The patch that turns ``path`` into ``new_text``, leaving the repo untouched."""
    target = repo / path
    old = target.read_text()
    target.write_text(new_text)
    patch = git(repo, "diff")
    target.write_text(old)
    return patch


@pytest.fixture(scope="module")
def instance(tmp_path_factory):
    """Build the instance image once; yield (image, rows); remove the image afterwards."""
    root = tmp_path_factory.mktemp("swebench-instance")
    repo = root / "testbed"
    shutil.copytree(REPO_ROOT / "examples" / "toy_repo" / "src", repo / "src")
    shutil.copy(REPO_ROOT / "examples" / "toy_repo" / "pyproject.toml", repo / "pyproject.toml")
    (repo / "tests").mkdir()
    (repo / "tests" / "test_calc.py").write_text(BASE_TESTS)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    base_commit = git(repo, "rev-parse", "HEAD").strip()
    calc = (repo / "src/toy/calc.py").read_text()
    gold = diff_of(repo, "src/toy/calc.py", calc.replace("// len(values)", "/ len(values)"))
    wrong = diff_of(repo, "src/toy/calc.py", calc.replace("result = 0", "result = 0  # ok"))
    test_patch = diff_of(repo, "tests/test_calc.py", BASE_TESTS + NEW_TEST)
    assert gold and wrong and test_patch

    image = f"agentbench-test/swebench-toy:{uuid.uuid4().hex[:12]}"
    (root / "Dockerfile").write_text(
        f"FROM {RUNNER_IMAGE}\nLABEL {LABEL}\nCOPY testbed /testbed\nWORKDIR /testbed\n"
    )
    subprocess.run(
        ["docker", "build", "-q", "-t", image, str(root)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    rows = [
        {
            "repo": "toy-org/toy",
            "instance_id": f"toy-org__toy-{number}",
            "base_commit": base_commit,
            "patch": gold,
            "test_patch": test_patch,
            "problem_statement": "mean() floors the result: mean([1, 2]) should be 1.5",
            "hints_text": "",
            "created_at": "2024-01-01T00:00:00Z",
            "version": "0.1",
            "environment_setup_commit": base_commit,
            "FAIL_TO_PASS": json.dumps(F2P),
            "PASS_TO_PASS": json.dumps(P2P),
            # The instance's own image (the published swebench/sweb.eval.* ones cannot be
            # pulled here).
            "image_name": image,
        }
        for number in range(1, 6)
    ]
    yield {"image": image, "rows": rows, "gold": gold, "wrong": wrong, "root": root}
    subprocess.run(["docker", "image", "rm", "-f", image], capture_output=True)


def predictions_for(instance) -> list[dict]:
    def p(number: int, patch: str | None) -> dict:
        return {
            "instance_id": f"toy-org__toy-{number}",
            "model_name_or_path": "toy-agent",
            "model_patch": patch,
        }

    not_applying = instance["gold"].replace("return total(values) //", "return totl(values) //")
    # toy-org__toy-5 has no prediction at all.
    return [p(1, instance["gold"]), p(2, instance["wrong"]), p(3, not_applying), p(4, "")]


def test_predictions_run_in_the_instance_image_and_are_graded(
    instance, transactional_db, settings, tmp_path
):
    settings.ARTIFACTS_ROOT = tmp_path / "artifacts"
    settings.SANDBOX_BACKEND = "docker"
    dataset = tmp_path / "toy.jsonl"
    dataset.write_text("".join(json.dumps(r) + "\n" for r in instance["rows"]))
    swebench_import(source=dataset, suite_name="toy-swebench")
    preds = tmp_path / "preds.jsonl"
    preds.write_text("".join(json.dumps(p) + "\n" for p in predictions_for(instance)))

    report = predictions_import(
        source=preds, suite_name="toy-swebench", model_name="toy-agent", evaluate_inline=True
    )
    assert report.queued == 3
    seen: list[tuple[int, int, str]] = []
    predictions_execute_inline(
        report.attempt_ids, progress=lambda i, n, a: seen.append((i, n, a.task.task_id))
    )

    assert [s[:2] for s in seen] == [(1, 3), (2, 3), (3, 3)]
    run = Run.objects.get(public_id=report.run_id)
    attempts = {a.task.task_id: a for a in Attempt.objects.filter(run=run).select_related("task")}
    gold = attempts["toy-org__toy-1"]
    assert gold.status == "finished" and gold.resolved, gold.error_text
    assert gold.grade == "FULL"
    assert gold.test_results == {
        "FAIL_TO_PASS": {"success": F2P, "failure": []},
        "PASS_TO_PASS": {"success": P2P, "failure": []},
    }
    assert "/ len(values)" in gold.final_patch

    wrong = attempts["toy-org__toy-2"]
    assert wrong.failure_reason_id == "TESTS_FAILED" and not wrong.is_infra
    assert wrong.grade == "NO"
    assert wrong.test_results["FAIL_TO_PASS"]["failure"] == F2P
    assert wrong.test_results["PASS_TO_PASS"]["success"] == P2P

    broken = attempts["toy-org__toy-3"]
    assert broken.failure_reason_id == "TOOL_ERROR" and not broken.is_infra
    assert "[patch-apply-failed]" in broken.error_text

    assert attempts["toy-org__toy-4"].error_text.startswith("[empty-patch]")
    assert attempts["toy-org__toy-5"].error_text.startswith("[no-prediction]")
    assert attempts["toy-org__toy-5"].is_missing
    run.refresh_from_db()
    assert run.status == "finished"
    # toy-org__toy-5 was not attempted: out of the scored attempts, in the whole suite's rate.
    assert run.totals["resolved"] == 1 and run.totals["scored"] == 4
    assert (run.totals["missing"], run.totals["tasks"]) == (1, 5)
    assert (run.totals["success_rate"], run.totals["attempted_rate"]) == (0.2, 0.25)


def test_ab_import_predictions_run_prints_progress(instance, tmp_path):
    var = tmp_path / "var"
    dataset = tmp_path / "toy.jsonl"
    dataset.write_text("".join(json.dumps(r) + "\n" for r in instance["rows"][:2]))
    assert ab("import-swebench", str(dataset), "--suite", "toy", var_dir=var).returncode == 0
    preds = tmp_path / "preds.json"
    preds.write_text(json.dumps(predictions_for(instance)[:2]))

    out = ab(
        "import-predictions",
        str(preds),
        "--suite",
        "toy",
        "--model",
        "toy-agent",
        "--run",
        var_dir=var,
        env={"SANDBOX_BACKEND": "docker"},
    )

    assert out.returncode == 0, out.stderr
    assert "[1/2] toy-org__toy-1: resolved (grade FULL)" in out.stdout
    assert "[2/2] toy-org__toy-2: TESTS_FAILED (grade NO)" in out.stdout
    assert "evaluated 2: 1 resolved" in out.stdout
