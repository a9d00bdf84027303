"""Times the agent tools and the scripted agent on the toy repository, per sandbox backend.

    python bench/agent_tools.py [--backend docker|bwrap|both] [--repeat 10]

Prints the median and worst latency of each tool call (each one is at least one command in the
sandbox) and the scripted agent's whole loop (initial tests, four tool calls, tests after the
patch). No database: the tools and the loop only need a sandbox and a folder.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchsite.settings")

from runs.agents.contract import AgentContext, Budgets, ModelSettings, TaskView  # noqa: E402
from runs.agents.loop import AgentLoop  # noqa: E402
from runs.agents.simple import TOY_PATCH, ScriptedPolicy  # noqa: E402
from runs.agents.tools import Toolbox  # noqa: E402
from sandbox import open_sandbox  # noqa: E402
from sandbox.base import SandboxConfig  # noqa: E402
from sandbox.filesystem import chown_tree_for_agent  # noqa: E402

BUNDLE = ROOT / "examples" / "toy_repo.bundle"
TEST_COMMAND = "PYTHONPATH=src python -m pytest -q tests/test_calc.py"


def workspace(root: Path) -> Path:
    ws = root / "workspace"
    ws.mkdir()
    subprocess.run(["git", "clone", "-q", str(BUNDLE), str(ws / "repo")], check=True)
    chown_tree_for_agent(ws)
    return ws


def timed(call) -> float:
    started = time.perf_counter()
    result = call()
    assert result.ok or getattr(result, "exit_code", None) is not None, result
    return time.perf_counter() - started


def bench_backend(backend: str, repeat: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        config = SandboxConfig(
            name=f"ab-bench-agents-{uuid.uuid4().hex[:10]}",
            workspace=workspace(Path(tmp)),
            labels={"agentbench.bench": "agents"},
        )
        with open_sandbox(config, backend) as sandbox:
            tools = Toolbox(sandbox, workdir="/workspace/repo", artifacts_dir=Path(tmp) / "a")
            calls = {
                "list_files": lambda: tools.list_files(),
                "read_file": lambda: tools.read_file("src/toy/calc.py"),
                "search": lambda: tools.search("def mean"),
                "run (echo)": lambda: tools.run("echo hi"),
                "apply_patch+revert": lambda: (
                    tools.apply_patch(TOY_PATCH),
                    tools.run("git checkout -q -- src/toy/calc.py"),
                )[0],
            }
            print(f"\n{backend}: tool latency over {repeat} calls (seconds)")
            print(f"{'tool':<20}{'median':>8}{'max':>8}")
            for name, call in calls.items():
                times = [timed(call) for _ in range(repeat)]
                print(f"{name:<20}{statistics.median(times):>8.3f}{max(times):>8.3f}")
            loops = []
            for index in range(3):
                tools.run("git checkout -q -- .")
                ctx = AgentContext(
                    sandbox=sandbox,
                    task=TaskView("toy", "/workspace/repo", TEST_COMMAND, 60),
                    budgets=Budgets(max_steps=20, max_time_sec=300),
                    model=ModelSettings("scripted"),
                    artifacts_dir=Path(tmp) / f"loop{index}",
                )
                started = time.perf_counter()
                outcome = AgentLoop(ctx, ScriptedPolicy()).run()
                loops.append(time.perf_counter() - started)
                assert outcome.reason is None, outcome
            print(f"{'scripted agent loop':<20}{statistics.median(loops):>8.3f}{max(loops):>8.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("docker", "bwrap", "both"), default="both")
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    import django

    django.setup()
    for backend in ("docker", "bwrap") if args.backend == "both" else (args.backend,):
        bench_backend(backend, args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
