"""The manual's map (docs/architecture.md) matches the folders: every package is listed, every
listed path exists (there and in the README's short tour), and every package says in its
docstring what it holds. The README stays a front door: at most 200 lines.

The tests mirror the packages (docs/development.md, "Where a test lives"): a test lives at
``tests/<package path>/test_<what>.py``, so the tests of ``runs/gateway/`` are in
``tests/runs/gateway/``. No test file sits directly under tests/, every folder of tests/ names
a package folder or module of the app (but the few of ``NOT_MIRRORS``), and what the tests
share is in ``tests/support/``. A file in the wrong place fails here with where it belongs."""

import ast
import re
from collections import Counter
from pathlib import Path

from tests.conftest import REPO_ROOT
from tests.support import parallel

ROOT = REPO_ROOT
TESTS = ROOT / "tests"
APPS = ("benchsite", "runs", "tasks_app", "sandbox")
DJANGO_FOLDERS = {"migrations", "management", "commands", "templatetags"}
# Folders of tests/ that mirror nothing of the app, each with why, and whether a test file may
# live there.
NOT_MIRRORS = {
    "support": ("what the tests share: fixtures, fake provider, ab runner, stacks", False),
    "data": ("recorded files the tests read (model_calls/): data, no Python", False),
    "architecture": ("rules over the whole tree (import rules, these maps): no one package", True),
}
# The only Python files directly under tests/.
TOP_FILES = {"__init__.py", "conftest.py"}


def _table_paths(text: str) -> list[str]:
    """The paths a tour's table names in its first column (several per cell allowed)."""
    paths = []
    for cell in re.findall(r"^\| ([^|]+) \|", text, flags=re.M):
        paths += re.findall(r"`([^`]+/)`", cell)
    return paths


def _tour_paths() -> list[str]:
    return _table_paths((ROOT / "docs" / "architecture.md").read_text())


def _readme_tour_paths() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    return _table_paths(readme.split("## A short tour", 1)[1].split("\n## ", 1)[0])


def _packages() -> list[str]:
    found = []
    for pkg in ("benchsite", "runs", "tasks_app", "sandbox"):
        for init in (ROOT / pkg).rglob("__init__.py"):
            folder = init.parent.relative_to(ROOT)
            if not DJANGO_FOLDERS & set(folder.parts):
                found.append(f"{folder}/")
    return sorted(found)


def test_every_package_is_in_the_tour():
    listed = set(_tour_paths())
    assert [p for p in _packages() if p not in listed] == []


def test_every_path_in_the_tour_exists():
    assert [p for p in _tour_paths() if not (ROOT / p).exists()] == []


def test_every_path_in_the_readmes_short_tour_exists():
    paths = _readme_tour_paths()
    assert len(paths) >= 10
    assert [p for p in paths if not (ROOT / p).exists()] == []


def test_the_readme_is_a_front_door():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200


def test_every_package_has_a_docstring():
    missing = [
        p
        for p in _packages()
        if not ast.get_docstring(ast.parse((ROOT / p / "__init__.py").read_text()))
    ]
    assert missing == []


# -- the tests mirror the packages ------------------------------------------------------------


def _test_folders() -> list[Path]:
    """Every folder under tests/ holding Python, but inside the folders that mirror nothing."""
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        folder = path.parent
        parts = folder.relative_to(TESTS).parts
        if parts and parts[0] in NOT_MIRRORS:
            continue
        if folder != TESTS and "__pycache__" not in parts and folder not in found:
            found.append(folder)
    return found


def _mirrors(folder: Path) -> bool:
    """Whether ``tests/<path>`` names a package folder (``<path>/__init__.py``) or a module
    (``<path>.py``) of the app."""
    path = folder.relative_to(TESTS)
    if path.parts[0] not in APPS:
        return False
    return (ROOT / path / "__init__.py").is_file() or (ROOT / path).with_suffix(".py").is_file()


