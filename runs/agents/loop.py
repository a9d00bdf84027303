"""The agent loop: budgets, automatic test runs, stop reasons mapped to the failure taxonomy.

A *policy* decides what to do next (a fixed script, a gold patch, a language model); the loop
executes its tool calls through the ``Toolbox``, runs the task's tests after every applied
patch, keeps the budgets and turns the way it stopped into an ``AgentOutcome``:

==================  ================  =========================================
stop                reason            when
==================  ================  =========================================
tests_passed        None              the task's tests pass
step_budget         AGENT_GAVE_UP     max_steps tool calls used
token_budget        AGENT_GAVE_UP     max_tokens used
cost_budget         AGENT_GAVE_UP     max_cost_usd spent
gave_up             AGENT_GAVE_UP     the policy gave up
time_budget         TIMEOUT           max_time_sec passed (is_timeout, "[timeout]")
repeated_failures   TOOL_ERROR        the same failing call N times in a row
llm_error           LLM_ERROR         the model API failed (permanent or retries exhausted)
done                TESTS_FAILED      the policy finished but the tests still fail
==================  ================  =========================================
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from runs.agents.contract import AgentContext, AgentOutcome
from runs.agents.events import EventLog
from runs.agents.tools import RunResult, Toolbox, ToolResult
from runs.llm_errors import LLMError
from runs.pricing import AttemptCost
from runs.taxonomy import Reason

TEST_OUTPUT_CHARS = 6_000
EMPTY_RUN_MIN_SEC = 1.0
LLM_DEADLINE_SLACK_SEC = 1.0

STOP_REASONS: dict[str, Reason | None] = {
    "tests_passed": None,
    "step_budget": Reason.AGENT_GAVE_UP,
    "token_budget": Reason.AGENT_GAVE_UP,
    "cost_budget": Reason.AGENT_GAVE_UP,
    "gave_up": Reason.AGENT_GAVE_UP,
    "time_budget": Reason.TIMEOUT,
    "repeated_failures": Reason.TOOL_ERROR,
    "tool_error": Reason.TOOL_ERROR,
    "llm_error": Reason.LLM_ERROR,
    "done": Reason.TESTS_FAILED,
}


@dataclass(frozen=True, slots=True)
class Action:
    tool: str
    arguments: Any
    call_id: str = ""  # the model's tool-call id, to answer it


@dataclass
class Decision:
    actions: list[Action] = field(default_factory=list)
    stop: str | None = None  # "done" | "gave_up" | "tool_error"
    note: str = ""  # why it stopped, for the outcome's error text


@dataclass
class LoopState:
    deadline: float  # time.monotonic() value when max_time_sec runs out
    events: EventLog
    steps: int = 0
    # Model usage, added by the policy as each request returns (so a request that is followed
    # by an error still counts).
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0  # the priced calls' cost (an unpriced one's is in cost_detail's reason)
    cost_detail: AttemptCost | None = None
    llm_requests: int = 0
    llm_produced_output: bool = False  # any content or tool call, whatever ``usage`` says
    last_tests: RunResult | None = None
    tests_stale: bool = True  # files may have changed since the last test run
    failure_fingerprint: str = ""
    failure_count: int = 0


class Policy(Protocol):
    name: str
    uses_llm: bool

    def start(self, ctx: AgentContext, initial_tests: RunResult, state: LoopState) -> None: ...

    def decide(self, state: LoopState) -> Decision: ...

    def observe(self, action: Action, result: ToolResult, observation: str) -> None: ...


def tests_observation(result: RunResult) -> str:
    status = "PASSED" if result.exit_code == 0 else f"FAILED (exit code {result.exit_code})"
    if result.timed_out:
        status += ", timed out"
    output = (result.stdout + "\n" + result.stderr).strip()
    if len(output) > TEST_OUTPUT_CHARS:
        output = "[...]\n" + output[-TEST_OUTPUT_CHARS:]
    return f"Tests {status}: {result.command}\n{output}"


class AgentLoop:
    def __init__(self, ctx: AgentContext, policy: Policy):
        self.ctx = ctx
        self.policy = policy
        self.events = EventLog(ctx.artifacts_dir)
        self.started = time.monotonic()
        self.deadline = self.started + ctx.budgets.max_time_sec
        self.state = LoopState(deadline=self.deadline, events=self.events)
        self.toolbox = Toolbox(
            ctx.sandbox,
            workdir=ctx.task.workdir,
            artifacts_dir=ctx.artifacts_dir,
            strict_patch=ctx.model.strict_patch,
            default_timeout_sec=ctx.task.timeout_sec,
            allow_network=ctx.task.allow_network,
            events=self.events,
            deadline=self.deadline,
        )
        self._test_runs = 0
        self.llm_error: LLMError | None = None
        # SWE-bench with a policy that reads no test output (oracle, nop): the graded tests
        # run after the agent, so test runs inside the loop would only cost time.
        self.auto_tests = not (ctx.task.hidden_tests and not policy.uses_llm)

    def run(self) -> AgentOutcome:
        budgets = self.ctx.budgets
        self.events.emit(
            "agent_start",
            agent=self.policy.name,
            task=self.ctx.task.task_id,
            max_steps=budgets.max_steps,
            max_time_sec=budgets.max_time_sec,
            max_tokens=budgets.max_tokens,
            max_cost_usd=budgets.max_cost_usd,
            repeated_failure_threshold=budgets.repeated_failure_threshold,
            strict_patch=self.ctx.model.strict_patch,
        )
        if self.auto_tests:
            initial = self.run_tests()
        else:
            initial = RunResult(
                tool="run_tests", ok=False, error="not run: the graded tests run after the agent"
            )
        if initial.exit_code == 0 and not self.ctx.task.hidden_tests:
            return self.finish("tests_passed", "the tests already pass")
        self.policy.start(self.ctx, initial, self.state)
        stop, note = self._steps()
        stale = self.state.tests_stale and self.auto_tests
        if stop not in ("tests_passed", "time_budget", "llm_error") and stale:
            self.run_tests()
        return self.finish(stop, note)

    def _steps(self) -> tuple[str, str]:
        budgets = self.ctx.budgets
        state = self.state
        while True:
            over = self._over_budget()
            if over:
                return over
            try:
                decision = self.policy.decide(state)
            except LLMError as exc:
                # A request cut short by the time budget is the budget's doing, not the API's.
                if time.monotonic() >= self.deadline - LLM_DEADLINE_SLACK_SEC:
                    return "time_budget", f"max_time_sec={budgets.max_time_sec:g} passed ({exc})"
                self.llm_error = exc
                return "llm_error", str(exc)
            if decision.stop:
                return decision.stop, decision.note
            if not decision.actions:
                return "done", decision.note or "the agent stopped"
            for action in decision.actions:
                if state.steps >= budgets.max_steps:
                    return "step_budget", f"max_steps={budgets.max_steps} used"
                if time.monotonic() >= self.deadline:
                    return "time_budget", f"max_time_sec={budgets.max_time_sec:g} passed"
                stop = self._act(action)
                if stop:
                    return stop

    def _act(self, action: Action) -> tuple[str, str] | None:
        state = self.state
        result = self.toolbox.call(action.tool, action.arguments)
        state.steps += 1
        observation = result.observation()
        passed = False
        if action.tool == "run":
            state.tests_stale = True  # a command may have changed files
        if action.tool == "apply_patch" and result.ok and self.auto_tests:
            state.tests_stale = True
            tests = self.run_tests()
            observation += "\n\n" + tests_observation(tests)
            passed = tests.exit_code == 0
        failed = not result.ok
        if failed:
            fingerprint = result.fingerprint()
            if fingerprint == state.failure_fingerprint:
                state.failure_count += 1
            else:
                state.failure_fingerprint, state.failure_count = fingerprint, 1
        else:
            state.failure_fingerprint, state.failure_count = "", 0
        self.policy.observe(action, result, observation)
        if passed:
            return "tests_passed", ""
        threshold = self.ctx.budgets.repeated_failure_threshold
        if failed and state.failure_count >= threshold:
            return "repeated_failures", f"{threshold} identical failed calls: {result.error[:300]}"
        return None

    def _over_budget(self) -> tuple[str, str] | None:
        budgets, state = self.ctx.budgets, self.state
        if time.monotonic() >= self.deadline:
            return "time_budget", f"max_time_sec={budgets.max_time_sec:g} passed"
        if state.steps >= budgets.max_steps:
            return "step_budget", f"max_steps={budgets.max_steps} used"
        tokens = state.tokens_in + state.tokens_out
        if budgets.max_tokens is not None and tokens >= budgets.max_tokens:
            return "token_budget", f"max_tokens={budgets.max_tokens} used"
        if budgets.max_cost_usd is not None and state.cost_usd >= budgets.max_cost_usd:
            return "cost_budget", f"max_cost_usd={budgets.max_cost_usd:g} spent"
        return None

    def run_tests(self) -> RunResult:
        self._test_runs += 1
        label = "tests_initial" if self._test_runs == 1 else f"tests_{self._test_runs:04d}"
        task = self.ctx.task
        self.events.emit("tests_start", run=self._test_runs, command=task.test_command)
        result = self.toolbox.run_tests(task.test_command, task.timeout_sec, label)
        self.events.emit(
            "tests_finish",
            run=self._test_runs,
            exit_code=result.exit_code,
            timed_out=result.timed_out,
            duration_sec=round(result.duration_sec, 3),
            artifact=result.artifact,
            output=(result.stdout + result.stderr)[-2000:],
        )
        self.state.last_tests = result
        self.state.tests_stale = False
        return result

    def finish(self, stop: str, note: str) -> AgentOutcome:
        state = self.state
        duration = time.monotonic() - self.started
        passed = state.last_tests is not None and state.last_tests.exit_code == 0
        if not self.auto_tests and stop == "done":
            reason = None  # the final stage's graded tests decide
        elif passed and stop != "time_budget":
            reason = None
            stop = "tests_passed" if stop == "done" else stop
        else:
            reason = STOP_REASONS.get(stop, Reason.UNKNOWN)
        outcome = AgentOutcome(
            reason=reason,
            stop=stop,
            tokens_in=state.tokens_in,
            tokens_out=state.tokens_out,
            cost_usd=round(state.cost_usd, 6),
            cost_detail=state.cost_detail,
            tool_calls=state.steps,
            # Model API calls: one a step for a policy that asks a model, none (no figure)
            # for the scripted, oracle and nop policies.
            steps=state.steps if self.policy.uses_llm else None,
            duration_sec=round(duration, 3),
        )
        if reason is Reason.TIMEOUT:
            outcome.is_timeout = True
            outcome.error_text = f"[timeout] agent stopped: {note}"
        elif reason is Reason.LLM_ERROR:
            outcome.llm_error_kind = self.llm_error.kind if self.llm_error else "transient"
            outcome.error_text = f"[llm-{outcome.llm_error_kind}] {note}"
        elif reason is not None:
            outcome.error_text = f"{stop}: {note}" if note else stop
            if reason is Reason.TESTS_FAILED and state.last_tests is not None:
                outcome.error_text += "\n" + tests_observation(state.last_tests)[-1500:]
        if self.policy.uses_llm:
            _tag_empty_run(outcome, state)
        self.events.emit(
            "agent_finish",
            stop=outcome.stop,
            reason=outcome.reason.value if outcome.reason else None,
            steps=outcome.steps,
            tokens_in=outcome.tokens_in,
            tokens_out=outcome.tokens_out,
            cost_usd=outcome.cost_usd,
            duration_sec=outcome.duration_sec,
            is_timeout=outcome.is_timeout,
            is_empty_run=outcome.is_empty_run,
            error=outcome.error_text[:500],
        )
        return outcome


def _tag_empty_run(outcome: AgentOutcome, state: LoopState) -> None:
    """data-quality-empty-runs-and-timeouts.md: the agent stage ran over a second, the model
    produced no tokens at all and nothing timed out. That says nothing about the model's skill,
    so it is recorded as an infrastructure LLM_ERROR."""
    if outcome.reason is None or outcome.is_timeout or outcome.tokens_in or outcome.tokens_out:
        return
    if state.llm_requests == 0 or state.llm_produced_output:
        return  # never asked, or answered with content on a server that reports no usage
    if outcome.duration_sec <= EMPTY_RUN_MIN_SEC:
        return
    previous = outcome.error_text or outcome.stop
    outcome.is_empty_run = True
    outcome.reason = Reason.LLM_ERROR
    outcome.llm_error_kind = outcome.llm_error_kind or "transient"
    outcome.error_text = (
        f"[empty-run] the model produced no tokens in {outcome.duration_sec:.1f}s: {previous}"
    )
