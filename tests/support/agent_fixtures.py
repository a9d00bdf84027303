"""Fixtures for the agent tests: the toy repository in a real sandbox, on each backend."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from runs.agents.contract import AgentContext, Budgets, ModelSettings, TaskView
from sandbox import open_sandbox
from sandbox.base import Sandbox, SandboxConfig
from sandbox.filesystem import chown_tree_for_agent
from tests.conftest import REPO_ROOT, TASKS_DIR

TOY_BUNDLE = REPO_ROOT / "examples/toy_repo.bundle"
TOY_COMMIT = "ea49502485e69bba84235ee0547d109820a0688a"
TOY_TEST_COMMAND = "PYTHONPATH=src python -m pytest -q tests/test_calc.py"
TOY_SOLUTION = (TASKS_DIR / "custom-dev/toy_fail_pytest/solution.patch").read_text()
LABELS = {"agentbench.test": "agents"}


def toy_workspace(root: Path) -> Path:
    """A workspace folder holding the toy repository at ``repo/``, owned by the sandbox user."""
    workspace = root / "workspace"
    workspace.mkdir()
    repo = workspace / "repo"
    subprocess.run(["git", "clone", "-q", str(TOY_BUNDLE), str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", TOY_COMMIT], check=True)
    chown_tree_for_agent(workspace)
    return workspace


@pytest.fixture
def toy_sandbox(tmp_path: Path, backend: str) -> Iterator[Sandbox]:
    """The toy repository in a started sandbox of each backend (unique name per test)."""
    config = SandboxConfig(
        name=f"ab-agents-{uuid.uuid4().hex[:12]}", workspace=toy_workspace(tmp_path), labels=LABELS
    )
    with open_sandbox(config, backend) as sandbox:
        yield sandbox


def agent_context(
    sandbox: Sandbox,
    artifacts_dir: Path,
    *,
    variant: str = "scripted",
    budgets: Budgets | None = None,
    gold_patch: str = "",
    **model: object,
) -> AgentContext:
    return AgentContext(
        sandbox=sandbox,
        task=TaskView(
            task_id="toy_fail_pytest",
            workdir="/workspace/repo",
            test_command=TOY_TEST_COMMAND,
            timeout_sec=60,
            problem_statement="mean() uses integer division; make tests/test_calc.py pass.",
            gold_patch=gold_patch,
        ),
        budgets=budgets or Budgets(max_steps=20, max_time_sec=300),
        model=ModelSettings(variant=variant, **model),  # type: ignore[arg-type]
        artifacts_dir=artifacts_dir,
    )
