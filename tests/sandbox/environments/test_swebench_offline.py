"""SWE-bench offline: repositories from git archives, instances built with no registry, gold
validation on both backends, invalid instances left out of leaderboard rates.

The end-to-end test builds marshmallow-code__marshmallow-1359 (the real archive in
examples/swebench/repos, packages from PyPI) into the cache under /var/lib/agentbench/swebench:
the first run on a machine takes a few minutes, later ones find every level cached.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from benchsite.cli.main import main
from runs.pipeline.adhoc import attempt_create_adhoc, model_config_for_variant
from runs.pipeline.execute import attempt_execute
from runs.results.leaderboard import leaderboard_rows
from sandbox.environments import envspec
from sandbox.environments.build import built_instance
from sandbox.environments.repos import RepoError, RepoSource
from tasks_app.models import GoldValidation, GoldValidationStatus, Task
from tests.support.fake_provider import FakeProvider, tool_call
from tests.support.pages_fixtures import make_model, make_run, make_suite, outcomes
from tests.support.swebench_fixtures import EXAMPLES, LITE_DEV, rows, write_jsonl

REPOS = EXAMPLES / "repos"
INSTANCE = "marshmallow-code__marshmallow-1359"
MARSHMALLOW = "marshmallow-code/marshmallow"


def lite_row(instance_id: str) -> dict:
    return next(r for r in rows(LITE_DEV) if r["instance_id"] == instance_id)


def import_suite(tmp_path: Path, suite: str, *instance_ids: str) -> None:
    path = write_jsonl(tmp_path / f"{suite}.jsonl", [lite_row(i) for i in instance_ids])
    assert main(["import-swebench", str(path), "--suite", suite]) == 0


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """A cache folder of the test's own (for the tests that unpack, not the ones that build)."""
    monkeypatch.setenv("SWEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


# --- repositories ------------------------------------------------------------------------


def test_it_names_the_instance_the_repository_and_the_commit_that_is_missing(cache):
    source = RepoSource(REPOS)
    missing = "0123456789abcdef0123456789abcdef01234567"

    with pytest.raises(RepoError) as commit_error:
        source.check_commit(MARSHMALLOW, missing, instance_id=INSTANCE, what="base_commit")
    with pytest.raises(RepoError) as repo_error:
        source.bare_repo("pyvista/pyvista", instance_id="pyvista__pyvista-4315")

    assert str(commit_error.value).startswith(f"instance {INSTANCE}: repository {MARSHMALLOW}")
    assert f"has no base_commit {missing}" in str(commit_error.value)
    assert str(repo_error.value) == (
        f"instance pyvista__pyvista-4315: repository pyvista/pyvista is not in {REPOS} "
        "(expected pyvista__pyvista.git.tar.gz or pyvista__pyvista.git)"
    )


def test_it_unpacks_an_archive_once_into_a_folder_named_by_its_content(cache):
    first, first_id = RepoSource(REPOS).bare_repo(MARSHMALLOW)
    marker = first / "agentbench-test-marker"
    marker.write_text("unpacked once")

    again, again_id = RepoSource(REPOS).bare_repo(MARSHMALLOW)

    assert again == first and again_id == first_id
    assert first_id == "sha256:bde120a10a65ac9c09e4060e0003dc93b9bd8d73f21bad1b3afba1d355c4b2ff"
    assert first.parent.name == first_id.removeprefix("sha256:")[:32]
    assert marker.read_text() == "unpacked once"
    base = lite_row(INSTANCE)["base_commit"]
    RepoSource(REPOS).check_commit(MARSHMALLOW, base, instance_id=INSTANCE, what="base_commit")


def test_it_refuses_an_archive_that_expands_past_the_limit(cache):
    source = RepoSource(REPOS, max_unpacked_bytes=10_000)

    with pytest.raises(RepoError, match="expands to more than 10000 bytes"):
        source.bare_repo(MARSHMALLOW)
    assert list((cache / "repos").glob("*/marshmallow-code__marshmallow.git")) == []


def test_it_takes_a_bare_repository_folder_as_well(tmp_path, cache):
    folder = tmp_path / "repos"
    folder.mkdir()
    archive_copy, _ = RepoSource(REPOS).bare_repo(MARSHMALLOW)
    subprocess.run(
        [
            "git",
            "clone",
            "-q",
            "--bare",
            "--mirror",
            str(archive_copy),
            str(folder / "marshmallow-code__marshmallow.git"),
        ],
        check=True,
    )

    bare, repo_id = RepoSource(folder).bare_repo(MARSHMALLOW)

    assert bare == folder / "marshmallow-code__marshmallow.git"
    assert repo_id.startswith("refs:")


# --- specifications ----------------------------------------------------------------------


def _git_repo_with(tmp_path: Path, files: dict[str, str]) -> tuple[Path, str]:
    work = tmp_path / "work"
    work.mkdir()
    for name, text in files.items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(text)
    git = ["git", "-C", str(work), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "reqs"], check=True)
    commit = subprocess.run(
        [*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    folder = tmp_path / "repos"
    folder.mkdir()
    subprocess.run(
        ["git", "clone", "-q", "--bare", str(work), str(folder / "sqlfluff__sqlfluff.git")],
        check=True,
    )
    return folder, commit


def test_it_reads_requirements_from_the_archive_as_the_official_helper_reads_github(
    tmp_path, monkeypatch
):
    files = {
        "requirements_dev.txt": "-r requirements.txt\n# dev tools\nflake8\n"
        "types-pkg_resources==0.1.3\n-e .\n.[test]\npytest\n",
        "requirements.txt": "click>=7.1\n# comment\ncolorama>=0.3\n",
    }
    folder, commit = _git_repo_with(tmp_path, files)
    instance = {
        "instance_id": "sqlfluff__sqlfluff-1",
        "repo": "sqlfluff/sqlfluff",
        "environment_setup_commit": commit,
        "base_commit": commit,
    }

    ours = envspec.requirements_from_archive(instance, commit, RepoSource(folder))

    # The official helper, with GitHub (unreachable here) answered from the same files.
    from swebench.harness.test_spec import python as official

    class Answer:
        def __init__(self, url: str):
            name = url.rsplit("/", 1)[1]
            self.status_code = 200 if name in files else 404
            self.text = files.get(name, "")

    monkeypatch.setattr(official.requests, "get", lambda url, headers=None: Answer(url))
    official.get_requirements_by_commit.cache_clear()
    assert ours == official.get_requirements(instance)
    assert "types-setuptools" in ours and "-e ." not in ours


# --- leaderboard -------------------------------------------------------------------------


@pytest.mark.django_db
def test_it_leaves_tasks_found_invalid_out_of_leaderboard_rates():
    suite = make_suite("gold", tasks=3)
    alpha = make_model("alpha")
    outcomes(make_run(suite, alpha), [[None], ["TESTS_FAILED"], [None]])
    before = leaderboard_rows(suite=suite)[0]
    invalid = Task.objects.for_suite(suite).order_by("task_id")[2]
    GoldValidation.objects.create(
        task=invalid,
        backend="docker",
        status=GoldValidationStatus.INVALID,
        gold_grade="NO",
        empty_grade="NO",
        reason="gold patch grades NO: t1",
    )

    after = leaderboard_rows(suite=suite)[0]

    assert (before.resolved, before.scored, before.infra) == (2, 3, 0)
    assert (after.resolved, after.scored, after.infra) == (1, 2, 1)
    assert after.rate == pytest.approx(1 / 2)


@pytest.mark.django_db
def test_it_says_on_the_leaderboard_and_the_task_page_which_instances_are_left_out(client):
    suite = make_suite("gold-pages", tasks=2)
    outcomes(make_run(suite, make_model("alpha")), [[None], [None]])
    invalid = Task.objects.for_suite(suite).order_by("task_id")[1]
    GoldValidation.objects.create(
        task=invalid,
        backend="bwrap",
        status=GoldValidationStatus.INVALID,
        gold_grade="PARTIAL",
        empty_grade="NO",
        failing_tests=["tests/t.py::<b>x</b>"],
        reason="gold patch grades PARTIAL",
    )

    board = client.get(f"/suites/{suite.name}/leaderboard/").content.decode()
    task_page = client.get(f"/suites/{suite.name}/tasks/{invalid.task_id}/").content.decode()

    assert 'id="left-out"' in board and invalid.task_id in board
    assert "gold PARTIAL, empty NO: gold patch grades PARTIAL" in board
    assert 'id="gold-validation"' in task_page and "left out of every rate" in task_page
    assert "&lt;b&gt;x&lt;/b&gt;" in task_page and "<b>x</b>" not in task_page


# --- end to end --------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.docker
@pytest.mark.bwrap
@pytest.mark.slow
def test_it_builds_an_instance_offline_and_validates_it_on_both_backends(
    tmp_path, settings, capsys, monkeypatch
):
    monkeypatch.setenv("AB_TEST_FAKE_KEY", "sk-test")
    settings.ARTIFACTS_ROOT = tmp_path / "artifacts"
    import_suite(tmp_path, "lite-offline", INSTANCE, "pyvista__pyvista-4315")
    build = ["swebench", "build", "lite-offline", "--repos", str(REPOS), "--backend", "docker"]

    first = main([*build, "--instance", INSTANCE])
    first_out = capsys.readouterr().out
    again = main([*build, "--instance", INSTANCE])
    again_out = capsys.readouterr().out
    whole = main(build)
    whole_out = capsys.readouterr().out

    assert first == 0, first_out
    assert f"[1/1] {INSTANCE}: built" in first_out or f"[1/1] {INSTANCE}: cached" in first_out
    assert again == 0 and f"[1/1] {INSTANCE}: cached" in again_out  # a second build: no-op
    assert whole == 1  # an instance that cannot be built fails the command, saying why
    assert "pyvista__pyvista-4315: failed: instance pyvista__pyvista-4315: repository " in whole_out
    # The build line says how the environment was made: Python, and the install dates.
    assert f"{INSTANCE}: cached [Python 3.9, installs as of 2021-03-15 (env) / 2021-03-15]" in (
        again_out
    )
    # Installs as of the date, on both backends: pytest 6.2.3 (uploaded 2021-04-03) is after
    # the cutoff (2021-03-15, Python 3.9's floor), 6.2.2 (2021-01-25) the newest before it.
    built = built_instance(INSTANCE)
    version = ["/opt/venv/bin/python", "-c", "import pytest; print(pytest.__version__)"]
    in_image = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", built.image, *version],
        capture_output=True,
        text=True,
    )
    in_tree = subprocess.run(
        [
            "bwrap",
            "--ro-bind",
            built.rootfs,
            "/",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--unshare-net",
            *version,
        ],
        capture_output=True,
        text=True,
    )
    assert (in_image.stdout.strip(), in_tree.stdout.strip()) == ("6.2.2", "6.2.2"), (
        in_image.stderr + in_tree.stderr
    )

    for backend in ("docker", "bwrap"):
        code = main(
            [
                "validate-suite",
                "lite-offline",
                "--variant",
                "oracle",
                "--backend",
                backend,
                "--repos",
                str(REPOS),
            ]
        )
        out = capsys.readouterr().out
        assert code == 0, out
        assert f"[1/2] {INSTANCE}: valid" in out, out
        assert (
            f"1 valid (0 on an approximate environment), 0 invalid, 1 not buildable of 2 "
            f"instance(s) on {backend}"
        ) in out
        row = GoldValidation.objects.get(task__task_id=INSTANCE, backend=backend)
        assert (row.status, row.gold_grade, row.empty_grade) == ("valid", "FULL", "NO")
        assert (row.python_asked, row.python_used) == ("3.9", "3.9")
        assert row.installs_as_of == "env 2021-03-15T00:00:00Z, instance 2021-03-15T00:00:00Z"
        skipped = GoldValidation.objects.get(task__task_id="pyvista__pyvista-4315", backend=backend)
        assert skipped.status == "not_buildable" and "pyvista__pyvista.git.tar.gz" in skipped.reason

    # External predictions evaluate on the built instance: the gold patch as a prediction
    # resolves it, an unrelated change does not.
    gold = lite_row(INSTANCE)["patch"]
    predictions = tmp_path / "preds.jsonl"
    predictions.write_text(
        json.dumps({"instance_id": INSTANCE, "model_patch": gold, "model_name_or_path": "g"}) + "\n"
    )
    settings.SANDBOX_BACKEND = "bwrap"
    assert (
        main(
            [
                "import-predictions",
                str(predictions),
                "--suite",
                "lite-offline",
                "--model",
                "gold-as-prediction",
                "--run",
            ]
        )
        == 0
    )
    assert f"{INSTANCE}: resolved (grade FULL)" in capsys.readouterr().out

    # An LLM agent (the real openai client against the local fake server) on the instance:
    # the visible tests already pass at the start, the agent still gets its turn.
    task = Task.objects.get(suite__name="lite-offline", task_id=INSTANCE)
    with FakeProvider([tool_call("apply_patch", {"unified_diff": gold})]) as server:
        config = model_config_for_variant(
            "llm",
            name="fake-llm",
            model_name="fake-model",
            base_url=server.url("/v1"),
            api_key_env="AB_TEST_FAKE_KEY",
        )
        attempt = attempt_execute(
            attempt_create_adhoc(task=task, model_config=config), backend="docker"
        )
    assert (attempt.grade, attempt.failure_reason_id) == ("FULL", None), attempt.error_text
    assert len(server.requests) == 1


@pytest.mark.slow
def test_it_says_an_instance_whose_apt_package_does_not_exist_is_not_buildable(monkeypatch):
    """The env level installs the specification's apt packages from the Debian mirror; one the
    suite does not have makes the instance not buildable, naming it, and leaves no half tree.
    (Runs after the end-to-end test above, so the base level is in the cache.)"""
    from swebench.harness.constants import MAP_REPO_VERSION_TO_SPECS

    from sandbox.environments.build import Builder
    from sandbox.environments.repos import cache_root

    row = lite_row(INSTANCE)
    spec = dict(MAP_REPO_VERSION_TO_SPECS[MARSHMALLOW][row["version"]])
    spec["apt-pkgs"] = ["agentbench-no-such-package"]
    monkeypatch.setitem(MAP_REPO_VERSION_TO_SPECS[MARSHMALLOW], row["version"], spec)
    trees = cache_root() / "trees"
    before = sorted(p.name for p in trees.iterdir()) if trees.is_dir() else []

    outcome = Builder(RepoSource(REPOS), docker=False).build(row)

    assert outcome.status == "not buildable", outcome.line()
    assert outcome.reason.startswith(
        "apt package(s) agentbench-no-such-package not available for Debian bullseye: "
    ), outcome.reason
    assert "Unable to locate package agentbench-no-such-package" in outcome.reason
    after = sorted(p.name for p in trees.iterdir())
    assert [name for name in after if name not in before] == []  # no env tree, no staging left
