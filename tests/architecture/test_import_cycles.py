"""The house's import rules, read from the source (ast): every import counts, those inside
functions too; only imports under ``if TYPE_CHECKING:`` are left out (they never run: a type
named across a layer, e.g. the gateway's forwarder naming its server).

- No import cycle between modules, short or long (two files importing each other included),
  but through an edge of ``ALLOWED`` (at most 10, each with its reason).
- No cycle between the apps (``sandbox``, ``benchsite.accounts``, ``tasks_app``, ``runs``), and
  ``tasks_app`` imports nothing of ``runs`` (runs may import tasks_app). The project modules
  (``benchsite``'s settings, URLs, API root, CLI) wire the apps together and are not an app;
  the module check covers them.
- Each role folder imports only what its package docstring allows (``FORBIDDEN``).
- The environment builder, ``sandbox.environments``, loads no Django, directly or through what
  it imports.
"""

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.conftest import REPO_ROOT

ROOT = REPO_ROOT
PACKAGES = ("benchsite", "runs", "tasks_app", "sandbox")
APPS = ("benchsite.accounts", "sandbox", "tasks_app", "runs")  # the longest prefix wins

# Edges that may close a cycle or cross a role's rule, each the one place it happens.
ALLOWED: dict[tuple[str, str], str] = {
    ("runs.services", "runs.workers.tasks"): (
        "the one enqueue: services send attempts to the Celery task (lazily, which also keeps "
        "Celery out of commands that send nothing); the tasks call services at module level"
    ),
    ("runs.imports.predictions", "runs.workers.tasks"): (
        "`ab import-predictions --run` without workers runs the worker's task body in-process"
    ),
}
MAX_ALLOWED = 10


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(tree: ast.AST, *, type_checking: bool = False):
    """Every import statement in ``tree``, at any depth; those under ``if TYPE_CHECKING:``
    only when ``type_checking``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        for child in ast.iter_child_nodes(node):
            if type_checking or not _is_type_checking(child):
                stack.append(child)


def _targets(node: ast.Import | ast.ImportFrom, package: str, modules: set[str]) -> set[str]:
    """The project modules one import statement loads: ``from a import b`` loads ``a.b`` when
    that is a module, else ``a`` (a name defined in ``a``)."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names if alias.name in modules}
    base = node.module or ""
    if node.level:
        up = package.split(".")[: len(package.split(".")) - node.level + 1]
        base = ".".join(up + ([base] if base else []))
    found = set()
    for alias in node.names:
        name = f"{base}.{alias.name}"
        found.add(name if name in modules else base)
    return found & modules


def _files(root: Path) -> dict[str, Path]:
    return {
        _module_name(p, root): p
        for pkg in PACKAGES
        if (root / pkg).is_dir()
        for p in (root / pkg).rglob("*.py")
        if "migrations" not in p.parts
    }


