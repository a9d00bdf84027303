"""A task.yaml whose ``environment.dockerfile`` names a build context: checked at import,
built by the engine before the sandbox (a no-op the second time) and run on that image on both
backends (bubblewrap from the image's tree)."""

from __future__ import annotations

import re
import shutil

import pytest

from runs.models import AttemptStatus
from sandbox.environments.dockerfile_store import folder_for
from tasks_app.spec import PathRules, TaskSpecError, load_task_file
from tests.conftest import TASKS_DIR
from tests.support.pipeline_fixtures import (
    TOY_COMMIT,
    attempt_folder,
    get_task,
    import_tasks,
    run_attempt,
    run_json,
    write_task,
)

BUNDLE = TASKS_DIR.parent / "examples" / "toy_repo.bundle"
SOLUTION = TASKS_DIR / "custom-dev" / "toy_fail_pytest" / "solution.patch"


def _task_yaml(tmp_path, environment: str):
    (tmp_path / "sol.patch").write_text(SOLUTION.read_text())
    return write_task(
        tmp_path / "tasks",
        "toy_in_dockerfile",
        f"""\
        repo: {{url: {BUNDLE}, commit: {TOY_COMMIT}}}
        environment: {environment}
        setup: {{network: false, commands: ["cat /etc/agentbench-dockerfile-marker"]}}
        run: {{command: PYTHONPATH=src python -m pytest -q tests/test_calc.py}}
        validation: {{expected_exit_codes: [1]}}
        reference_solution: ../../sol.patch
        """,
        suite="dockerfile-env",
    )


def _context(tmp_path):
    folder = tmp_path / "tasks" / "toy_in_dockerfile" / "env"
    folder.mkdir(parents=True)
    (folder / "Dockerfile").write_text(
        "FROM agentbench/py-runner:0.1.0\nUSER root\n"
        "RUN echo built-from-the-dockerfile > /etc/agentbench-dockerfile-marker\n"
    )
    return folder


def test_it_refuses_both_sources_or_a_folder_without_a_dockerfile(tmp_path):
    rules = PathRules.local(tmp_path, [BUNDLE.parent])
    both = _task_yaml(tmp_path, "{docker_image: agentbench/py-runner:0.1.0, dockerfile: env}")
    (tmp_path / "tasks" / "toy_in_dockerfile" / "env").mkdir()

    with pytest.raises(TaskSpecError) as caught:
        load_task_file(both, rules=rules)
    assert [p.field for p in caught.value.problems] == ["environment"]
    assert "not both" in str(caught.value)

    empty = _task_yaml(tmp_path, "{dockerfile: env}")
    with pytest.raises(TaskSpecError) as caught:
        load_task_file(empty, rules=rules)
    (problem,) = caught.value.problems
    assert problem.field == "environment.dockerfile"
    assert "no folder holding a Dockerfile" in problem.message

    outside = _task_yaml(tmp_path, "{dockerfile: /etc}")
    with pytest.raises(TaskSpecError) as caught:
        load_task_file(outside, rules=rules)
    assert "is outside" in str(caught.value)


@pytest.mark.django_db
@pytest.mark.docker
@pytest.mark.xdist_group("harbor-builds")
def test_it_builds_the_context_and_runs_on_its_image(tmp_path, backend, artifacts_root):
    _task_yaml(tmp_path, "{dockerfile: env, build_timeout_sec: 300}")
    _context(tmp_path)
    import_tasks(tmp_path / "tasks", also=[BUNDLE.parent, tmp_path])

    first = run_attempt(
        get_task("toy_in_dockerfile", "dockerfile-env"), variant="oracle", backend=backend
    )
    again = run_attempt(
        get_task("toy_in_dockerfile", "dockerfile-env"), variant="oracle", backend=backend
    )

    for attempt in (first, again):
        assert attempt.status == AttemptStatus.FINISHED
        assert attempt.failure_reason_id is None, attempt.error_text
        names = list(attempt.stages.order_by("order").values_list("name", flat=True))
        assert names[0] == "environment_build"
        setup = (attempt_folder(attempt) / "logs" / "setup.txt").read_text()
        assert "built-from-the-dockerfile" in setup  # the command ran on the built image
    assert run_json(again)["sandbox"]["environment"]["reused"] is True
    assert (attempt_folder(first) / "environment_build.log").is_file()

    # The cache's folder removed but the engine's image kept: found built, and the attempt's
    # log says where its build's log went instead of having none.
    key = run_json(again)["sandbox"]["environment"]["dockerfile_key"]
    folder = folder_for(key)
    aside = folder.with_name(folder.name + ".aside")
    folder.rename(aside)
    try:
        third = run_attempt(
            get_task("toy_in_dockerfile", "dockerfile-env"), variant="oracle", backend=backend
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)  # what the third attempt may have recorded
        aside.rename(folder)
    assert third.failure_reason_id is None, third.error_text
    log = (attempt_folder(third) / "environment_build.log").read_text()
    assert "was found built in the engine" in log and "no longer in the cache" in log, log


@pytest.mark.django_db
@pytest.mark.docker
@pytest.mark.xdist_group("harbor-builds")
def test_validate_suite_oracle_runs_the_solution_and_the_nop_on_a_dockerfile_task(
    tmp_path, artifacts_root, capsys
):
    """``ab validate-suite --variant oracle`` on a task.yaml suite whose task is built from a
    Dockerfile: the reference solution passes, the no-op leaves the tests failing, and the
    summary table is the one every source ends with."""
    from benchsite.cli.main import main
    from tasks_app.models import GoldValidation

    _task_yaml(tmp_path, "{dockerfile: env, build_timeout_sec: 300}")
    _context(tmp_path)
    import_tasks(tmp_path / "tasks", also=[BUNDLE.parent, tmp_path])

    code = main(["validate-suite", "dockerfile-env", "--variant", "oracle", "--backend", "docker"])

    out = capsys.readouterr().out
    assert code == 0, out
    assert re.search(r"^toy_in_dockerfile\s+valid\s+success\s+TESTS_FAILED\b", out, re.M), out
    assert re.search(r"^valid\s+1$", out, re.M) and re.search(r"^no solution\s+0$", out, re.M)
    assert "of 1 task(s) on docker; leaderboards leave the invalid ones out" in out
    stored = GoldValidation.objects.get(task__task_id="toy_in_dockerfile", backend="docker")
    assert stored.status == "valid"
