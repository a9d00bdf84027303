# ruff: noqa: F811  (pytest fixtures imported from tests.pipeline_fixtures)
"""Harbor / Terminal-Bench task folders end to end: imported by ``ab import-tasks``, their
Dockerfile environments built by the engine (once: keyed by content), run with the oracle
(``solution/solve.sh``) and the no-op agent, graded by the reward their real verifiers write.

The three example tasks (examples/harbor/: Python, Go and Node, toolchains installed from
Debian's archive in their Dockerfiles) share one xdist group: their images are built once
per machine and found by every later test.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runs.models import AttemptStatus
from tests.pipeline_fixtures import (
    artifacts_root,  # noqa: F401  (fixture)
    attempt_folder,
    run_attempt,
)

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "harbor"

pytestmark = [pytest.mark.django_db, pytest.mark.docker, pytest.mark.xdist_group("harbor-builds")]


def _import(directory: Path = EXAMPLES):
    from tasks_app.services import tasks_import
    from tasks_app.spec import PathRules

    return tasks_import(directory=directory, rules=PathRules.local(directory))


def _task(task_id: str, suite: str = "harbor"):
    from tasks_app.models import Task

    return Task.objects.select_related("suite").get(suite__name=suite, task_id=task_id)


@pytest.mark.parametrize("task_id", ["py-wordfreq", "go-median", "node-slugify"])
def test_it_solves_each_example_with_its_oracle_and_fails_it_with_nop(task_id, artifacts_root):
    _import()
    task = _task(task_id)

    solved = run_attempt(task, variant="oracle", backend="docker")

    assert solved.status == AttemptStatus.FINISHED
    assert solved.failure_reason_id is None, solved.error_text
    stages = list(solved.stages.order_by("order").values_list("name", flat=True))
    assert stages == ["environment_build", "export_workdir", "agent_run", "final_test"]
    folder = attempt_folder(solved)
    assert (folder / "logs" / "verifier").is_dir()
    assert solved.final_patch  # what solve.sh changed in the workdir
    assert solved.grade == "FULL"

    untouched = run_attempt(task, variant="nop", backend="docker")

    assert untouched.failure_reason_id == "TESTS_FAILED", untouched.error_text
    assert untouched.is_infra is False
    assert untouched.grade == "NO"
