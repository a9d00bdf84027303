"""Which agent runs for a model configuration's variant (what the pipeline calls)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from django.conf import settings

from runs.agents.contract import Agent, AgentContext, AgentOutcome, ModelSettings
from runs.agents.events import EventLog
from runs.agents.loop import AgentLoop, Policy
from runs.agents.retries import retry_policy
from runs.agents.simple import NopPolicy, OraclePolicy, ScriptedPolicy
from runs.agents.tools import Toolbox
from runs.pricing import price_for, price_table
from runs.taxonomy import Reason

if TYPE_CHECKING:
    from runs.agents.cli.agent import CliResources

VARIANTS = ("scripted", "oracle", "nop", "llm", "external", "cli", "import")
# The error text's tag of an attempt whose key variable or upstream is not allowed.
UPSTREAM_REFUSED = "upstream-refused"


class LoopAgent:
    """An agent made of a policy driven by the agent loop."""

    def __init__(self, name: str, make_policy: Callable[[], Policy]):
        self.name = name
        self.make_policy = make_policy

    def run(self, ctx: AgentContext) -> AgentOutcome:
        return AgentLoop(ctx, self.make_policy()).run()


class ExternalPatchAgent:
    """Applies a prediction produced elsewhere (an imported SWE-bench prediction, say). The
    pipeline's final test run grades it; this agent only reports whether it could apply."""

    name = "external"

    def __init__(self, patch: str | None):
        self.patch = patch or ""

    def run(self, ctx: AgentContext) -> AgentOutcome:
        started = time.monotonic()
        events = EventLog(ctx.artifacts_dir)
        events.emit("agent_start", agent=self.name, task=ctx.task.task_id)
        outcome = AgentOutcome(reason=None, stop="done")
        if not self.patch.strip():
            outcome.reason, outcome.stop = Reason.TESTS_FAILED, "gave_up"
            outcome.error_text = "[empty-patch] the prediction has no patch"
        else:
            toolbox = Toolbox(
                ctx.sandbox,
                workdir=ctx.task.workdir,
                artifacts_dir=ctx.artifacts_dir,
                strict_patch=ctx.model.strict_patch,
                default_timeout_sec=ctx.task.timeout_sec,
                events=events,
            )
            result = toolbox.apply_patch(self.patch)
            outcome.tool_calls = 1  # one apply_patch; no model call (steps stays None)
            if not result.ok:
                outcome.reason, outcome.stop = Reason.TOOL_ERROR, "tool_error"
                outcome.error_text = f"[patch-apply-failed] {result.error}"
        outcome.duration_sec = round(time.monotonic() - started, 3)
        events.emit(
            "agent_finish",
            stop=outcome.stop,
            reason=outcome.reason.value if outcome.reason else None,
            error=outcome.error_text[:500],
        )
        return outcome


class MisconfiguredAgent:
    """Stands in for an LLM agent that cannot be built (no model name, bad price table): the
    attempt ends as a permanent LLM_ERROR, so run-level fail-fast stops the configuration."""

    def __init__(self, name: str, error: str, *, tag: str = "llm-permanent"):
        self.name = name
        self.error = error
        self.tag = tag

    def run(self, ctx: AgentContext) -> AgentOutcome:
        EventLog(ctx.artifacts_dir).emit("agent_error", agent=self.name, error=self.error)
        return AgentOutcome(
            reason=Reason.LLM_ERROR,
            stop="llm_error",
            error_text=f"[{self.tag}] {self.error}",
            llm_error_kind="permanent",
        )


def _imported_agent(model: ModelSettings) -> Agent:
    """The class ``model.agent_import_path`` names, imported now (the allow-list is checked
    again: it may have changed since the configuration was saved). A path that cannot be used
    ends the attempt like any agent that cannot be built: "[agent-import] ...", a permanent
    LLM_ERROR (infrastructure; fail-fast stops the configuration's run at once)."""
    from runs.agents.imported import IMPORT_TAG, ImportedAgent, ImportPathError, resolve

    path = model.agent_import_path
    try:
        resolved = resolve(path, settings.AGENT_IMPORT_PATHS)
    except ImportPathError as exc:
        return MisconfiguredAgent("import", str(exc), tag=IMPORT_TAG)
    return ImportedAgent(path, resolved)


def _llm_agent(model: ModelSettings) -> Agent:
    from runs.agents.llm import LLMPolicy  # imports the openai client only when needed
    from runs.pricing import PriceTableError

    if model.upstream_refused:  # runs/upstreams.py: never call out with that key
        return MisconfiguredAgent("llm", model.upstream_refused, tag=UPSTREAM_REFUSED)
    if not model.model_name:
        return MisconfiguredAgent("llm", "no model name configured")
    try:
        table = price_table(model.price_rows, path=settings.LLM_PRICE_TABLE)
    except PriceTableError as exc:
        return MisconfiguredAgent("llm", f"LLM_PRICE_TABLE: {exc}")
    price = price_for(model, table)
    policy = retry_policy()
    timeout = settings.LLM_REQUEST_TIMEOUT_SEC
    return LoopAgent(
        "llm", lambda: LLMPolicy(model, retry=policy, price=price, request_timeout_sec=timeout)
    )


def build_agent(
    model: ModelSettings, *, prediction_patch: str | None = None, cli: CliResources | None = None
) -> Agent | None:
    """The agent for ``model.variant``; None for "baseline" (validation only, no agent). A CLI
    agent needs the resources the pipeline prepared before the sandbox (``cli_resources``)."""
    variant = model.variant
    if variant == "baseline":
        return None
    if variant == "scripted":
        return LoopAgent("scripted", ScriptedPolicy)
    if variant == "oracle":
        return LoopAgent("oracle", OraclePolicy)
    if variant == "nop":
        return LoopAgent("nop", NopPolicy)
    if variant == "llm":
        return _llm_agent(model)
    if variant == "external":
        return ExternalPatchAgent(prediction_patch)
    if variant == "cli":
        from runs.agents.cli.agent import CliAgent

        if cli is None:
            return MisconfiguredAgent("cli", "no agent CLI prepared for this attempt")
        return CliAgent(cli)
    if variant == "import":
        return _imported_agent(model)
    raise ValueError(f"unknown agent variant {variant!r}; expected one of {', '.join(VARIANTS)}")
