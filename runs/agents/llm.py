"""The LLM agent: any OpenAI-compatible chat-completions API (OpenAI, OpenRouter, vLLM, Ollama).

The five tools are offered as functions. Tool calls are executed in order; a diff in a
plain-text answer is extracted and applied; a text answer without a diff ends the attempt
(``GIVE UP`` in it means the agent gave up). Token counts come from the API's ``usage``.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import openai

from runs.agents import prompts
from runs.agents.contract import AgentContext, ModelSettings
from runs.agents.events import EventLog, MessageLog
from runs.agents.loop import Action, Decision, LoopState, tests_observation
from runs.agents.patching import extract_diff
from runs.agents.tools import TOOL_SCHEMAS, RunResult, ToolResult
from runs.gateway.wire import Usage
from runs.llm_errors import LLMTransientError, RetryPolicy, call_with_retries
from runs.pricing import AttemptCost, Price, unpriced

# Sampling keys the client takes as arguments; anything else goes in the request body as is.
_CLIENT_PARAMS = frozenset(
    {
        "temperature",
        "top_p",
        "max_tokens",
        "max_completion_tokens",
        "seed",
        "stop",
        "presence_penalty",
        "frequency_penalty",
        "reasoning_effort",
        "parallel_tool_calls",
    }
)
_GIVE_UP = re.compile(r"\bgive up\b|\bgiving up\b", re.IGNORECASE)


class LLMPolicy:
    name = "llm"
    uses_llm = True

    def __init__(
        self,
        model: ModelSettings,
        *,
        retry: RetryPolicy,
        price: Price | None,
        request_timeout_sec: float = 120.0,
    ):
        self.model = model
        self.retry = retry
        self.price = price
        self.request_timeout_sec = request_timeout_sec
        self.messages: list[dict[str, Any]] = []
        self._logged = 0
        self._deadline: float | None = None
        self._threshold = 3
        self.client = openai.OpenAI(
            base_url=model.base_url or None,
            # Local servers (vLLM, Ollama) take any key, but the client insists on one.
            api_key=model.api_key or "not-needed",
            max_retries=0,
            timeout=request_timeout_sec,
        )
        self.events: EventLog | None = None
        self.log: MessageLog | None = None

    def start(self, ctx: AgentContext, initial_tests: RunResult, state: LoopState) -> None:
        self.events = state.events
        self.log = MessageLog(
            ctx.artifacts_dir,
            enabled=ctx.model.log_llm_messages,
            max_chars=ctx.model.llm_log_max_chars,
        )
        self._deadline = state.deadline
        self._threshold = ctx.budgets.repeated_failure_threshold
        self.messages = [
            {"role": "system", "content": prompts.SYSTEM_PROMPT},
            {
                "role": "user",
                "content": prompts.task_prompt(ctx.task, tests_observation(initial_tests)),
            },
        ]

    def decide(self, state: LoopState) -> Decision:
        decision = Decision()
        malformed_retried = nudged = False
        empty = 0
        while True:
            message = self._complete(state)
            content = (message.content or "").strip()
            calls = list(message.tool_calls or [])
            if calls:
                actions, error = self._actions(calls)
                if error and not malformed_retried:
                    # One retry: the broken call is dropped and the model told why.
                    malformed_retried = True
                    hint = prompts.MALFORMED_ARGUMENTS.format(error=error)
                    self._append({"role": "user", "content": hint})
                    continue
                self._append(_assistant_dict(message))
                decision.actions = actions
                return decision
            self._append({"role": "assistant", "content": content})
            if not content:
                empty += 1
                if empty >= self._threshold:
                    raise LLMTransientError(f"the model returned {empty} empty replies in a row")
                self._append({"role": "user", "content": prompts.EMPTY_REPLY})
                continue
            diff = extract_diff(content)
            if diff is not None:
                decision.actions = [Action("apply_patch", {"unified_diff": diff})]
                return decision
            if _GIVE_UP.search(content):
                decision.stop, decision.note = "gave_up", content[:300]
                return decision
            if "DONE" in content or nudged:
                decision.stop, decision.note = "done", content[:300]
                return decision
            nudged = True
            self._append({"role": "user", "content": prompts.NUDGE})

    def observe(self, action: Action, result: ToolResult, observation: str) -> None:
        if action.call_id:
            self._append({"role": "tool", "tool_call_id": action.call_id, "content": observation})
        else:
            self._append({"role": "user", "content": f"Result of your diff:\n{observation}"})

    # --- internals ---------------------------------------------------------------------------

    def _append(self, message: dict[str, Any]) -> None:
        self.messages.append(message)

    def _complete(self, state: LoopState) -> Any:
        """One chat completion (with retries); adds its usage and cost to ``state``."""
        state.llm_requests += 1
        number = state.llm_requests
        if self.log:
            self.log.write("request", {"n": number, "messages": self.messages[self._logged :]})
            self._logged = len(self.messages)
        if self.events:
            self.events.emit("llm_request", n=number, messages=len(self.messages))
        started = time.monotonic()
        kwargs, extra = _sampling(self.model.sampling)
        tools = [{"type": "function", "function": schema} for schema in TOOL_SCHEMAS]

        def call() -> Any:
            timeout = self.request_timeout_sec
            if self._deadline is not None:
                timeout = max(1.0, min(timeout, self._deadline - time.monotonic()))
            return self.client.with_options(timeout=timeout).chat.completions.create(
                model=self.model.model_name,
                messages=self.messages,  # type: ignore[arg-type]
                tools=tools,  # type: ignore[arg-type]
                extra_body=extra or None,
                **kwargs,
            )

        def on_retry(attempt: int, exc: BaseException, wait: float) -> None:
            if self.events:
                self.events.emit(
                    "llm_retry", n=number, attempt=attempt, error=str(exc)[:300], wait_sec=wait
                )

        try:
            response = call_with_retries(
                call, policy=self.retry, on_retry=on_retry, deadline=self._deadline
            )
        except Exception as exc:
            if self.events:
                self.events.emit("llm_error", n=number, error=str(exc)[:500])
            raise
        usage = getattr(response, "usage", None)
        tokens_in = int(getattr(usage, "prompt_tokens", 0) or 0)
        tokens_out = int(getattr(usage, "completion_tokens", 0) or 0)
        # The classes as billed (cached prompt tokens are reads), read as the gateway reads
        # them; a model without a price has an unknown cost, not $0.
        reported = Usage()
        dump = getattr(usage, "model_dump", None)
        reported.merge(dump() if callable(dump) else None)
        classes = reported.classes()
        name = self.model.model_name
        billed = self.price.breakdown(classes, name) if self.price else unpriced(name)
        cost = billed.total or 0.0
        billed_call = AttemptCost(classes, billed)
        detail = state.cost_detail
        state.cost_detail = billed_call if detail is None else detail + billed_call
        state.tokens_in += tokens_in
        state.tokens_out += tokens_out
        state.cost_usd += cost
        if not response.choices:
            raise LLMTransientError("the API answered without any choice")
        choice = response.choices[0]
        message = choice.message
        if (message.content or "").strip() or message.tool_calls:
            state.llm_produced_output = True
        if self.events:
            self.events.emit(
                "llm_response",
                n=number,
                tokens_in=tokens_in,
                tokens_out=tokens_out,
                cost_usd=round(cost, 6),
                finish_reason=choice.finish_reason,
                tool_calls=len(message.tool_calls or []),
                duration_sec=round(time.monotonic() - started, 3),
            )
        if self.log:
            self.log.write("response", {"n": number, "message": _assistant_dict(message)})
        return message

    def _actions(self, calls: list[Any]) -> tuple[list[Action], str]:
        actions = []
        error = ""
        for call in calls:
            raw = call.function.arguments or "{}"
            try:
                arguments = json.loads(raw)
            except json.JSONDecodeError as exc:
                error = error or f"{call.function.name}: {exc.msg} at position {exc.pos}"
                arguments = raw  # the toolbox turns this into an error observation
            actions.append(Action(call.function.name, arguments, call.id))
        return actions, error


def _sampling(sampling: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    known = {k: v for k, v in sampling.items() if k in _CLIENT_PARAMS}
    extra = {k: v for k, v in sampling.items() if k not in _CLIENT_PARAMS}
    return known, extra


def _assistant_dict(message: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"role": "assistant", "content": message.content or ""}
    if message.tool_calls:
        data["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.function.name, "arguments": call.function.arguments},
            }
            for call in message.tool_calls
        ]
    return data
