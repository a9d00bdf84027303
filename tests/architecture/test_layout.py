"""The manual's map (docs/architecture.md) matches the folders: every package is listed, every
listed path exists (there and in the README's short tour), and every package says in its
docstring what it holds. The README stays a front door: at most 200 lines."""

import ast
import re

from tests.conftest import REPO_ROOT

ROOT = REPO_ROOT
DJANGO_FOLDERS = {"migrations", "management", "commands", "templatetags"}


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
