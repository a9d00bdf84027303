"""The test command of an instance: its repo's runner, on the files its test patch touches.

The commands and the directive rules are those of the SWE-bench harness (v4/v5
``constants/python.py`` and ``test_spec/python.py``), for every repo of Lite and Verified.
No Django here.
"""

from __future__ import annotations

import posixpath
import re
import shlex

PYTEST = "pytest -rA"
ASTROPY_OLD_PYTEST = "pytest -rA -vv -o console_output_style=classic --tb=no -p no:nose"
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
# The published instance images install the repo into the conda env "testbed"; activate it
# when present so the same command also runs in an image without conda (a local test image).
ENV_PREFIX = (
    "if [ -f /opt/miniconda3/bin/activate ]; then . /opt/miniconda3/bin/activate testbed; fi"
)

_DIFF_TARGET = re.compile(r"^diff --git a/.* b/(.*)$", re.MULTILINE)


def runner_for(repo: str, version: str) -> str:
    """The runner command of a repo and version (``pytest -rA`` for a repo we do not know)."""
    return VERSION_COMMANDS.get((repo, version)) or REPO_COMMANDS.get(repo, PYTEST)


def directives_for(repo: str, test_patch: str) -> list[str]:
    """What to run: the test files the patch touches (django: their dotted module names)."""
    paths = [p.strip() for p in _DIFF_TARGET.findall(test_patch)]
    paths = [p for p in paths if p and not p.endswith(NON_TEST_EXTS)]
    if repo != "django/django":
        return _unique(paths)
    modules = []
    for path in paths:
        if not _is_django_test_file(path):
            continue
        module = path.removesuffix(".py").removeprefix("tests/")
        modules.append(module.replace("/", "."))
    return _unique(modules)


def command_for(repo: str, version: str, test_patch: str) -> str:
    """The full shell command run in the instance image's /testbed."""
    runner = runner_for(repo, version)
    directives = " ".join(shlex.quote(d) for d in directives_for(repo, test_patch))
    command = f"{runner} {directives}".rstrip()
    return f"{ENV_PREFIX}; {command}"


def _is_django_test_file(path: str) -> bool:
    name = posixpath.basename(path)
    return name == "tests.py" or name.startswith("test_") or "/tests/" in path or "/test_" in path


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))
