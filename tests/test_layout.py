"""The README's tour ("where things are") matches the folders: every package is listed, every
listed path exists, and every package says in its docstring what it holds."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DJANGO_FOLDERS = {"migrations", "management", "commands", "templatetags"}


def _tour_paths() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## A short tour", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([^`]+)`", section, flags=re.M)


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


def test_every_package_has_a_docstring():
    missing = [
        p
        for p in _packages()
        if not ast.get_docstring(ast.parse((ROOT / p / "__init__.py").read_text()))
    ]
    assert missing == []
