"""Harbor / Terminal-Bench task folders end to end: imported by ``ab import-tasks``, their
Dockerfile environments built by the engine (once: keyed by content), run with the oracle
(``solution/solve.sh``) and the no-op agent, graded by the reward their real verifiers write.

The three example tasks (examples/harbor/: Python, Go and Node, toolchains installed from
Debian's archive in their Dockerfiles) share one xdist group: their images are built once
per machine and found by every later test.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from runs.models import AttemptStatus
from tasks_app import harbor as harbor_format
from tests.conftest import REPO_ROOT
from tests.support.backends import backend_params
from tests.support.pipeline_fixtures import (
    attempt_folder,
    run_attempt,
)

EXAMPLES = REPO_ROOT / "examples" / "harbor"

# Docker builds every image (bubblewrap runs their trees): every test needs the engine.
pytestmark = [pytest.mark.django_db, pytest.mark.docker, pytest.mark.xdist_group("harbor-builds")]


def _import(directory: Path = EXAMPLES):
    from tasks_app.services import tasks_import
    from tasks_app.spec import PathRules

    return tasks_import(directory=directory, rules=PathRules.local(directory))


def _task(task_id: str, suite: str = "harbor"):
    from tasks_app.models import Task

    return Task.objects.select_related("suite").get(suite__name=suite, task_id=task_id)


@pytest.mark.parametrize("backend", backend_params())
@pytest.mark.parametrize("task_id", ["py-wordfreq", "go-median", "node-slugify"])
def test_it_solves_each_example_with_its_oracle_and_fails_it_with_nop(
    task_id, backend, artifacts_root
):
    _import()
    task = _task(task_id)

    solved = run_attempt(task, variant="oracle", backend=backend)

    assert solved.status == AttemptStatus.FINISHED
    assert solved.failure_reason_id is None, solved.error_text
    stages = list(solved.stages.order_by("order").values_list("name", flat=True))
    assert stages == ["environment_build", "export_workdir", "agent_run", "final_test"]
    folder = attempt_folder(solved)
    assert (folder / "logs" / "verifier").is_dir()
    assert solved.final_patch  # what solve.sh changed in the workdir
    assert solved.grade == "FULL"

    record = json.loads((folder / "run.json").read_text())
    assert record["sandbox"]["backend"] == backend
    assert record["sandbox"]["workdir"] == "/app"
    # task.toml's resources, as the sandbox got them (cpus at most the host's).
    asked = harbor_format.load_harbor_task(EXAMPLES / task_id)
    assert record["sandbox"]["memory_mb"] == asked.memory_mb
    assert record["sandbox"]["cpus"] == min(1.0, float(os.cpu_count() or 1))

    untouched = run_attempt(task, variant="nop", backend=backend)

    assert untouched.failure_reason_id == "TESTS_FAILED", untouched.error_text
    assert untouched.is_infra is False
    assert untouched.grade == "NO"


def _variant(tmp_path: Path, *, test_sh: str | None = None, dockerfile: str | None = None):
    """A copy of the Python example in a dataset folder of its own (its environment unchanged
    unless ``dockerfile`` is given: the image is the example's, found built)."""
    import shutil

    folder = tmp_path / "variants" / "py-wordfreq"
    shutil.copytree(EXAMPLES / "py-wordfreq", folder)
    if test_sh is not None:
        (folder / "tests" / "test.sh").write_text(test_sh)
    if dockerfile is not None:
        (folder / "environment" / "Dockerfile").write_text(dockerfile)
    _import(folder.parent)
    return folder, _task("py-wordfreq", suite="variants")


@pytest.mark.parametrize(
    ("test_sh", "tag"),
    [
        ("#!/bin/bash\necho crashed >&2\nexit 3\n", "[verifier-no-reward]"),
        ("#!/bin/bash\necho lots > /logs/verifier/reward.txt\n", "[verifier-bad-reward]"),
    ],
)
def test_a_verifier_that_gives_no_reward_is_infrastructure(tmp_path, artifacts_root, test_sh, tag):
    _, task = _variant(tmp_path, test_sh=test_sh)

    attempt = run_attempt(task, variant="oracle", backend="docker")

    assert attempt.failure_reason_id == "NO_TESTS_COLLECTED"
    assert attempt.is_infra is True  # never counted against the agent
    assert attempt.failure_stage == "final_test"
    assert tag in attempt.error_text


def test_a_multi_metric_reward_is_kept_whole_with_each_test(artifacts_root, admin_client):
    _import()

    attempt = run_attempt(_task("py-wordfreq"), variant="nop", backend="docker")

    page = admin_client.get(f"/attempts/{attempt.public_id}/").content.decode()
    assert '<td><code>pass_fraction</code></td><td class="num">0.5</td>' in page
    assert "test_wordfreq::test_ignores_case" in page
    task_page = admin_client.get("/suites/harbor/tasks/py-wordfreq/").content.decode()
    assert "ab build-environments harbor --task py-wordfreq" in task_page
    assert "agentbench/env-dockerfile:" in task_page  # the last build: found or built

    assert attempt.test_results["REWARD"] == {
        "reward": "0",
        "tests_passed": "2",
        "tests_total": "4",
        "pass_fraction": "0.5",
    }
    tests = attempt.test_results["TESTS"]
    assert tests["test_wordfreq::test_ignores_case"] == "failed"
    assert tests["test_wordfreq::test_counts_words"] == "passed"
    verifier_logs = attempt_folder(attempt) / "logs" / "verifier"
    assert json.loads((verifier_logs / "reward.json").read_text())["tests_total"] == 4


def test_a_failing_build_is_infrastructure_with_the_log_tail(tmp_path, artifacts_root):
    broken = "FROM agentbench/py-runner:0.1.0\nRUN echo harbor-broken-step >&2 && exit 5\n"
    _, task = _variant(tmp_path, dockerfile=broken)

    attempt = run_attempt(task, variant="oracle", backend="docker")

    assert attempt.failure_reason_id == "SETUP_FAILED"
    assert attempt.is_infra is True
    assert attempt.failure_stage == "setup"
    names = list(attempt.stages.order_by("order").values_list("name", flat=True))
    assert names == ["environment_build"]  # nothing ran after it
    assert "[build-failed]" in attempt.error_text
    assert "harbor-broken-step" in (attempt_folder(attempt) / "environment_build.log").read_text()


def test_a_folder_changed_since_its_import_is_refused(tmp_path, artifacts_root):
    folder, task = _variant(tmp_path)
    (folder / "tests" / "test.sh").write_text("#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n")

    attempt = run_attempt(task, variant="nop", backend="docker")

    assert attempt.failure_reason_id == "SETUP_FAILED"
    assert "[task-changed]" in attempt.error_text


def test_a_task_over_a_limit_lowered_since_its_import_is_refused(
    tmp_path, artifacts_root, settings
):
    _, task = _variant(tmp_path)
    settings.SANDBOX_MAX_MEMORY_MB = 512  # the task asks for 1024

    attempt = run_attempt(task, variant="nop", backend="docker")

    assert attempt.failure_reason_id == "SETUP_FAILED"
    assert attempt.is_infra is True
    assert (
        "[resource-cap] the task's memory_mb: 1024 MB is over this installation's "
        "SANDBOX_MAX_MEMORY_MB (512 MB)" in attempt.error_text
    )
    names = list(attempt.stages.order_by("order").values_list("name", flat=True))
    assert names == ["environment_build"]  # nothing built, nothing ran


def _ab(*args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = os.environ | {
        "AB_VAR_DIR": str(tmp_path / "var"),
        "ARTIFACTS_ROOT": str(tmp_path / "artifacts"),
    }
    env.pop("DATABASE_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "benchsite.cli.main", *args],
        capture_output=True,
        text=True,
        cwd=EXAMPLES.parent.parent,
        env=env,
        timeout=1200,
    )


def test_validate_suite_runs_each_oracle_and_nop_and_prints_the_table(tmp_path):
    imported = _ab("import-tasks", str(EXAMPLES), tmp_path=tmp_path)
    assert imported.returncode == 0, imported.stdout + imported.stderr
    assert "created   harbor/go-median" in imported.stdout
    built = _ab("build-environments", "harbor", tmp_path=tmp_path)
    assert built.returncode == 0, built.stdout + built.stderr
    assert re.search(
        r"^py-wordfreq: (found built|built in [\d.]+s): agentbench/env-dockerfile:",
        built.stdout,
        re.MULTILINE,
    ), built.stdout
    assert "3 ready, 0 failed of 3 task(s)" in built.stdout

    out = _ab(
        "validate-suite", "harbor", "--variant", "oracle", "--backend", "docker", tmp_path=tmp_path
    )

    assert out.returncode == 0, out.stdout + out.stderr
    for task_id in ("go-median", "node-slugify", "py-wordfreq"):
        assert re.search(
            rf"^{task_id}\s+valid\s+success\s+TESTS_FAILED\b", out.stdout, re.MULTILINE
        ), out.stdout
    assert "3 valid, 0 invalid, 0 not buildable, 0 without a solution of 3 task(s)" in out.stdout
    with sqlite3.connect(tmp_path / "var" / "db.sqlite3") as db:
        stored = db.execute(
            "SELECT t.task_id, g.status, g.gold_grade, g.empty_grade FROM "
            "tasks_app_goldvalidation g JOIN tasks_app_task t ON t.id = g.task_id "
            "WHERE g.backend = 'docker' ORDER BY t.task_id"
        ).fetchall()
    assert stored == [
        ("go-median", "valid", "FULL", "NO"),
        ("node-slugify", "valid", "FULL", "NO"),
        ("py-wordfreq", "valid", "FULL", "NO"),
    ]


def test_a_task_naming_a_docker_image_runs_on_it(tmp_path, artifacts_root):
    """``[environment] docker_image`` instead of a Dockerfile: the image (the runner's here,
    whose WORKDIR is /workspace) with the harness's layer, graded the same way."""
    folder = tmp_path / "by-image" / "touch-done"
    (folder / "tests").mkdir(parents=True)
    (folder / "solution").mkdir()
    (folder / "instruction.md").write_text("Create an empty file named `done` in /workspace.\n")
    (folder / "task.toml").write_text(
        'version = "1.0"\n[environment]\ndocker_image = "agentbench/py-runner:0.1.0"\n'
        "allow_internet = false\n"
    )
    (folder / "tests" / "test.sh").write_text(
        "#!/bin/bash\nif [ -f /workspace/done ]; then echo 1; else echo 0; fi"
        " > /logs/verifier/reward.txt\n"
    )
    (folder / "solution" / "solve.sh").write_text("#!/bin/bash\ntouch /workspace/done\n")
    _import(folder.parent)
    task = _task("touch-done", suite="by-image")

    solved = run_attempt(task, variant="oracle", backend="docker")
    untouched = run_attempt(task, variant="nop", backend="docker")

    assert solved.failure_reason_id is None, solved.error_text
    assert (
        json.loads((attempt_folder(solved) / "run.json").read_text())["sandbox"]["workdir"]
        == "/workspace"
    )
    assert "done" in solved.final_patch
    assert untouched.failure_reason_id == "TESTS_FAILED"


@pytest.mark.bwrap
def test_on_bubblewrap_without_a_disk_quota_it_says_why_it_cannot_run(settings, artifacts_root):
    settings.SANDBOX_DISK_MB = 0  # no quota: each bubblewrap command would get a fresh /tmp
    _import()

    attempt = run_attempt(_task("py-wordfreq"), variant="oracle", backend="bwrap")

    assert attempt.failure_reason_id == "SANDBOX_ERROR"
    assert attempt.is_infra is True
    assert "[no-disk-quota]" in attempt.error_text
