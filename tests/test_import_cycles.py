"""No import cycles between modules: module-level imports of the project packages (ast, no
imports inside functions) form no cycle."""

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("benchsite", "runs", "tasks_app", "sandbox")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imported(nodes, package: str) -> set[str]:
    """The modules (and ``module.name`` candidates) the import statements among ``nodes``
    name, relative imports resolved against ``package``."""
    targets: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            targets.add(base)
            targets.update(f"{base}.{alias.name}" for alias in node.names)
    return targets


def _graph() -> dict[str, set[str]]:
    files = {_module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = _imported(ast.parse(path.read_text()).body, package)  # module level only
        graph[name] = {t for t in targets if t in files and t != name}
    return graph


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
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


def test_it_finds_no_import_cycle():
    cycle = _find_cycle(_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_it_names_a_cycle_when_there_is_one():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert _find_cycle(graph) == ["a", "b", "c", "a"]


# Which role folders a role may not import, anywhere in a module (imports inside functions
# too): the rules the package docstrings state. A role is a folder of runs/, tasks_app/ or
# benchsite/; "core" is runs' top-level modules (models, services, taxonomy, access, ...).
FORBIDDEN = {
    "runs.results": {"runs.web", "runs.api", "runs.cli", "runs.workers", "runs.pipeline",
                     "runs.demo", "runs.agents", "runs.services", "runs.gateway"},
    "runs.web": {"runs.api", "runs.cli", "runs.workers", "runs.pipeline", "runs.demo",
                 "runs.gateway"},
    "runs.api": {"runs.web", "runs.cli", "runs.workers", "runs.pipeline", "runs.demo",
                 "runs.gateway"},
    "runs.cli": {"runs.web"},
    "runs.workers": {"runs.web", "runs.api", "runs.cli", "runs.demo"},
    "runs.pipeline": {"runs.web", "runs.api", "runs.cli", "runs.workers", "runs.demo"},
    "runs.demo": {"runs.web", "runs.api", "runs.cli", "runs.workers", "runs.pipeline"},
    "runs.agents": {"runs.web", "runs.api", "runs.cli", "runs.workers", "runs.pipeline",
                    "runs.demo", "runs.results", "runs.models", "runs.services"},
    "runs.gateway": {"runs.web", "runs.api", "runs.cli", "runs.workers", "runs.pipeline",
                     "runs.demo", "runs.results", "runs.models", "runs.services"},
    # Pure: reads stored files into turns, whatever imports it (pages, API, imports).
    "runs.transcript": {"runs.web", "runs.api", "runs.cli", "runs.workers", "runs.pipeline",
                        "runs.demo", "runs.agents", "runs.results", "runs.models",
                        "runs.services", "runs.artifacts", "runs.access", "runs.model_configs",
                        "runs.data_version", "tasks_app", "benchsite"},
    "core": {"runs.web", "runs.api", "runs.cli", "runs.workers", "runs.demo"},
    "tasks_app.uploads": {"runs"},
}  # fmt: skip
# The only crossings, each the one place it happens (a lazy import inside one function).
EXCEPTIONS = {
    # Services enqueue through one function; tasks call services, never the reverse.
    ("runs.services", "runs.workers.tasks"),
    # `ab import-predictions --run` without workers calls the worker's task body directly.
    ("runs.imports.predictions", "runs.workers.tasks"),
}
CORE = {"runs.models", "runs.services", "runs.taxonomy", "runs.failfast", "runs.access",
        "runs.artifacts", "runs.artifact_storage", "runs.transcript", "runs.model_configs",
        "runs.data_version", "runs.conditions"}  # fmt: skip


def _role(module: str) -> str | None:
    if module in CORE:
        return "core"
    return next((r for r in FORBIDDEN if r != "core" and module.startswith(r + ".")), None)


def _crossings() -> list[str]:
    bad = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            name = _module_name(path)
            role = _role(name)
            if role is None or "migrations" in path.parts:
                continue
            package = name if path.name == "__init__.py" else name.rpartition(".")[0]
            # Every import, those inside functions too.
            for target in sorted(_imported(ast.walk(ast.parse(path.read_text())), package)):
                hit = next((f for f in FORBIDDEN[role] if (target + ".").startswith(f + ".")), None)
                allowed = any(
                    name == m and (target + ".").startswith(e + ".") for m, e in EXCEPTIONS
                )
                if hit and not allowed:
                    bad.append(f"{name} imports {target} ({role} may not import {hit})")
    return bad


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
