"""Policies that need no model: scripted (the toy task's fixed walk), oracle (the gold patch)
and nop (nothing). They run through the same loop, tools and logs as the LLM agent, which makes
them the harness's own end-to-end check."""

from __future__ import annotations

from runs.agents.contract import AgentContext
from runs.agents.loop import Action, Decision, LoopState
from runs.agents.tools import RunResult, ToolResult

# The toy task's fix (the same change as tasks/custom-dev/toy_fail_pytest/solution.patch).
TOY_PATCH = """\
--- a/src/toy/calc.py
+++ b/src/toy/calc.py
@@ -11,4 +11,4 @@ def total(values):
 def mean(values):
     if not values:
         raise ValueError("mean of an empty list")
-    return total(values) // len(values)
+    return total(values) / len(values)
"""

NO_GOLD_PATCH = "[no-gold-patch] the task has no reference solution for the oracle to apply"


class ScriptedPolicy:
    """list files -> read calc.py -> search "def mean" -> apply the known fix; the loop then
    runs the tests."""

    name = "scripted"
    uses_llm = False

    def __init__(self) -> None:
        self.script = [
            Action("list_files", {"root": "."}),
            Action("read_file", {"path": "src/toy/calc.py"}),
            Action("search", {"query": "def mean", "glob": "*.py"}),
            Action("apply_patch", {"unified_diff": TOY_PATCH}),
        ]
        self.last: ToolResult | None = None

    def start(self, ctx: AgentContext, initial_tests: RunResult, state: LoopState) -> None:
        pass

    def decide(self, state: LoopState) -> Decision:
        if self.last is not None and self.last.tool == "apply_patch" and not self.last.ok:
            return Decision(stop="tool_error", note=f"[patch-apply-failed] {self.last.error}")
        if not self.script:
            return Decision(stop="done", note="the script is finished")
        return Decision(actions=[self.script.pop(0)])

    def observe(self, action: Action, result: ToolResult, observation: str) -> None:
        self.last = result


class OraclePolicy:
    """Applies the task's gold patch; the loop's test run after it decides."""

    name = "oracle"
    uses_llm = False

    def __init__(self) -> None:
        self.gold = ""
        self.command = ""
        self.command_env: dict[str, str] = {}
        self.applied: ToolResult | None = None

    def start(self, ctx: AgentContext, initial_tests: RunResult, state: LoopState) -> None:
        self.gold = ctx.task.gold_patch
        self.command = ctx.task.oracle_command
        self.command_env = dict(ctx.task.oracle_env)

    def decide(self, state: LoopState) -> Decision:
        if self.command:  # a Harbor task: its solution/solve.sh; the verifier decides after
            if self.applied is None:
                arguments: dict = {"command": self.command}
                if self.command_env:
                    arguments["env"] = self.command_env
                return Decision(actions=[Action("run", arguments)])
            code = getattr(self.applied, "exit_code", None)
            return Decision(stop="done", note=f"the task's solution script ran (exit {code})")
        if not self.gold.strip():
            return Decision(stop="gave_up", note=NO_GOLD_PATCH)
        if self.applied is None:
            return Decision(actions=[Action("apply_patch", {"unified_diff": self.gold})])
        if not self.applied.ok:
            return Decision(stop="tool_error", note=f"[patch-apply-failed] {self.applied.error}")
        return Decision(stop="done", note="the gold patch is applied")

    def observe(self, action: Action, result: ToolResult, observation: str) -> None:
        self.applied = result


class NopPolicy:
    """Does nothing: the tests fail as they did at baseline (a harness sanity check)."""

    name = "nop"
    uses_llm = False

    def start(self, ctx: AgentContext, initial_tests: RunResult, state: LoopState) -> None:
        pass

    def decide(self, state: LoopState) -> Decision:
        return Decision(stop="done", note="the no-op agent changes nothing")

    def observe(self, action: Action, result: ToolResult, observation: str) -> None:
        pass
