"""SWE-bench instances through the pipeline: the repository comes out of the instance image
(no clone), the final tests are the instance's eval script (reset the test files, apply the
test patch, the tests between the markers, reset), and the output is graded."""

from __future__ import annotations

import subprocess
import uuid

import docker
import pytest

from runs.models import AttemptStatus
from runs.pipeline import swebench
from runs.pipeline.adhoc import attempt_create_adhoc, model_config_for_variant
from runs.pipeline.execute import attempt_execute
from runs.pipeline.plan import TaskPlan
from runs.pipeline.stages import CommandRun, StageResult
from runs.pipeline.swebench import CUT_NOTICE
from runs.taxonomy import Reason, Stage
from tasks_app.models import Suite, Task, TaskSource
from tasks_app.swebench.eval_script import END_MARKER, START_MARKER, eval_script
from tests.conftest import REPO_ROOT, TASKS_DIR
from tests.support.pipeline_fixtures import (
    TOY_COMMIT,
    attempt_folder,
    leftover_containers,
    run_json,
)

pytestmark = [pytest.mark.django_db, pytest.mark.docker]

SOLUTION = (TASKS_DIR / "custom-dev" / "toy_fail_pytest" / "solution.patch").read_text()
TEST_PATCH = """\
diff --git a/tests/test_extra.py b/tests/test_extra.py
new file mode 100644
--- /dev/null
+++ b/tests/test_extra.py
@@ -0,0 +1,5 @@
+from toy.calc import mean
+
+
+def test_mean_is_exact():
+    assert mean([1, 3, 4]) == 8 / 3
"""
FAIL_TO_PASS = [
    "tests/test_extra.py::test_mean_is_exact",
    "tests/test_calc.py::test_mean_of_odd_total",
]
PASS_TO_PASS = ["tests/test_calc.py::test_total", "tests/test_calc.py::test_mean_of_even_total"]


@pytest.fixture(scope="module")
def instance_image(tmp_path_factory) -> str:
    """A tiny SWE-bench style instance image: the runner image plus the toy repo at /testbed."""
    context = tmp_path_factory.mktemp("instance")
    testbed = context / "testbed"
    subprocess.run(
        ["git", "clone", "-q", str(REPO_ROOT / "examples" / "toy_repo.bundle"), str(testbed)],
        check=True,
    )
    subprocess.run(["git", "-C", str(testbed), "checkout", "-q", TOY_COMMIT], check=True)
    (context / "Dockerfile").write_text(
        "FROM agentbench/py-runner:0.1.0\nCOPY --chown=1000:1000 testbed /testbed\n"
    )
    tag = f"agentbench-test/swe-toy:{uuid.uuid4().hex[:10]}"
    client = docker.from_env()
    # rm + forcerm: no intermediate container stays behind, even when a step fails.
    client.images.build(
        path=str(context), tag=tag, labels={"agentbench.test": "pipeline"}, rm=True, forcerm=True
    )
    yield tag
    client.images.remove(tag, force=True)
    client.close()


def instance_task(image: str, *, gold_patch: str = SOLUTION) -> Task:
    suite, _ = Suite.objects.get_or_create(name="swe-toy", defaults={"source": "swebench"})
    return Task.objects.create(
        suite=suite,
        task_id="toy__toy-1",
        source=TaskSource.SWEBENCH,
        spec={"instance_id": "toy__toy-1", "repo": "toy/toy"},
        repo_url="https://github.com/toy/toy",
        repo_commit=TOY_COMMIT,
        docker_image=image,
        workdir="/testbed",
        timeout_sec=60,
        setup_network=False,
        test_command="PYTHONPATH=src python -m pytest -rA tests/test_calc.py tests/test_extra.py",
        problem_statement="mean() truncates",
        gold_patch=gold_patch,
        test_patch=TEST_PATCH,
        fail_to_pass=FAIL_TO_PASS,
        pass_to_pass=PASS_TO_PASS,
    )


def run(task: Task, variant: str, **config):
    config_obj = model_config_for_variant(variant, **config)
    attempt = attempt_create_adhoc(task=task, model_config=config_obj)
    return attempt_execute(attempt, backend="docker")


