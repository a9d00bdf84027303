"""``ab import-swebench DATASET --dockerfiles DIR``: each instance's folder (its Dockerfile's
build context, keyed by its content) and its own eval.sh are attached to its task; a missing
folder, Dockerfile or eval script is refused naming the instance and the file, and nothing is
stored. No engine needed: building is the pipeline's (tests/runs/pipeline/)."""

from __future__ import annotations

import json

import pytest

from sandbox.environments import dockerfile
from tasks_app.models import Task
from tasks_app.swebench.errors import SwebenchInputError
from tasks_app.swebench.importer import swebench_import
from tasks_app.swebench.task_folders import DOCKERFILE_FIELD, EVAL_SCRIPT_FIELD
from tests.support.swebench_task_folders import INSTANCE, make_dataset

pytestmark = pytest.mark.django_db


def test_each_instance_gets_its_folder_its_key_and_its_own_eval_script(tmp_path):
    dataset, folders, _ = make_dataset(tmp_path)

    report = swebench_import(source=dataset, suite_name="own-dockerfiles", dockerfiles=folders)

    assert report.created == [INSTANCE]
    task = Task.objects.get(suite__name="own-dockerfiles", task_id=INSTANCE)
    context = folders / INSTANCE
    key = dockerfile.context_key(context, dockerfile_text=dockerfile.dockerfile_text(context))
    assert task.spec[DOCKERFILE_FIELD] == {"context": str(context.resolve()), "key": key}
    assert task.spec[EVAL_SCRIPT_FIELD] == (context / "eval.sh").read_text()
    assert task.docker_image == dockerfile.tag_for(key)
    assert "dockerfile" in task.labels

    # A changed file of the context is a new revision (its key is in the hashed spec).
    (context / "Dockerfile").write_text((context / "Dockerfile").read_text() + "ENV X=1\n")
    again = swebench_import(source=dataset, suite_name="own-dockerfiles", dockerfiles=folders)
    assert again.updated == [INSTANCE]
    task.refresh_from_db()
    assert task.revision == 2 and task.spec[DOCKERFILE_FIELD]["key"] != key


@pytest.mark.parametrize(
    ("remove", "field", "said"),
    [
        ("", "--dockerfiles", "no folder"),
        ("Dockerfile", "Dockerfile", "no Dockerfile at"),
        ("eval.sh", "eval.sh", "no eval.sh at"),
    ],
)
def test_a_missing_folder_dockerfile_or_eval_script_is_refused_by_name(
    tmp_path, remove, field, said
):
    dataset, folders, _ = make_dataset(tmp_path)
    context = folders / INSTANCE
    if remove:
        (context / remove).unlink()
    else:
        context.rename(folders / "elsewhere")

    with pytest.raises(SwebenchInputError) as caught:
        swebench_import(source=dataset, suite_name="refused", dockerfiles=folders)

    (problem,) = caught.value.problems
    assert INSTANCE in problem.where and problem.field == field
    assert said in problem.message
    if remove:
        assert str(context / remove) in problem.message  # the file, by its path
    assert not Task.objects.filter(suite__name="refused").exists()


def test_the_rows_eval_script_field_serves_when_the_folder_has_none(tmp_path):
    dataset, folders, row = make_dataset(tmp_path)
    script = (folders / INSTANCE / "eval.sh").read_text()
    (folders / INSTANCE / "eval.sh").unlink()
    dataset.write_text(json.dumps(row | {"eval_script": script}) + "\n")

    swebench_import(source=dataset, suite_name="field-script", dockerfiles=folders)

    task = Task.objects.get(suite__name="field-script", task_id=INSTANCE)
    assert task.spec[EVAL_SCRIPT_FIELD] == script


def test_a_row_naming_a_build_context_itself_is_refused(tmp_path):
    """Without --dockerfiles a row may not name a host folder for the engine to build."""
    dataset, _, row = make_dataset(tmp_path)
    planted = {"context": "/etc", "key": "0" * 64}
    dataset.write_text(json.dumps(row | {DOCKERFILE_FIELD: planted}) + "\n")

    with pytest.raises(SwebenchInputError) as caught:
        swebench_import(source=dataset, suite_name="planted")

    (problem,) = caught.value.problems
    assert problem.field == DOCKERFILE_FIELD and "--dockerfiles" in problem.message
    assert not Task.objects.filter(suite__name="planted").exists()


def test_an_unknown_repository_without_a_dockerfile_is_still_refused(tmp_path):
    """acme/calc is graded as a pytest repository only because it brings its own image."""
    dataset, _, _ = make_dataset(tmp_path)

    with pytest.raises(SwebenchInputError) as caught:
        swebench_import(source=dataset, suite_name="no-image")

    assert [p.field for p in caught.value.problems] == ["repo"]
