"""SWE-bench instances that bring their own Dockerfile and eval.sh (``ab import-swebench
--dockerfiles``), end to end on the real engine: the instance's folder is built (keyed by its
content) before the sandbox, the testbed comes out of that image (on bubblewrap out of its
tree), the final tests run the instance's own eval script, and the official pytest parser
grades its output. ``ab validate-suite --variant oracle`` builds the instance itself and finds
gold FULL and the empty patch NO.

The dataset (tests/support/swebench_task_folders.py) is built FROM the runner image with its
repository COPYed from the context: the builds need no network. Its image is removed after."""

from __future__ import annotations

import re
import uuid

import pytest

from runs.models import AttemptStatus
from sandbox.environments.dockerfile_store import IMAGE_REPOSITORY
from tasks_app.swebench.importer import swebench_import
from tests.support.pipeline_fixtures import attempt_folder, get_task, run_attempt, run_json
from tests.support.swebench_task_folders import INSTANCE, make_dataset, remove_images

pytestmark = [pytest.mark.django_db, pytest.mark.docker, pytest.mark.xdist_group("harbor-builds")]


@pytest.fixture
def imported(tmp_path):
    """(the suite's name, the instance's folder) of a freshly imported one-instance suite."""
    dataset, folders, _ = make_dataset(tmp_path)
    suite = f"own-dockerfile-{uuid.uuid4().hex[:8]}"
    swebench_import(source=dataset, suite_name=suite, dockerfiles=folders)
    yield suite, folders / INSTANCE
    remove_images(folders)


def test_validate_suite_builds_the_instance_and_finds_gold_full_and_nop_no(
    imported, artifacts_root, capsys
):
    from benchsite.cli.main import main
    from tasks_app.models import GoldValidation

    suite, _ = imported

    code = main(["validate-suite", suite, "--variant", "oracle", "--backend", "docker"])

    out = capsys.readouterr().out
    assert code == 0, out
    assert f"build [1/1] {INSTANCE}: built: Dockerfile image {IMAGE_REPOSITORY}:" in out, out
    assert re.search(r"^valid\s+1$", out, re.M), out
    stored = GoldValidation.objects.get(task__task_id=INSTANCE, backend="docker")
    assert (stored.status, stored.gold_grade, stored.empty_grade) == ("valid", "FULL", "NO")


@pytest.mark.bwrap
def test_on_bubblewrap_the_gold_patch_resolves_it_from_the_images_tree(imported, artifacts_root):
    suite, context = imported

    attempt = run_attempt(get_task(INSTANCE, suite), variant="oracle", backend="bwrap")

    assert attempt.status == AttemptStatus.FINISHED
    assert attempt.failure_reason_id is None, attempt.error_text
    assert attempt.grade == "FULL"
    folder = attempt_folder(attempt)
    # The instance's own script ran, not one made from a specification.
    assert (folder / "eval.sh").read_text() == (context / "eval.sh").read_text()
    names = list(attempt.stages.order_by("order").values_list("name", flat=True))
    assert names[:2] == ["environment_build", "export_testbed"], names
    info = run_json(attempt)["sandbox"]
    assert info["backend"] == "bwrap"
    assert info["environment"]["image"].startswith(f"{IMAGE_REPOSITORY}:")
    assert "PASSED tests/test_calc.py::test_sub" in (folder / "logs" / "final_test.txt").read_text()


def test_a_folder_changed_since_its_import_is_refused_before_any_build(imported, artifacts_root):
    suite, context = imported
    (context / "eval.sh").write_text("#!/bin/bash\necho not what was imported\n")

    attempt = run_attempt(get_task(INSTANCE, suite), variant="oracle", backend="docker")

    assert attempt.failure_reason_id == "SETUP_FAILED"
    names = list(attempt.stages.values_list("name", flat=True))
    assert names == ["environment_build"], names
    assert "[task-changed]" in attempt.error_text and str(context) in attempt.error_text


def test_ab_swebench_build_builds_the_instances_own_dockerfile(imported, capsys):
    """``ab swebench build`` builds what a suite needs ahead of a run: for an instance with
    its own Dockerfile, that Dockerfile (before: an offline build from SWE-bench's specs,
    which know nothing of the instance's repository)."""
    from benchsite.cli.main import main

    suite, _ = imported
    for expected in ("built", "cached"):
        code = main(["swebench", "build", suite, "--backend", "docker"])
        out = capsys.readouterr().out
        assert code == 0, out
        assert f"[1/1] {INSTANCE}: {expected}: Dockerfile image {IMAGE_REPOSITORY}:" in out, out
        assert "1 of 1 instance(s) with their own Dockerfile ready" in out
