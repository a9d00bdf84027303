"""``ab import-swebench DATASET --dockerfiles DIR`` on the command line: the instances import
with their folders, and a missing eval script is printed naming the instance and the file,
with nothing imported."""

from __future__ import annotations

import pytest

from tasks_app.models import Task
from tests.support.ab_cli import ab_main
from tests.support.swebench_task_folders import INSTANCE, make_dataset

pytestmark = pytest.mark.django_db


def test_it_imports_the_dataset_with_its_instance_folders(tmp_path):
    dataset, folders, _ = make_dataset(tmp_path)

    done = ab_main(
        "import-swebench", str(dataset), "--suite", "cli-own", "--dockerfiles", str(folders)
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert f"created   {INSTANCE}" in done.stdout
    task = Task.objects.get(suite__name="cli-own", task_id=INSTANCE)
    assert task.spec["eval_script"] == (folders / INSTANCE / "eval.sh").read_text()


def test_a_missing_eval_script_is_printed_by_instance_and_file(tmp_path):
    dataset, folders, _ = make_dataset(tmp_path)
    (folders / INSTANCE / "eval.sh").unlink()

    done = ab_main(
        "import-swebench", str(dataset), "--suite", "cli-bad", "--dockerfiles", str(folders)
    )

    assert done.returncode != 0
    shown = done.stdout + done.stderr
    assert INSTANCE in shown and str(folders / INSTANCE / "eval.sh") in shown, shown
    assert "nothing imported" in shown
    assert not Task.objects.filter(suite__name="cli-bad").exists()
