"""The test command of an instance: its repo's runner, on the files its test patch touches.

The commands and the directive rules are those of the official harness (swebench 4.1.0:
``test_cmd`` in ``MAP_REPO_VERSION_TO_SPECS``, ``get_test_directives``), for every Python repo
it lists. A copy, because importing the official package costs about 2 s and a dataset import
needs only this; ``tests/tasks_app/swebench/test_swebench_official.py`` checks it against every
(repo, version) of the official table. The final tests themselves run the official eval script
(``eval_script``), which reads the official table. No Django here.
"""

from __future__ import annotations

import re

from tasks_app.swebench.eval_script import ENV_ACTIVATION

PYTEST = "pytest -rA"
ASTROPY_OLD_PYTEST = "pytest -rA -vv -o console_output_style=classic --tb=no"
DJANGO = "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1"
DJANGO_NO_PARALLEL = "./tests/runtests.py --verbosity 2"
SEABORN = "pytest --no-header -rA"
SPHINX = "tox --current-env -epy39 -v --"
SYMPY = "PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' bin/test -C --verbose"

REPO_COMMANDS: dict[str, str] = {
    "astropy/astropy": PYTEST,
    "django/django": DJANGO,
    "marshmallow-code/marshmallow": PYTEST,
    "matplotlib/matplotlib": PYTEST,
    "mwaskom/seaborn": SEABORN,
    "pallets/flask": PYTEST,
    "psf/requests": PYTEST,
    "pvlib/pvlib-python": PYTEST,
    "pydata/xarray": PYTEST,
    "pydicom/pydicom": PYTEST,
    "pylint-dev/astroid": PYTEST,
    "pylint-dev/pylint": PYTEST,
    "pytest-dev/pytest": PYTEST,
    "pyvista/pyvista": PYTEST,
    "scikit-learn/scikit-learn": PYTEST,
    "sphinx-doc/sphinx": SPHINX,
    "sqlfluff/sqlfluff": PYTEST,
    "sympy/sympy": SYMPY,
}
# (repo, version) pairs whose command differs from their repo's.
VERSION_COMMANDS: dict[tuple[str, str], str] = {
    ("django/django", "1.9"): DJANGO_NO_PARALLEL,
    **{
        ("astropy/astropy", v): ASTROPY_OLD_PYTEST
        for v in ("0.1", "0.2", "0.3", "0.4", "1.1", "1.2", "1.3")
    },
}
# Files a test patch may touch that are data, not tests to run.
NON_TEST_EXTS = (
    ".json",
    ".png",
    "csv",
    ".txt",
    ".md",
    ".jpg",
    ".jpeg",
    ".pkl",
    ".yml",
    ".yaml",
    ".toml",
)
# The published instance images install the repo into the conda env "testbed", the offline
# ones into /opt/venv: activate whichever the image has (as the eval script does).
ENV_PREFIX = ENV_ACTIVATION

_DIFF_TARGET = re.compile(r"diff --git a/.* b/(.*)")


def runner_for(repo: str, version: str) -> str:
    """The runner command of a repo and version (``pytest -rA`` for a repo we do not know)."""
    return VERSION_COMMANDS.get((repo, version)) or REPO_COMMANDS.get(repo, PYTEST)


def directives_for(repo: str, test_patch: str) -> list[str]:
    """What to run: the files the patch touches, data files left out (django: their dotted
    module names). Like the official helper it keeps repeats and does not quote."""
    paths = [p for p in _DIFF_TARGET.findall(test_patch) if not p.endswith(NON_TEST_EXTS)]
    if repo != "django/django":
        return paths
    return [p.removesuffix(".py").removeprefix("tests/").replace("/", ".") for p in paths]


def command_line(repo: str, version: str, test_patch: str) -> str:
    """The test command line of the official eval script (runner and directives)."""
    return " ".join([runner_for(repo, version), *directives_for(repo, test_patch)])


def command_for(repo: str, version: str, test_patch: str) -> str:
    """The full shell command run in the instance image's /testbed (``Task.test_command``)."""
    return f"{ENV_PREFIX}; {command_line(repo, version, test_patch)}"