def _graph(root: Path = ROOT, *, type_checking: bool = False) -> dict[str, set[str]]:
    files = _files(root)
    modules = set(files)
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text())
        targets: set[str] = set()
        for node in _import_nodes(tree, type_checking=type_checking):
            targets |= _targets(node, package, modules)
        graph[name] = targets - {name}
    return graph


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def _without_allowed(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    return {a: {b for b in targets if (a, b) not in ALLOWED} for a, targets in graph.items()}


def _app(module: str) -> str | None:
    return next((app for app in APPS if module == app or module.startswith(app + ".")), None)


def _app_edges(graph: dict[str, set[str]]) -> dict[tuple[str, str], list[str]]:
    """App -> app, with the module imports that make each edge (ALLOWED ones left out)."""
    edges: dict[tuple[str, str], list[str]] = {}
    for a, targets in graph.items():
        for b in sorted(targets):
            pair = (_app(a), _app(b))
            if None not in pair and pair[0] != pair[1] and (a, b) not in ALLOWED:
                edges.setdefault(pair, []).append(f"{a} -> {b}")  # type: ignore[arg-type]
    return edges


def test_it_finds_no_import_cycle_counting_imports_inside_functions():
    cycle = _find_cycle(_without_allowed(_graph()))
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_no_app_imports_an_app_that_imports_it_back():
    edges = _app_edges(_graph(type_checking=True))
    app_graph: dict[str, set[str]] = {}
    for a, b in edges:
        app_graph.setdefault(a, set()).add(b)
    cycle = _find_cycle(app_graph)
    hops = zip(cycle or [], (cycle or [])[1:], strict=False)
    assert cycle is None, (
        "app cycle: "
        + " -> ".join(cycle or [])
        + "".join(f"\n  {a} -> {b}: {', '.join(edges[a, b][:5])}" for a, b in hops)
    )


def test_tasks_app_imports_nothing_of_runs():
    """Not even under TYPE_CHECKING: the run side imports tasks_app, never the reverse."""
    edges = _app_edges(_graph(type_checking=True))
    assert edges.get(("tasks_app", "runs"), []) == []


def test_the_allow_list_is_short_and_every_entry_is_still_needed():
    graph = _graph()
    assert len(ALLOWED) <= MAX_ALLOWED
    assert all(len(reason) > 20 for reason in ALLOWED.values())
    stale = [
        (a, b)
        for a, b in ALLOWED
        if not any(t == b or t.startswith(b + ".") for t in graph.get(a, ()))
    ]
    assert stale == [], "allowed imports no longer made: remove them from ALLOWED"


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def test_it_names_a_two_file_loop_made_by_an_import_inside_a_function(tmp_path):
    _write(
        tmp_path,
        {
            "runs/__init__.py": "",
            "runs/a.py": "from runs.b import thing\n",
            "runs/b.py": "def thing():\n    from runs import a\n",
            "runs/c.py": "import typing\nif typing.TYPE_CHECKING:\n    from runs import a\n",
        },
    )
    graph = _graph(tmp_path)
    assert graph["runs.c"] == set()  # a type-only import is no runtime edge
    assert _find_cycle(graph) == ["runs.a", "runs.b", "runs.a"]


def test_it_sees_tasks_app_importing_runs_inside_a_function(tmp_path):
    _write(
        tmp_path,
        {
            "runs/__init__.py": "",
            "runs/models.py": "import tasks_app.models\n",
            "tasks_app/__init__.py": "",
            "tasks_app/models.py": "",
            "tasks_app/views.py": "def page():\n    from runs.models import Run\n",
        },
    )
    edges = _app_edges(_graph(tmp_path, type_checking=True))
    assert edges[("tasks_app", "runs")] == ["tasks_app.views -> runs.models"]
    assert _find_cycle({"tasks_app": {"runs"}, "runs": {"tasks_app"}}) == [
        "runs",
        "tasks_app",
        "runs",
    ]


def test_the_builder_loads_no_django():
    """Every module of sandbox.environments imported in a fresh interpreter where importing
    django, tasks_app, runs or benchsite raises: it must not need them, even indirectly."""
    blocker = textwrap.dedent(
        """
        import importlib, pkgutil, sys

        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in {"django", "tasks_app", "runs", "benchsite"}:
                    raise ImportError(f"blocked: {name}")
                return None

        sys.meta_path.insert(0, Block())
        """
    )
    check = blocker + textwrap.dedent(
        """
        import sandbox.environments as pkg
        names = sorted(m.name for m in pkgutil.iter_modules(pkg.__path__))
        for name in names:
            importlib.import_module(f"sandbox.environments.{name}")
        print("IMPORTED", len(names))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    modules = list((ROOT / "sandbox" / "environments").glob("[!_]*.py"))
    assert done.stdout.split() == ["IMPORTED", str(len(modules))]
    # The blocker is not vacuous: a module that needs Django fails under it.
    refused = subprocess.run(
        [sys.executable, "-c", blocker + "import tasks_app.swebench.importer"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert refused.returncode != 0 and "blocked: " in refused.stderr


# Which role folders a role may not import, anywhere in a module (imports inside functions
# too): the rules the package docstrings state. A role is a folder of runs/, tasks_app/ or
# benchsite/; "core" is runs' top-level modules (models, services, taxonomy, ...).
FORBIDDEN = {
    "runs.results": {
        "runs.web",
        "runs.api",
        "runs.cli",
        "runs.workers",
        "runs.pipeline",
        "runs.demo",
        "runs.agents",
        "runs.services",
        "runs.gateway",
        "runs.imports",
    },
    "runs.web": {
        "runs.api",
        "runs.cli",
        "runs.workers",
        "runs.pipeline",
        "runs.demo",
        "runs.gateway",
        "runs.imports",
    },
    "runs.api": {
        "runs.web",
        "runs.cli",
        "runs.workers",
        "runs.pipeline",
        "runs.demo",
        "runs.gateway",
        "runs.imports",
    },
    "runs.cli": {"runs.web", "runs.imports"},
    "runs.workers": {"runs.web", "runs.api", "runs.cli", "runs.demo", "runs.imports"},
    "runs.pipeline": {
        "runs.web",
        "runs.api",
        "runs.cli",
        "runs.workers",
        "runs.demo",
        "runs.imports",
    },
    "runs.demo": {"runs.web", "runs.api", "runs.cli", "runs.workers", "runs.pipeline"},
    "runs.agents": {
        "runs.web",
        "runs.api",
        "runs.cli",
        "runs.workers",
        "runs.pipeline",
        "runs.demo",
        "runs.results",
        "runs.models",
        "runs.services",
        "runs.imports",
    },
    # The gateway imports nothing of the agents (CLI agents run through it, one way).
    "runs.gateway": {
        "runs.web",
        "runs.api",
        "runs.cli",
        "runs.workers",
        "runs.pipeline",
        "runs.demo",
        "runs.results",
        "runs.models",
        "runs.services",
        "runs.agents",
        "runs.imports",
    },
    # Results produced elsewhere, with their doors (api, admin, cli): never the other doors.
    "runs.imports": {"runs.web", "runs.api", "runs.demo", "runs.pipeline", "runs.workers"},
    # Exports and the bundle import, with their doors (api, cli): never the other doors.
    "runs.bundles": {"runs.web", "runs.api", "runs.demo", "runs.pipeline", "runs.workers"},
    # Pure: reads stored files into turns, whatever imports it (pages, API, imports).
    "runs.transcript": {
        "runs.web",
        "runs.api",
        "runs.cli",
        "runs.workers",
        "runs.pipeline",
        "runs.demo",
        "runs.agents",
        "runs.results",
        "runs.models",
        "runs.services",
        "runs.artifacts",
        "runs.model_configs",
        "runs.data_version",
        "runs.imports",
        "tasks_app",
        "benchsite",
    },
    "core": {"runs.web", "runs.api", "runs.cli", "runs.workers", "runs.demo", "runs.imports"},
    "benchsite.accounts": {"runs", "tasks_app"},
    "tasks_app": {"runs"},
    # No Django, not even inside a function (the subprocess test sees module-level loads).
    "sandbox": {"runs", "tasks_app", "benchsite", "django"},
}
CORE = {
    "runs.models",
    "runs.services",
    "runs.taxonomy",
    "runs.failfast",
    "runs.llm_errors",
    "runs.pricing",
    "runs.artifacts",
    "runs.artifact_storage",
    "runs.transcript",
    "runs.model_configs",
    "runs.data_version",
    "runs.conditions",
}


def _role(module: str) -> str | None:
    if module in CORE:
        return "core"
    roles = [r for r in FORBIDDEN if r != "core" and module.startswith(r + ".")]
    return max(roles, key=len, default=None)


def _crossings() -> list[str]:
    bad = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            name = _module_name(path, ROOT)
            role = _role(name)
            if role is None or "migrations" in path.parts:
                continue
            package = name if path.name == "__init__.py" else name.rpartition(".")[0]
            tree = ast.parse(path.read_text())
            targets = set()
            for node in _import_nodes(tree, type_checking=True):
                if isinstance(node, ast.Import):
                    targets |= {alias.name for alias in node.names}
                else:
                    targets |= _all_names(node, package)
            for target in sorted(targets):
                hit = next((f for f in FORBIDDEN[role] if (target + ".").startswith(f + ".")), None)
                allowed = any(name == m and (target + ".").startswith(e + ".") for m, e in ALLOWED)
                if hit and not allowed:
                    bad.append(f"{name} imports {target} ({role} may not import {hit})")
    return bad


def _all_names(node: ast.ImportFrom, package: str) -> set[str]:
    """``from a import b`` names ``a`` and ``a.b``: the role check reads both."""
    base = node.module or ""
    if node.level:
        up = package.split(".")[: len(package.split(".")) - node.level + 1]
        base = ".".join(up + ([base] if base else []))
    return {base} | {f"{base}.{alias.name}" for alias in node.names}


def test_each_role_imports_only_what_its_package_docstring_allows():
    assert _crossings() == []


def test_the_role_check_sees_a_forbidden_import(tmp_path, monkeypatch):
    """The check is not vacuous: a results module importing a page is reported."""
    pkg = tmp_path / "runs" / "results"
    pkg.mkdir(parents=True)
    (pkg / "bad.py").write_text("def f():\n    from runs.web.results import leaderboard\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "PACKAGES", ("runs",))
    assert _crossings() == [
        "runs.results.bad imports runs.web.results (runs.results may not import runs.web)",
        "runs.results.bad imports runs.web.results.leaderboard"
        " (runs.results may not import runs.web)",
    ]


def test_the_role_check_sees_django_inside_a_sandbox_function(tmp_path, monkeypatch):
    _write(
        tmp_path,
        {"sandbox/environments/bad.py": "def f():\n    from django.conf import settings\n"},
    )
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "PACKAGES", ("sandbox",))
    assert _crossings() == [
        "sandbox.environments.bad imports django.conf (sandbox may not import django)",
        "sandbox.environments.bad imports django.conf.settings (sandbox may not import django)",
    ]
