"""The first `ab` commands, through the CLI's main function in-process (tests/support/ab_cli.py) on
the test's database; the console script's own start is tests/benchsite/cli/test_cli_startup.py's."""

from __future__ import annotations

import pytest

from tests.conftest import TASKS_DIR
from tests.support.ab_cli import ab_main

pytestmark = pytest.mark.django_db


def test_help_lists_every_command(tmp_path):
    out = ab_main("--help")
    assert out.returncode == 0
    for command in ("list-tasks", "import-tasks", "check-tasks", "serve"):
        assert command in out.stdout


def test_it_lists_the_tasks_of_a_suite(tmp_path):
    out = ab_main("list-tasks", "custom-dev", "--tasks", str(TASKS_DIR))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert any(line.startswith("toy_fail_pytest") for line in lines)
    assert any(line.startswith("toy_flaky") and "flaky" in line for line in lines)


def test_it_says_when_a_suite_has_no_tasks(tmp_path):
    out = ab_main("list-tasks", "nope", "--tasks", str(TASKS_DIR))
    assert out.returncode == 1
    assert "no tasks in suite 'nope'" in out.stderr


def test_check_tasks_names_each_broken_file_and_field(tmp_path):
    bad = tmp_path / "bad"
    for name, text in {
        "a": 'task_spec_version: "1.0"\nid: a\nsuite: s\nrepo: {url: x}\n'
        "environment: {docker_image: i}\nrun: {command: t}\n",
        "b": 'task_spec_version: "9"\nid: b\n',
        "c": 'task_spec_version: "1.0"\nid: c\nsuite: s\nrepo: {url: x, commit: y}\n'
        "environment: {docker_image: i, timeout_sec: soon}\nrun: {command: t}\n",
    }.items():
        (bad / name).mkdir(parents=True)
        (bad / name / "task.yaml").write_text(text)

    out = ab_main("check-tasks", str(bad))

    assert out.returncode == 1
    lines = out.stdout.splitlines()
    assert len(lines) == 3
    assert f"{bad}/a/task.yaml:4: repo.commit: required field is missing" in lines
    assert any(line.startswith(f"{bad}/b/task.yaml:1: task_spec_version:") for line in lines)
    assert any(line.startswith(f"{bad}/c/task.yaml:5: environment.timeout_sec:") for line in lines)


def test_check_tasks_passes_on_the_examples(tmp_path):
    out = ab_main("check-tasks", str(TASKS_DIR))
    assert out.returncode == 0, out.stdout
    assert "OK" in out.stdout


def test_import_tasks_is_idempotent(tmp_path):
    first = ab_main("import-tasks", str(TASKS_DIR))
    assert first.returncode == 0, first.stderr
    assert "created 7" in first.stdout
    second = ab_main("import-tasks", str(TASKS_DIR))
    assert second.returncode == 0
    assert "created 0, updated 0, unchanged 7" in second.stdout
