from __future__ import annotations

from pathlib import Path

import pytest

from tasks_app.spec import PathRules, TaskSpecError, load_task_dir, load_task_file
from tests.conftest import REPO_ROOT, TASKS_DIR

GOOD = """\
task_spec_version: "1.0"
id: t1
suite: s1
repo:
  url: repo.bundle
  commit: abc123
environment:
  docker_image: img:1
  workdir: /workspace/repo
  timeout_sec: 30
setup:
  commands: ["echo hi"]
run:
  command: python -m pytest -q
labels: [toy]
"""


def write(tmp_path: Path, text: str, name: str = "t1") -> Path:
    path = tmp_path / name / "task.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def problems_of(path: Path) -> list[str]:
    with pytest.raises(TaskSpecError) as info:
        load_task_file(path)
    return [str(p) for p in info.value.problems]


def test_it_loads_the_example_toy_task():
    task = load_task_file(TASKS_DIR / "custom-dev/toy_fail_pytest/task.yaml")
    assert task.spec.id == "toy_fail_pytest"
    assert task.spec.suite == "custom-dev"
    assert task.repo_url == str(REPO_ROOT / "examples/toy_repo.bundle")
    assert task.spec.environment.timeout_sec == 60
    assert "return total(values) / len(values)" in task.reference_patch


def test_it_resolves_a_relative_repo_url_against_the_task_file(tmp_path):
    task = load_task_file(
        write(tmp_path, GOOD.replace("repo.bundle", "../repo")), rules=PathRules.local(tmp_path)
    )
    assert task.repo_url == str((tmp_path / "repo").resolve())


@pytest.mark.parametrize(
    "url", ["https://github.com/o/r.git", "ssh://git@example.org/o/r.git", "git@github.com:o/r.git"]
)
def test_it_keeps_remote_urls(tmp_path, url):
    task = load_task_file(write(tmp_path, GOOD.replace("repo.bundle", url)))
    assert task.repo_url == url


@pytest.mark.parametrize("url", ["file:///srv/repo", "/srv/repo"])
def test_it_keeps_a_file_url_or_an_absolute_path_inside_an_allowed_folder(tmp_path, url):
    rules = PathRules.local(tmp_path, extra=["/srv"])
    task = load_task_file(write(tmp_path, GOOD.replace("repo.bundle", url)), rules=rules)
    assert task.repo_url == url


def test_it_accepts_an_unquoted_version(tmp_path):
    task = load_task_file(write(tmp_path, GOOD.replace('"1.0"', "1.0")))
    assert task.spec.task_spec_version == "1.0"


def test_it_names_file_field_and_line_of_a_missing_field(tmp_path):
    path = write(tmp_path, GOOD.replace("  commit: abc123\n", ""))
    assert problems_of(path) == [f"{path}:4: repo.commit: required field is missing"]


def test_it_names_an_unknown_key(tmp_path):
    path = write(tmp_path, GOOD + "colour: blue\n")
    assert problems_of(path) == [f"{path}:16: colour: unknown key"]


def test_it_names_a_wrong_type_without_coercing(tmp_path):
    path = write(tmp_path, GOOD.replace("timeout_sec: 30", 'timeout_sec: "30"'))
    (problem,) = problems_of(path)
    assert problem.startswith(f"{path}:10: environment.timeout_sec: ")
    assert "integer" in problem


def test_it_names_a_bad_list_item(tmp_path):
    path = write(tmp_path, GOOD.replace("labels: [toy]", "labels: [toy, 3]"))
    (problem,) = problems_of(path)
    assert problem.startswith(f"{path}:15: labels[1]: ")


def test_it_rejects_an_unsupported_version(tmp_path):
    path = write(tmp_path, GOOD.replace('"1.0"', '"2.0"'))
    (problem,) = problems_of(path)
    assert "task_spec_version" in problem and "unsupported version '2.0'" in problem


def test_it_rejects_yaml_that_is_not_a_mapping(tmp_path):
    path = write(tmp_path, "- just\n- a list\n")
    assert problems_of(path) == [f"{path}: (file): expected a mapping at the top level"]


def test_it_reports_invalid_yaml_with_its_line(tmp_path):
    path = write(tmp_path, GOOD + "labels: [unclosed\n")
    (problem,) = problems_of(path)
    assert "invalid YAML" in problem and str(path) in problem


def test_it_rejects_a_missing_reference_solution(tmp_path):
    path = write(tmp_path, GOOD + "reference_solution: nope.patch\n")
    (problem,) = problems_of(path)
    assert "reference_solution: file not found: nope.patch" in problem


def test_it_collects_problems_from_every_file_in_a_directory(tmp_path):
    write(tmp_path, GOOD, "ok")
    write(tmp_path, GOOD.replace("id: t1", "id: t2").replace("  commit: abc123\n", ""), "a")
    write(tmp_path, GOOD.replace("id: t1", "id: t3") + "extra: 1\n", "b")
    with pytest.raises(TaskSpecError) as info:
        load_task_dir(tmp_path)
    fields = sorted((Path(p.file).parent.name, p.field) for p in info.value.problems)
    assert fields == [("a", "repo.commit"), ("b", "extra")]


def test_it_rejects_duplicate_ids_in_a_suite(tmp_path):
    write(tmp_path, GOOD, "one")
    write(tmp_path, GOOD, "two")
    with pytest.raises(TaskSpecError) as info:
        load_task_dir(tmp_path)
    assert [p.field for p in info.value.problems] == ["id"]