def test_the_gold_patch_resolves_the_instance(instance_image, settings, tmp_path):
    settings.ARTIFACTS_ROOT = tmp_path

    attempt = run(instance_task(instance_image), "oracle")

    assert attempt.status == AttemptStatus.FINISHED
    assert attempt.failure_reason_id is None, attempt.error_text
    assert attempt.grade == "FULL"
    assert sorted(attempt.test_results["FAIL_TO_PASS"]["success"]) == sorted(FAIL_TO_PASS)
    assert attempt.test_results["PASS_TO_PASS"]["failure"] == []
    assert list(attempt.stages.order_by("order").values_list("name", flat=True)) == [
        "export_testbed",
        "agent_run",
        "final_test",
    ]
    # The agent's patch is its own change: the instance's test patch is not part of it.
    assert attempt.files_touched == ["src/toy/calc.py"]
    assert "test_extra" not in attempt.final_patch
    # The final tests ran the eval script, kept beside the logs: the test patch applied inside
    # the sandbox, the tests between the markers, and the new test file reset afterwards.
    folder = attempt_folder(attempt)
    task = attempt.task
    assert (folder / "eval.sh").read_text() == eval_script(
        repo="toy/toy",
        version="",
        base_commit=TOY_COMMIT,
        test_patch=TEST_PATCH,
        test_command=task.test_command,
    )
    log = (folder / "logs" / "final_test.txt").read_text()
    assert "Applied patch tests/test_extra.py cleanly." in log
    section = log.split(START_MARKER)[1].split(END_MARKER)[0]
    assert "PASSED tests/test_extra.py::test_mean_is_exact" in section
    assert log.index("+ git apply -v -") < log.index(START_MARKER) < log.index(END_MARKER)
    # The base commit is a root here (as in the shallow offline images): "git show" shows its
    # header, not the whole tree as added.
    assert "+ git show\ncommit " in log and "diff --git a/README.md" not in log
    record = run_json(attempt)
    assert record["sandbox"]["workspace_path"] == "/testbed"
    assert record["outcome"]["grade"] == "FULL"
    assert not (attempt_folder(attempt) / "workspace").exists()
    assert leftover_containers(attempt) == []


def test_an_unchanged_repository_is_not_resolved(instance_image, settings, tmp_path):
    settings.ARTIFACTS_ROOT = tmp_path

    attempt = run(instance_task(instance_image), "nop")

    assert attempt.failure_reason_id in ("TESTS_FAILED", "AGENT_GAVE_UP")
    assert attempt.grade == "NO"
    assert attempt.test_results["FAIL_TO_PASS"]["success"] == []
    assert sorted(attempt.test_results["PASS_TO_PASS"]["success"]) == sorted(PASS_TO_PASS)
    assert attempt.is_infra is False


def test_a_log_over_the_output_cap_keeps_its_test_section_whole(instance_image, settings, tmp_path):
    settings.ARTIFACTS_ROOT = tmp_path
    # Both caps: SWE-bench attempts may get a larger one of their own (SWEBENCH_OUTPUT_CAP_BYTES).
    settings.SANDBOX_OUTPUT_CAP_BYTES = settings.SWEBENCH_OUTPUT_CAP_BYTES = 2500

    attempt = run(instance_task(instance_image), "oracle")

    stage = attempt.stages.get(name="final_test")
    log = (attempt_folder(attempt) / "logs" / "final_test.txt").read_text()
    assert CUT_NOTICE in log and stage.output_truncated
    assert log.index(CUT_NOTICE) < log.index(START_MARKER) < log.index(END_MARKER)
    assert "+ git apply -v -" not in log  # in the middle part that was cut
    assert attempt.grade == "FULL"


def test_a_test_patch_that_does_not_apply_is_named_and_the_tests_still_run(
    instance_image, settings, tmp_path
):
    settings.ARTIFACTS_ROOT = tmp_path
    # The "fix" creates the file the test patch adds: git apply refuses it, and, as in the
    # official script, the tests run anyway, on the agent's own file.
    clash = SOLUTION + (
        "diff --git a/tests/test_extra.py b/tests/test_extra.py\n"
        "new file mode 100644\n"
        "--- /dev/null\n"
        "+++ b/tests/test_extra.py\n"
        "@@ -0,0 +1,2 @@\n"
        "+def test_mean_is_exact():\n"
        "+    pass\n"
    )

    attempt = run(instance_task(instance_image, gold_patch=clash), "oracle")

    assert attempt.failure_reason_id == "TESTS_FAILED"
    assert "the instance's test patch does not apply" in attempt.error_text
    assert attempt.grade == "FULL"  # graded as the official harness grades this output
    assert (
        "already exists in working directory"
        in (attempt_folder(attempt) / "logs" / "final_test.txt").read_text()
    )


def test_a_missing_instance_image_is_a_sandbox_error(settings, tmp_path):
    settings.ARTIFACTS_ROOT = tmp_path

    attempt = run(instance_task("agentbench-test/absent:0"), "oracle")

    assert attempt.failure_reason_id == "SANDBOX_ERROR"
    assert attempt.failure_stage == "git_clone"
    assert attempt.is_infra is True


def test_output_cut_before_the_end_marker_is_not_resolved_and_says_why():
    plan = TaskPlan(
        task_id="toy__toy-1",
        repo_url="",
        commit=TOY_COMMIT,
        image="",
        workdir="/testbed",
        workspace_path="/testbed",
        test_command="pytest -rA",
        timeout_sec=60,
        is_swebench=True,
        fail_to_pass=("tests/test_extra.py::test_mean_is_exact",),
        swebench_repo="toy/toy",
    )
    cut = f"+ : '{START_MARKER}'\nPASSED tests/test_extra.py::test_mean_is_exact\n"
    final = StageResult("final_test", Stage.FINAL_TEST)
    final.runs.append(CommandRun("bash eval.sh", 0, cut, "", 1.0, truncated=True))

    grading = swebench.grade(final, plan, agent_patch="x")

    assert (grading.grade, grading.resolved) == ("NO", False)
    assert final.reason is Reason.TESTS_FAILED
    assert "no test output between the markers" in final.note
    assert "SANDBOX_OUTPUT_CAP_BYTES" in final.note
