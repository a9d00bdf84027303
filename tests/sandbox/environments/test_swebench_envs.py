"""SWE-bench environments as they were: installs as of a date (a local index over PyPI's
upload times), interpreters no suite ships (approximate environments), conda specifications
as pip installs, and invalid instances that say why.

The index tests talk to the package index this machine reaches (PyPI through its mirror), as
every build does; the rest reads the real archives in ../shared/swebench/repos.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

import pytest

from runs.pipeline.log_errors import first_error
from runs.results.leaderboard import leaderboard_rows
from sandbox.environments import conda, dated_index, envspec
from sandbox.environments.dated_index import DatedIndex, parse_time, release_uploaded
from sandbox.environments.repos import RepoSource
from tasks_app.models import GoldValidation, Task
from tests.support.pages_fixtures import (
    make_attempt,
    make_model,
    make_run,
    make_suite,
    outcomes,
    write_artifact,
)
from tests.support.swebench_fixtures import LITE_DEV, SHARED_SWEBENCH, rows

VERIFIED = SHARED_SWEBENCH / "verified_xarray_sphinx.jsonl"
SHARED_REPOS = SHARED_SWEBENCH / "repos"


def row(instance_id: str) -> dict:
    for path in (LITE_DEV, VERIFIED):
        for r in rows(path):
            if r["instance_id"] == instance_id:
                return r
    raise KeyError(instance_id)


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("SWEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


# --- the dated index ---------------------------------------------------------------------


def test_it_serves_only_the_files_uploaded_before_the_date(tmp_path):
    """Real pip through the index: as of 2019-06-01, six resolves to 1.12.0 (uploaded
    2018-12-10), not 1.13.0 (2019-11-05) or anything later."""
    with DatedIndex() as index:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--isolated",
                "--no-deps",
                "--no-cache-dir",
                "-d",
                str(tmp_path),
                "--index-url",
                index.url("2019-06-01T00:00:00Z"),
                "six",
            ],
            capture_output=True,
            text=True,
        )

    assert done.returncode == 0, done.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["six-1.12.0-py2.py3-none-any.whl"]


def test_it_reads_a_project_once_and_serves_a_page_again_from_memory(monkeypatch):
    """pip asks for setuptools again for every isolated build: the page of a project as of a
    date is made once; another date is another page, from the same upstream read."""
    fetched = []
    real_fetch = dated_index.fetch_project

    def counting(name, base=None):
        fetched.append(name)
        return real_fetch(name, base)

    monkeypatch.setattr(dated_index, "fetch_project", counting)

    def page(index, date):
        with urllib.request.urlopen(f"{index.url(date)}six/", timeout=60) as answer:
            return answer.read().decode()

    with DatedIndex() as index:
        first, again = page(index, "2019-06-01T00:00:00Z"), page(index, "2019-06-01T00:00:00Z")
        later = page(index, "2020-06-01T00:00:00Z")
    assert fetched == ["six"]
    assert first == again and "six-1.12.0-py2.py3-none-any.whl" in first
    assert "six-1.13.0" not in first and "six-1.15.0-py2.py3-none-any.whl" in later


def test_it_knows_when_a_release_was_uploaded_and_keeps_the_answer(tmp_path):
    cache = tmp_path / "times.json"

    first = release_uploaded("pytest", "6.2.0", cache=cache)
    kept = json.loads(cache.read_text())

    assert first is not None and first.date().isoformat() == "2020-12-12"
    assert kept == {"pytest==6.2": "2020-12-12T21:18:19Z"}  # its last file
    assert release_uploaded("no-such-project-agentbench-0", "1.0", cache=cache) is None


def test_it_dates_a_level_by_its_anchor_its_exact_pins_and_its_python_floor():
    uploads = {("tox", "4.16.0"): parse_time("2024-07-03T03:29:14.8Z")}

    def uploaded(name: str, version: str) -> datetime | None:
        return uploads.get((name, version), datetime(2000, 1, 1, tzinfo=UTC))

    plain = envspec.dated("2021-11-24T18:52:02Z", "the commit", "3.9", [], uploaded)
    pinned = envspec.dated(
        "2021-11-24T18:52:02Z", "the commit", "3.9", [("tox", "4.16.0")], uploaded
    )
    floored = envspec.dated("2019-08-21T15:45:13+00:00", "created_at", "3.9", [], uploaded)

    assert plain == ("2021-11-24T18:52:02Z", "the commit")
    assert pinned == (
        "2024-07-03T03:29:15Z",
        "the upload of tox==4.16.0, which the specification pins",
    )
    assert floored[0] == "2021-03-15T00:00:00Z" and "Python 3.9" in floored[1]
    assert envspec.exact_pins(["pip install 'tox==4.16.0' Jinja2==3.0.3 numpy==1.2.* a>=1"]) == [
        ("tox", "4.16.0"),
        ("Jinja2", "3.0.3"),
    ]


def test_it_keys_a_level_by_its_date(cache):
    """The date is part of both keys: the same steps resolved as of another day are another
    level; the env level's date comes from its environment_setup_commit, so an instance joining
    it does not change its key."""
    source = RepoSource(SHARED_REPOS)
    first = envspec.instance_recipe(row("sqlfluff__sqlfluff-1625"), source)
    sibling = envspec.instance_recipe(row("sqlfluff__sqlfluff-1733"), source)
    later = dict(row("sqlfluff__sqlfluff-1625"), created_at="2021-12-20T00:00:00Z")
    moved = envspec.instance_recipe(later, source)

    assert first.env.date == sibling.env.date == "2021-11-24T18:52:02Z"
    assert first.env.key("b", "r") == sibling.env.key("b", "r")
    assert moved.date == "2021-12-20T00:00:00Z" and moved.date_why == "the instance's created_at"
    assert first.key("e") != moved.key("e")


def test_an_instance_installs_no_earlier_than_its_env_level(cache):
    """An instance created before its env level's date (sqlfluff-1625: 2021-10-13, env
    2021-11-24) installs as of the env's date: what it adds must agree with what the env
    holds (pvlib-1154 resolved as of its own day took numba 0.53 beside the env's numpy 1.24,
    which fails to import)."""
    recipe = envspec.instance_recipe(row("sqlfluff__sqlfluff-1625"), RepoSource(SHARED_REPOS))
    assert row("sqlfluff__sqlfluff-1625")["created_at"].startswith("2021-10-13")
    assert recipe.date == recipe.env.date == "2021-11-24T18:52:02Z"
    assert recipe.date_why.startswith("the env level's date (the environment_setup_commit's")
    assert "later than the instance's created_at" in recipe.date_why


# --- interpreters ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("asked", "used"),
    [
        ("3.9", "3.9"),
        ("3.11", "3.11"),
        ("3.5", "3.9"),
        ("3.6", "3.9"),
        ("3.8", "3.9"),
        ("3.10", "3.11"),
        ("3.12", "3.13"),
    ],
)
def test_it_uses_the_asked_python_or_the_nearest_newer_one(asked, used):
    assert envspec.interpreter_for(asked) == (used, envspec.SUITES[used])


@pytest.mark.parametrize("asked", ["2.7", "3.14"])
def test_it_says_why_a_python_with_no_newer_suite_is_not_buildable(asked):
    with pytest.raises(envspec.NotBuildable) as error:
        envspec.interpreter_for(asked)
    assert str(error.value) == (
        f"the specification asks for Python {asked}: no Debian suite reachable here has it or a "
        "newer Python 3 (bullseye 3.9, bookworm 3.11, trixie 3.13), and conda is not available"
    )


def test_it_builds_an_instance_asking_for_python_3_6_as_an_approximate_environment(cache):
    recipe = envspec.instance_recipe(row("pydicom__pydicom-901"), RepoSource(SHARED_REPOS))

    assert (recipe.env.python_asked, recipe.env.python, recipe.env.suite) == (
        "3.6",
        "3.9",
        "bullseye",
    )
    assert recipe.env.approximate
    assert recipe.env.commands[0] == "python3.9 -m venv /opt/venv"
    assert envspec.environment_label("pydicom/pydicom", "1.3") == "env-approximate"
    assert envspec.environment_label("pydicom/pydicom", "2.1") == "env-exact"


# --- conda -------------------------------------------------------------------------------


def test_it_translates_xarrays_environment_yml_into_a_pip_install(cache):
    """pydata__xarray-7229: the environment.yml at its environment_setup_commit, through the
    one conda -> PyPI table; cdms2 (conda-forge only) is left out and named."""
    recipe = envspec.instance_recipe(row("pydata__xarray-7229"), RepoSource(SHARED_REPOS))
    env = recipe.env
    install = next(c for c in env.commands if "cartopy" in c)
    names = install.split(" install ", 1)[1].split()

    assert (env.python_asked, env.python) == ("3.10", "3.11")
    for name in (
        "matplotlib",
        "dask",
        "scitools-iris",
        "netCDF4",
        "'numpy<1.24'",
        "'fsspec!=2021.7.0'",
    ):
        assert f" {name}" in install, name
    for conda_only in ("matplotlib-base", "dask-core", "iris", "hdf5", "cdms2", "pip"):
        assert conda_only not in names, conda_only
    assert {"libgeos-dev", "libproj-dev"} <= set(env.apt_packages)
    assert (
        "cdms2 (not on PyPI" in env.note and "channels conda-forge, nodefaults dropped" in env.note
    )
    # The official pip_packages after, as the harness runs them; their pins date the env. On
    # Python 3.11 (approximate) each exact pin is taken as its release series: pandas 1.5.3
    # needs numpy 1.23.2+ on 3.11, the specification pins numpy 1.23.0 (for 3.10).
    assert env.commands[-1].endswith(
        "'numpy~=1.23.0' 'packaging~=23.1' 'pandas~=1.5.3' "
        "'pytest~=7.4.0' 'python-dateutil~=2.8.2' 'pytz~=2023.3' "
        "'six~=1.16.0' 'scipy~=1.11.1' 'setuptools~=68.0.0' "
        "'dask~=2022.8.1'"
    )
    assert (
        "Python 3.11 for 3.10: exact pins taken as their release series (numpy==1.23.0 -> "
        "numpy~=1.23.0, " in env.note
    )
    assert env.date == "2023-06-28T22:30:21Z"
    assert env.date_why == "the upload of scipy==1.11.1, which the specification pins"


def test_it_drops_channels_and_build_strings_with_a_note():
    translated = conda.translate_names(
        [
            "conda-forge::scipy",
            "numpy=1.23=py310h_0",
            "pandas 1.5 py310_0",
            "pip",
            "hdf5",
            "matplotlib-base>=3.5",
            "cdms2",
            "pytorch",
        ]
    )

    assert translated.requirements == [
        "scipy",
        "numpy==1.23.*",
        "pandas==1.5.*",
        "matplotlib>=3.5",
        "torch",
    ]
    assert translated.missing == [
        "cdms2 (not on PyPI: published on conda-forge only (and retired in 2023))"
    ]
    assert "conda build strings are dropped (no pip meaning)" in translated.notes
    assert "channels named in package specs are dropped (PyPI has none)" in translated.notes


def test_it_says_which_environment_yml_it_cannot_read():
    with pytest.raises(ValueError, match=r"x/environment\.yml: no list of dependencies"):
        conda.translate_environment_yml("name: x\nchannels: [a]\n", source="x/environment.yml")


# --- invalid instances explain themselves --------------------------------------------------


def test_it_names_the_first_error_of_a_test_log():
    log = (
        "+ python -m pip install -e .\nERROR: Could not find a version (offline reinstall)\n"
        ": '>>>>> Start Test Output'\n"
        "ImportError while loading conftest '/testbed/conftest.py'.\n"
        "conftest.py:3: in <module>\n    import hypothesis\n"
        "E   ModuleNotFoundError: No module named 'hypothesis'\n"
        "ERROR tests/test_a.py\n: '>>>>> End Test Output'\n"
    )

    assert first_error(log) == "ModuleNotFoundError: No module named 'hypothesis'"
    assert first_error("x\nTraceback\nAttributeError: module 'numpy' has no attribute 'Inf'\n") == (
        "AttributeError: module 'numpy' has no attribute 'Inf'"
    )
    assert first_error("all 3 passed\n") == ""
    # The tests never started: the interpreter or the command is missing (before tox's ERROR).
    tox = (
        "py39: commands[0]> python -X dev -m pytest -rA tests/test_ext_napoleon.py\n"
        "/testbed/.tox/py39/bin/python: No module named pytest\n"
        "py39: exit 1 (0.05 seconds) /testbed> python -X dev -m pytest pid=16\n"
        "ERROR:  py39: commands failed\n"
    )
    assert first_error(tox) == "/testbed/.tox/py39/bin/python: No module named pytest"
    assert first_error("x\nbash: line 3: tox: command not found\nERROR: x\n") == (
        "bash: line 3: tox: command not found"
    )


@pytest.mark.django_db
def test_an_approximate_instance_whose_gold_patch_fails_is_not_buildable_and_says_why(
    artifacts_root,
):
    from runs.pipeline.swebench_validation import judge
    from sandbox.environments.build import BuildOutcome, BuiltInstance

    suite = make_suite("approx-judge", tasks=1)
    task = Task.objects.get(suite=suite)
    gold = make_attempt(
        make_run(suite, make_model("oracle")),
        task,
        "TESTS_FAILED",
        grade="NO",
        test_results={"FAIL_TO_PASS": {"failure": ["t::a"]}},
    )
    write_artifact(gold, "logs/final_test.txt", CONFTEST_LOG.encode())
    empty = make_attempt(make_run(suite, make_model("nop")), task, "TESTS_FAILED", grade="NO")
    built = BuiltInstance(
        instance_id=task.task_id,
        key="k",
        base_commit="c",
        rootfs="/x",
        python="3.11",
        python_asked="3.10",
        date="2022-11-01T00:00:00Z",
        env_date="2023-06-28T21:43:45Z",
        note="conda packages left out (not on PyPI): cdms2 (conda-forge only)",
    )

    row = judge(task, gold, empty, build=BuildOutcome(task.task_id, "cached", built=built))
    exact = judge(
        task,
        gold,
        empty,
        build=BuildOutcome(
            task.task_id,
            "cached",
            built=BuiltInstance(**{**built.__dict__, "python_asked": "3.11"}),
        ),
    )

    assert row.status == "not_buildable" and exact.status == "invalid"
    assert row.reason == (
        "approximate environment (Python 3.11 for 3.10) fails gold validation; "
        "gold patch grades NO: t::a; "
        "first error: ModuleNotFoundError: No module named 'hypothesis'; "
        "built with: conda packages left out (not on PyPI): cdms2 (conda-forge only)"
    )
    assert row.installs_as_of == "env 2023-06-28T21:43:45Z, instance 2022-11-01T00:00:00Z"


CONFTEST_LOG = (
    ": '>>>>> Start Test Output'\nImportError while loading conftest '/testbed/conftest.py'.\n"
    "E   ModuleNotFoundError: No module named 'hypothesis'\n: '>>>>> End Test Output'\n"
)


def _approximate_suite() -> tuple:
    """Three tasks resolved by one run; the last on an approximate environment (pydicom 1.3
    asks for Python 3.6, built on 3.9)."""
    suite = make_suite(
        "approx-board", tasks=3, labels={0: ["swebench", "env-exact"], 1: ["swebench", "env-exact"]}
    )
    approx = Task.objects.for_suite(suite).order_by("task_id")[2]
    approx.labels = ["swebench", "env-approximate"]
    approx.spec = {"repo": "pydicom/pydicom", "version": "1.3"}
    approx.source = "swebench"
    approx.save()
    outcomes(make_run(suite, make_model("alpha")), [[None], ["TESTS_FAILED"], [None]])
    return suite, approx


@pytest.mark.django_db
def test_an_approximate_instance_whose_gold_patch_fails_here_is_left_out(client):
    suite, approx = _approximate_suite()

    unvalidated = leaderboard_rows(suite=suite)[0]
    GoldValidation.objects.create(
        task=approx,
        backend="docker",
        status="valid",
        gold_grade="FULL",
        empty_grade="NO",
        python_asked="3.6",
        python_used="3.9",
    )
    valid = leaderboard_rows(suite=suite)[0]
    GoldValidation.objects.create(
        task=approx,
        backend="bwrap",
        status="not_buildable",
        gold_grade="NO",
        empty_grade="NO",
        reason="gold NO",
    )
    failed_elsewhere = leaderboard_rows(suite=suite)[0]
    exact_only = leaderboard_rows(suite=suite, labels=["env-exact"])[0]

    # Not validated yet: counted, as any instance is until gold validation says otherwise.
    assert (unvalidated.resolved, unvalidated.scored) == (2, 3)
    assert (valid.resolved, valid.scored) == (2, 3)
    assert (failed_elsewhere.resolved, failed_elsewhere.scored) == (1, 2)
    assert (exact_only.resolved, exact_only.scored) == (1, 2)


@pytest.mark.django_db
def test_the_leaderboard_the_task_page_and_the_api_name_the_python_asked_and_used(client):
    suite, approx = _approximate_suite()
    GoldValidation.objects.create(
        task=approx,
        backend="docker",
        status="valid",
        gold_grade="FULL",
        empty_grade="NO",
        python_asked="3.6",
        python_used="3.9",
        installs_as_of="env 2021-03-15T00:00:00Z, instance 2021-03-15T00:00:00Z",
    )

    board = client.get(f"/suites/{suite.name}/leaderboard/").content.decode()
    exact = client.get(f"/suites/{suite.name}/leaderboard/?labels=env-exact")
    page = client.get(f"/suites/{suite.name}/tasks/{approx.task_id}/").content.decode()
    api = client.get(f"/api/tasks/{approx.public_id}").json()

    assert 'id="approximate-env"' in board and 'href="?labels=env-exact"' in board
    assert f"{approx.task_id}</a>: Python 3.9 for 3.6, gold-valid: counted" in board
    assert exact.status_code == 200
    assert 'id="environment"' in page and "approximate</span>" in page
    assert "Python 3.9 for 3.6" in page and "as of env 2021-03-15" in page
    assert api["environment"]["python_asked"] == "3.6"
    assert api["environment"]["python_used"] == "3.9" and api["environment"]["approximate"]
    assert api["environment"]["gold_validations"][0]["status"] == "valid"


# --- pins never reach pip's isolated build -------------------------------------------------


@pytest.mark.slow
@pytest.mark.bwrap
def test_a_pin_does_not_reach_the_isolated_build_of_the_testbed(tmp_path, monkeypatch):
    """A runtime pin (setuptools<60) on a repository whose editable install builds with
    setuptools>=64 (PEP 660): the pin goes as -c of the pip command, so pip's isolated build
    environment still gets setuptools 64+ and the install succeeds. Through PIP_CONSTRAINT (as
    before) the build environment inherited the pin and the install failed.

    In a cache root of its own (the shared cache's base level linked in): in the shared cache
    a previous run's build was found ("cached") and nothing was installed."""
    from tests.support.swebench_cache_fixtures import drop_root, new_root, seed_base

    root = new_root()
    seed_base(root, docker=False)
    monkeypatch.setenv("SWEBENCH_CACHE_DIR", str(root))
    try:
        _pin_probe(tmp_path, monkeypatch)
    finally:
        drop_root(root)


def _pin_probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sandbox.environments.build import Builder

    files = {
        "pyproject.toml": '[build-system]\nrequires = ["setuptools>=64"]\n'
        'build-backend = "setuptools.build_meta"\n\n'
        '[project]\nname = "pinprobe"\nversion = "1.0"\n\n'
        "[project.optional-dependencies]\ndev = []\n",
        "pinprobe/__init__.py": "",
    }
    folder, commit = _bare_repo(tmp_path, "marshmallow-code__marshmallow", files)
    # An id of its own: the cache records one build per instance id.
    instance = dict(
        row("marshmallow-code__marshmallow-1359"),
        instance_id="agentbench__pinprobe-1",
        base_commit=commit,
        environment_setup_commit=commit,
        created_at="2023-01-01T00:00:00Z",
    )
    monkeypatch.setitem(
        envspec.PIP_PINS, "marshmallow-code/marshmallow", [("setuptools<60", "the test's pin")]
    )

    recipe = envspec.instance_recipe(instance, RepoSource(folder))
    builder = Builder(RepoSource(folder), docker=False)
    try:
        outcome = builder.build(instance)
    finally:
        builder.close()

    assert recipe.commands == (
        "python -m pip install -c /etc/agentbench-pip-constraints.txt -e '.[dev]'",
    )
    assert outcome.status == "built", outcome.line() + "\n" + outcome.log_tail
    tree = Path(outcome.built.rootfs)
    assert (tree / "etc/agentbench-pip-constraints.txt").read_text() == "setuptools<60\n"
    assert list((tree / "opt/venv/lib").glob("python3.9/site-packages/*pinprobe*"))


def _bare_repo(tmp_path: Path, stem: str, files: dict[str, str]) -> tuple[Path, str]:
    work = tmp_path / "work"
    for name, text in files.items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(text)
    git = ["git", "-C", str(work), "-c", "user.name=t", "-c", "user.email=t@t"]
    # A fixed date: the same commit id on every run, so a second run finds its levels cached.
    dated = {
        **os.environ,
        "GIT_AUTHOR_DATE": "2024-06-01T00:00:00Z",
        "GIT_COMMITTER_DATE": "2024-06-01T00:00:00Z",
    }
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "probe"], check=True, env=dated)
    commit = subprocess.run(
        [*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    folder = tmp_path / "repos"
    folder.mkdir()
    subprocess.run(
        ["git", "clone", "-q", "--bare", str(work), str(folder / f"{stem}.git")], check=True
    )
    return folder, commit


# --- end to end: an approximate environment, an environment.yml --------------------------

APPROXIMATE = "pydicom__pydicom-901"  # asks for Python 3.6: built on 3.9
CONDA_YML = "pydata__xarray-4966"  # an environment.yml, and 3.10: built on 3.11 (small tests)


@pytest.mark.django_db
@pytest.mark.docker
@pytest.mark.bwrap
@pytest.mark.slow
def test_an_approximate_and_a_conda_instance_build_and_validate_on_both_backends(
    tmp_path, settings, capsys
):
    """The real archives in ../shared/swebench/repos, built into /var/lib/agentbench/swebench
    (a warm cache finds them built), gold-validated on Docker and on bubblewrap."""
    from benchsite.cli.main import main
    from tests.support.swebench_fixtures import write_jsonl

    settings.ARTIFACTS_ROOT = tmp_path / "artifacts"
    dataset = write_jsonl(tmp_path / "envs.jsonl", [row(APPROXIMATE), row(CONDA_YML)])
    assert main(["import-swebench", str(dataset), "--suite", "envs-e2e"]) == 0
    capsys.readouterr()
    labels = dict(Task.objects.filter(suite__name="envs-e2e").values_list("task_id", "labels"))
    assert labels[APPROXIMATE][-1] == labels[CONDA_YML][-1] == "env-approximate"

    for backend in ("docker", "bwrap"):
        code = main(
            [
                "validate-suite",
                "envs-e2e",
                "--variant",
                "oracle",
                "--backend",
                backend,
                "--repos",
                str(SHARED_REPOS),
            ]
        )
        out = capsys.readouterr().out
        assert code == 0, out
        # Whatever the order the builds end in.
        assert re.search(
            rf"build \[[12]/2\] {APPROXIMATE}: \S+ \[Python 3\.9 for 3\.6 "
            r"\(approximate\)",
            out,
        ), out
        assert "[Python 3.11 for 3.10 (approximate), installs as of 2023-06-28 (env)" in out
        assert "cdms2 (not on PyPI" in out, out  # the conda translation's note
        # The summary table's column for them (swebench-scale's validate-suite).
        assert re.search(r"^approximate-valid +2$", out, re.MULTILINE), out
        assert (
            f"2 valid (2 on an approximate environment), 0 invalid, 0 not buildable of 2 "
            f"instance(s) on {backend}" in out
        ), out
        for instance_id, asked, used in ((APPROXIMATE, "3.6", "3.9"), (CONDA_YML, "3.10", "3.11")):
            found = GoldValidation.objects.get(task__task_id=instance_id, backend=backend)
            assert (found.status, found.python_asked, found.python_used) == ("valid", asked, used)