def _package_folder(module: str) -> str:
    """The app's package folder that holds ``module`` (a.b.c -> a/b when c is a module)."""
    parts = module.split(".")
    while len(parts) > 1 and not (ROOT.joinpath(*parts) / "__init__.py").is_file():
        parts.pop()
    return "/".join(parts)


def where_it_belongs(test_file: Path) -> str:
    """A hint for a misplaced test file: the app's package it imports most (the deepest on a
    tie). The code it mainly tests decides; the imports are only a guess at that."""
    counts: Counter[str] = Counter()
    for node in ast.walk(ast.parse(test_file.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            modules = [node.module]
        elif isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        else:
            continue
        counts.update(_package_folder(m) for m in modules if m.split(".")[0] in APPS)
    if not counts:
        return "tests/<package path>/"
    best = max(counts, key=lambda folder: (counts[folder], folder.count("/")))
    return f"tests/{best}/"


def _misplaced(test_file: Path, why: str) -> str:
    relative = test_file.relative_to(ROOT)
    return (
        f"{relative} {why}: a test lives at tests/<package path>/test_<what>.py for the code it "
        f"mainly tests (docs/development.md); by its imports, in {where_it_belongs(test_file)}"
    )


def test_no_test_file_sits_directly_under_tests():
    misplaced = [
        _misplaced(path, "sits directly under tests/") for path in sorted(TESTS.glob("test_*.py"))
    ]
    assert not misplaced, "\n".join(misplaced)


def test_every_test_folder_mirrors_a_package_or_module_of_the_app():
    strays = [
        f"{folder.relative_to(ROOT)}/ names no package folder or module of the app: rename it "
        f"after one, or list it in NOT_MIRRORS with why"
        for folder in _test_folders()
        if not _mirrors(folder)
    ]
    assert not strays, "\n".join(strays)


def test_every_test_file_sits_in_a_folder_that_mirrors_the_app():
    misplaced = []
    for path in sorted(TESTS.rglob("test_*.py")):
        parts = path.parent.relative_to(TESTS).parts
        if not parts:
            continue  # the test above says where these go
        listed = NOT_MIRRORS.get(parts[0])
        if listed and not listed[1]:
            misplaced.append(
                _misplaced(path, f"sits in tests/{parts[0]}/, which holds {listed[0]}")
            )
        elif not listed and not _mirrors(path.parent):
            misplaced.append(_misplaced(path, "sits in a folder that mirrors nothing of the app"))
    assert not misplaced, "\n".join(misplaced)


def test_only_conftest_is_a_module_of_tests_own():
    """Fixture modules and helpers go to tests/support/ (and a fixture module on conftest's
    ``pytest_plugins``); a test file imports them as ``tests.support.<name>``."""
    strays = [
        f"tests/{path.name} belongs in tests/support/{path.name}"
        for path in sorted(TESTS.glob("*.py"))
        if path.name not in TOP_FILES and not path.name.startswith("test_")
    ]
    assert not strays, "\n".join(strays)


def test_every_test_folder_is_a_package():
    """Two folders may hold test files of one name (tests/runs/cli/ and tests/tasks_app/cli/):
    pytest tells them apart by their package."""
    folders = {path.parent for path in TESTS.rglob("*.py") if "__pycache__" not in path.parts}
    missing = sorted(
        f"{folder.relative_to(ROOT)}/ has no __init__.py"
        for folder in folders
        if not (folder / "__init__.py").is_file()
    )
    assert not missing, "\n".join(missing)


def test_the_parallel_tables_name_test_files_that_exist():
    """tests/support/parallel.py names modules by their path under tests/: a moved or renamed
    file must take its group, time limit and place in the queue with it."""
    named = [*parallel.MODULE_GROUPS, *parallel.TIMEOUTS, *parallel.FIRST]
    gone = [
        f"{name} is no file under tests/: name it by its path there (e.g. runs/web/test_x.py)"
        for name in named
        if not (TESTS / name).is_file()
    ]
    assert not gone, "\n".join(gone)