def test_every_example_task_is_valid():
    tasks = load_task_dir(TASKS_DIR)
    ids = {t.spec.id for t in tasks if t.spec.suite == "custom-dev"}
    assert {
        "toy_fail_pytest",
        "toy_setup_fails",
        "toy_setup_hangs",
        "toy_baseline_passes",
        "toy_no_tests",
        "toy_tests_hang",
        "toy_flaky",
    } <= ids
    assert [t.spec.id for t in tasks if "flaky" in t.spec.labels] == ["toy_flaky"]


def test_it_refuses_a_suite_name_that_cannot_be_a_url_slug(tmp_path):
    path = write(tmp_path, GOOD.replace("suite: s1", "suite: my.suite"))
    (problem,) = problems_of(path)
    assert problem.startswith(f"{path}:3: suite: ")


# --- Paths a task file names stay inside what was imported (issue 20, point 2) -------------


def problems_with(path: Path, rules: PathRules) -> list[tuple[str, str]]:
    with pytest.raises(TaskSpecError) as info:
        load_task_file(path, rules=rules)
    return [(p.field, p.message) for p in info.value.problems]


@pytest.mark.parametrize(
    "url",
    ["../../../../etc", "/etc", "file:///etc", "file://localhost/etc", "file://other-host/etc"],
)
def test_a_repo_url_outside_the_tasks_folder_is_refused_naming_file_field_and_line(tmp_path, url):
    path = write(tmp_path / "tasks", GOOD.replace("repo.bundle", url))
    with pytest.raises(TaskSpecError) as info:
        load_task_file(path)
    (problem,) = info.value.problems
    assert (problem.file, problem.field, problem.line) == (str(path), "repo.url", 5)
    assert repr(url) in problem.message


@pytest.mark.parametrize("url", ["ext::sh -c 'id>&2'", "fd::3", "foo://host/repo"])
def test_git_remote_helpers_and_unknown_schemes_are_refused(tmp_path, url):
    path = write(tmp_path, GOOD.replace("repo.bundle", json_quote(url)))
    ((field, message),) = problems_with(path, PathRules.local(tmp_path))
    assert field == "repo.url"
    assert "remote helpers" in message or "unsupported URL scheme foo://" in message


def json_quote(text: str) -> str:
    import json

    return json.dumps(text)


def test_a_reference_solution_outside_is_refused_before_it_is_read(tmp_path):
    secret = tmp_path / "secret.patch"
    secret.write_text("host secret\n")
    path = write(tmp_path / "tasks", GOOD + "reference_solution: ../../../secret.patch\n")
    rules = PathRules.local(tmp_path / "tasks")
    message = f"'../../../secret.patch' is outside {rules.where()}"
    assert problems_with(path, rules) == [("reference_solution", message)]
    assert "examples" in message and "TASK_PATH_ROOTS" in message
    absolute = write(tmp_path / "tasks", GOOD + "reference_solution: /etc/shadow\n", "abs")
    ((field, _),) = problems_with(absolute, PathRules.local(tmp_path / "tasks"))
    assert field == "reference_solution"


def test_a_link_inside_the_folder_counts_as_where_it_leads(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "gold.patch").write_text("host secret\n")
    path = write(tmp_path / "tasks", GOOD + "reference_solution: gold.patch\n")
    (path.parent / "gold.patch").symlink_to(outside / "gold.patch")
    (path.parent / "repo.bundle").symlink_to(outside)
    fields = [f for f, _ in problems_with(path, PathRules.local(tmp_path / "tasks"))]
    assert fields == ["reference_solution", "repo.url"]  # both named at once


def test_an_upload_may_name_only_a_git_bundle_inside_itself(tmp_path):
    upload = tmp_path / "upload"
    path = write(upload, GOOD.replace("repo.bundle", "../repo.bundle"))
    rules = PathRules.upload(upload)
    (upload / "repo.bundle").write_bytes(b"# v2 git bundle\nabc123 refs/heads/main\n\n")
    assert load_task_file(path, rules=rules).repo_url == str((upload / "repo.bundle").resolve())

    # A repository folder could point git anywhere on the host (a .git file, alternates).
    (upload / "repo").mkdir()
    folder = write(upload, GOOD.replace("repo.bundle", "../repo").replace("t1", "t2"), "t2")
    ((field, message),) = problems_with(folder, rules)
    assert field == "repo.url" and "must be a git bundle" in message
    # The examples and TASK_PATH_ROOTS are for local imports only.
    bundle = str(REPO_ROOT / "examples/toy_repo.bundle")
    example = write(upload, GOOD.replace("repo.bundle", bundle).replace("t1", "t3"), "t3")
    ((field, message),) = problems_with(example, rules)
    assert field == "repo.url" and "inside its archive" in message


def test_a_shipped_task_file_alone_may_name_a_sibling_tasks_solution():
    # As `ab run-task tasks/custom-dev/toy_setup_fails/task.yaml` loads it: its own folder
    # is the import, and the repository's tasks/ is allowed beside it.
    task = load_task_file(TASKS_DIR / "custom-dev/toy_setup_fails/task.yaml")
    assert task.reference_patch.startswith("diff --git")


def test_the_shipped_examples_may_name_the_repositorys_examples(tmp_path):
    task = load_task_file(
        TASKS_DIR / "custom-dev/toy_fail_pytest/task.yaml", rules=PathRules.local(TASKS_DIR)
    )
    assert task.repo_url == str((REPO_ROOT / "examples/toy_repo.bundle").resolve())


@pytest.mark.parametrize("workdir", ["/workspace/../etc", "/etc", "relative", "//workspace"])
def test_a_workdir_outside_the_workspace_is_refused(tmp_path, workdir):
    path = write(tmp_path, GOOD.replace("/workspace/repo", workdir))
    (problem,) = problems_of(path)
    assert "environment.workdir" in problem and "must be /workspace" in problem
