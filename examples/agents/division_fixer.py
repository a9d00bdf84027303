"""A minimal agent for the agent contract (runs/agents/contract.py): no model, a fixed idea.

It runs the task's tests, looks for a floor division (``//``) in the Python files the tests
import, reads that file, turns the ``//`` into ``/`` and applies the change as a patch, then
runs the tests again and says how it stopped. It fixes the toy task
(tasks/custom-dev/toy_fail_pytest) and nothing much else: it is here to show the shape.

Everything goes through ``Toolbox`` (runs/agents/tools.py), so its tool calls are logged to
events.jsonl, its commands' output to logs/ and its patches to diffs/, as for the built-in
agents; the pipeline grades the workspace itself afterwards.
"""

from __future__ import annotations

import difflib
import time

from runs.agents.contract import AgentContext, AgentOutcome
from runs.agents.events import EventLog
from runs.agents.tools import Toolbox
from runs.taxonomy import Reason


class DivisionFixer:
    name = "division-fixer"  # what the attempt's events and agent summary call it

    def run(self, ctx: AgentContext) -> AgentOutcome:
        started = time.monotonic()
        events = EventLog(ctx.artifacts_dir)
        tools = Toolbox(
            ctx.sandbox,
            workdir=ctx.task.workdir,
            artifacts_dir=ctx.artifacts_dir,
            strict_patch=ctx.model.strict_patch,
            default_timeout_sec=ctx.task.timeout_sec,
            events=events,
            deadline=started + ctx.budgets.max_time_sec,
        )
        events.emit("agent_start", agent=self.name, task=ctx.task.task_id)
        stop, reason, note = self._work(ctx, tools)
        outcome = AgentOutcome(
            reason=reason,
            stop=stop,
            tool_calls=tools.step,  # steps stays None: no model was called
            error_text="" if reason is None else f"{stop}: {note}",
            duration_sec=round(time.monotonic() - started, 3),
        )
        events.emit("agent_finish", stop=stop, reason=reason, error=outcome.error_text)
        return outcome

    def _work(self, ctx: AgentContext, tools: Toolbox) -> tuple[str, Reason | None, str]:
        tests = tools.run(ctx.task.test_command)
        if tests.exit_code == 0:
            return "tests_passed", None, ""
        found = tools.search("//", glob="*.py")
        hits = [h for h in found.hits if not h.path.startswith("tests/")]
        if not hits:
            return "gave_up", Reason.AGENT_GAVE_UP, "no floor division outside the tests"
        path = hits[0].path
        if tools.step >= ctx.budgets.max_steps:
            return "step_budget", Reason.AGENT_GAVE_UP, f"max_steps={ctx.budgets.max_steps}"
        tools.read_file(path)  # logged like any agent's look at the file
        # The exact bytes (read_file's text is for reading, and may be cut) for the diff.
        before = ctx.sandbox.read_file(f"{ctx.task.workdir}/{path}").decode()
        after = before.replace(" // ", " / ")
        diff = "".join(
            difflib.unified_diff(
                before.splitlines(keepends=True),
                after.splitlines(keepends=True),
                fromfile=f"a/{path}",
                tofile=f"b/{path}",
            )
        )
        patched = tools.apply_patch(diff)
        if not patched.ok:
            return "tool_error", Reason.TOOL_ERROR, f"[patch-apply-failed] {patched.error}"
        tests = tools.run(ctx.task.test_command)
        if tests.exit_code == 0:
            return "tests_passed", None, ""
        return "done", Reason.TESTS_FAILED, f"the tests still fail (exit {tests.exit_code})"
