"""The agent stage: build the agent for a model configuration and let it work in the sandbox.

The agent only changes the workspace; the pipeline runs the final tests itself. Its accounting
(tokens, cost, tool calls, steps) and stop reason are kept on the attempt.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING

from django.conf import settings

from runs.agents.contract import AgentContext, AgentOutcome, Budgets, ModelSettings, TaskView
from runs.models import AgentVariant, ModelConfig
from runs.pipeline.plan import TaskPlan
from runs.pipeline.stages import CommandRun, StageResult
from runs.prices import price_rows
from runs.taxonomy import Reason, Stage
from sandbox.base import Sandbox

if TYPE_CHECKING:
    from runs.agents.cli.agent import CliResources

# An LLM agent that ran this long without a single token never really started.
EMPTY_RUN_MIN_SEC = 1.0
TEST_RESULT_REASONS = frozenset(
    {Reason.TESTS_FAILED, Reason.NO_TESTS_COLLECTED, Reason.INTERNAL_ERROR}
)


def model_settings_for(config: ModelConfig) -> ModelSettings:
    """The agent's view of a model configuration, with the API key read from the environment
    variable the configuration names (the key itself is never stored)."""
    # The built-in LLM agent and agent CLIs call a model: their key comes from the environment.
    is_llm = config.agent_variant in (AgentVariant.LLM, AgentVariant.CLI)
    key_env = config.api_key_env or (settings.LLM_API_KEY_ENV if is_llm else "")
    base_url = config.base_url or (settings.LLM_BASE_URL if is_llm else "")
    # Checked again here, whatever the row says (stored before the lists, or by raw SQL): a
    # refused variable is never read, and the agent refuses to start (LLM_ERROR, permanent).
    refused = upstream_refusal(base_url=base_url, api_key_env=key_env) if is_llm else ""
    return ModelSettings(
        variant=config.agent_variant,
        model_name=config.model_name,
        base_url=base_url,
        api_key=os.environ.get(key_env, "") if key_env and not refused else "",
        api_key_env=key_env,
        upstream_refused=refused,
        agent_import_path=config.agent_import_path,
        sampling=config.sampling_params(),
        strict_patch=config.strict_patch or settings.STRICT_PATCH,
        log_llm_messages=config.log_llm_messages and settings.LLM_LOG_MESSAGES,
        llm_log_max_chars=settings.LLM_LOG_MAX_CHARS,
        price_input_per_mtok=_float(config.price_input_per_mtok),
        price_output_per_mtok=_float(config.price_output_per_mtok),
        price_rows=price_rows() if is_llm else None,
    )


def upstream_refusal(*, base_url: str, api_key_env: str) -> str:
    """Why an attempt may not send the key from ``api_key_env`` to ``base_url`` ("" if it may)."""
    from runs.upstreams import policy_from_settings

    problems = policy_from_settings().problems(base_url=base_url, api_key_env=api_key_env)
    return "; ".join(f"{field}: {why}" for field, why in problems.items())


def budgets_for(config: ModelConfig, *, task_max_steps: int | None) -> Budgets:
    return Budgets(
        max_steps=task_max_steps or config.max_steps,
        max_time_sec=float(config.max_time_sec),
        max_tokens=config.max_tokens,
        max_cost_usd=_float(config.max_cost_usd),
        repeated_failure_threshold=config.repeated_failure_threshold,
        max_model_calls=config.max_model_calls,
    )


def run_agent_stage(
    *,
    sandbox: Sandbox,
    plan: TaskPlan,
    config: ModelConfig,
    task_max_steps: int | None,
    artifacts_dir: Path,
    prediction_patch: str | None = None,
    cli: CliResources | None = None,
    task_view: TaskView | None = None,
    max_time_sec: float | None = None,
) -> tuple[StageResult | None, AgentOutcome | None]:
    """Run the configured agent; ``(None, None)`` when the variant has no agent (baseline).
    An agent CLI runs with the resources ``cli_resources_for`` prepared before the sandbox.
    ``task_view`` replaces the one made from ``plan`` (a Harbor task's); ``max_time_sec``, a
    task's own agent timeout, lowers the configuration's time budget."""
    from runs.agents.registry import build_agent  # the agents package loads its own deps

    model = model_settings_for(config)
    agent = build_agent(model, prediction_patch=prediction_patch, cli=cli)
    if agent is None:
        return None, None
    budgets = budgets_for(config, task_max_steps=task_max_steps)
    if max_time_sec is not None and max_time_sec < budgets.max_time_sec:
        budgets = replace(budgets, max_time_sec=max_time_sec)
    ctx = AgentContext(
        sandbox=sandbox,
        task=task_view
        or TaskView(
            task_id=plan.task_id,
            workdir=plan.workdir,
            test_command=plan.test_command,
            timeout_sec=plan.timeout_sec,
            setup_commands=plan.setup_commands,
            problem_statement=plan.problem_statement,
            gold_patch=plan.gold_patch,
            hidden_tests=plan.is_swebench,
        ),
        budgets=budgets,
        model=model,
        artifacts_dir=artifacts_dir,
    )
    started = time.monotonic()
    outcome = agent.run(ctx)
    elapsed = time.monotonic() - started
    return agent_stage_result(
        outcome, agent_name=agent.name, variant=config.agent_variant, elapsed=elapsed
    ), outcome


def agent_stage_result(
    outcome: AgentOutcome, *, agent_name: str, variant: str, elapsed: float
) -> StageResult:
    """The agent stage's reason from its outcome, with timeouts and empty runs tagged."""
    duration = outcome.duration_sec or elapsed
    stage = StageResult("agent_run", Stage.AGENT_RUN, extra_duration_sec=duration)
    if outcome.command:  # an agent CLI: its process is the stage's command
        stage.runs.append(
            CommandRun(
                outcome.command,
                -1 if outcome.exit_code is None else outcome.exit_code,
                outcome.stdout,
                outcome.stderr,
                0.0,
                outcome.is_timeout,
                where="worker" if outcome.cli.get("runs_in") == "worker" else "sandbox",
            )
        )
    stage.reason = outcome.reason
    stage.note = outcome.error_text
    if outcome.is_timeout:
        stage.reason = Reason.TIMEOUT
        stage.note = (
            outcome.error_text  # an agent CLI's own words: killed by the harness, and when
            if outcome.error_text.startswith("[timeout]")
            else f"[timeout] agent stopped after {duration:.1f}s: {outcome.stop}"
        )
    elif is_empty_run(outcome, variant=variant, duration=duration):
        outcome.is_empty_run = True
        stage.reason = Reason.LLM_ERROR
        stage.note = (
            f"[empty-run] the agent produced no output ({duration:.1f}s, 0 tokens): "
            f"{outcome.error_text or outcome.stop}"
        )
    elif stage.reason is not None and not stage.note:
        stage.note = f"agent stopped: {outcome.stop}"
    if stage.reason in TEST_RESULT_REASONS:
        # What the tests say is the final test stage's to report (after the test patch, for
        # SWE-bench), not the agent's own last run.
        stage.counts = False
    summary = {"agent": agent_name, "variant": variant} | {
        k: v for k, v in asdict(outcome).items() if k not in ("stdout", "stderr")
    }
    summary["reason"] = outcome.reason.value if outcome.reason else None
    stage.detail = "agent outcome:\n" + json.dumps(summary, indent=2, default=str)
    return stage


def is_empty_run(outcome: AgentOutcome, *, variant: str, duration: float) -> bool:
    if outcome.is_empty_run:
        return True
    # Only a model-driven agent is expected to use tokens; scripted and oracle agents never do.
    # An agent that called tools or left the tests passing did produce output, even when the
    # server reported no usage (some OpenAI-compatible servers omit it).
    # An agent CLI's outcome says itself whether it was empty (the gateway counted its calls).
    return (
        variant == AgentVariant.LLM
        and duration > EMPTY_RUN_MIN_SEC
        and outcome.tokens_in == 0
        and outcome.tokens_out == 0
        and not outcome.is_timeout
        and outcome.reason is not None
        and outcome.tool_calls == 0
    )


def _float(value: object) -> float | None:
    return None if value is None else float(value)  # type: ignore[arg-type]


def cli_resources_for(
    config: ModelConfig, *, artifacts_dir: Path, task_max_steps: int | None, owner: str = ""
):
    """For a CLI configuration: a context manager giving the CLI's install and an open gateway
    (they must exist before the sandbox; ``owner``, the attempt's public id, names the
    gateway's socket folder for the reaper); for any other variant, one giving None."""
    import contextlib

    if config.agent_variant != AgentVariant.CLI:
        return contextlib.nullcontext(None)
    from runs.agent_clis import find_definition
    from runs.agents.cli.agent import cli_resources

    return cli_resources(
        config.cli_agent,
        model=model_settings_for(config),
        budgets=budgets_for(config, task_max_steps=task_max_steps),
        artifacts_dir=artifacts_dir,
        body_cap_bytes=getattr(settings, "GATEWAY_BODY_CAP_BYTES", 4_000_000),
        record_max_bytes=settings.GATEWAY_RECORD_MAX_BYTES,
        price_table_path=settings.LLM_PRICE_TABLE or None,
        owner=owner,
        find=find_definition,
    )
