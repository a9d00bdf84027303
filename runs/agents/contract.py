"""What the attempt pipeline hands an agent, and what the agent hands back. No Django here.

The pipeline (runs/pipeline) prepares the workspace, runs setup and the baseline, then calls
``Agent.run(ctx)`` and finally the task's tests itself; the agent never decides success.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from runs.pricing import AttemptCost, PriceRow
from runs.taxonomy import Reason
from sandbox.base import Sandbox


@dataclass(frozen=True, slots=True)
class Budgets:
    max_steps: int = 30
    max_time_sec: float = 1800.0
    max_tokens: int | None = None
    max_cost_usd: float | None = None
    repeated_failure_threshold: int = 3
    # Model calls an agent CLI may make (its gateway refuses more); None: no limit.
    max_model_calls: int | None = None


@dataclass(frozen=True, slots=True)
class ModelSettings:
    variant: str  # scripted | oracle | nop | llm | cli | import
    model_name: str = ""
    base_url: str = ""
    api_key: str = ""
    sampling: dict = field(default_factory=dict)
    strict_patch: bool = False
    log_llm_messages: bool = True
    llm_log_max_chars: int = 2_000_000
    price_input_per_mtok: float | None = None
    price_output_per_mtok: float | None = None
    # The price table's rows (runs/prices.py); None: the shipped list prices.
    price_rows: tuple[PriceRow, ...] | None = None
    # The variable the key was read from, and why it was not (runs/upstreams.py: the variable
    # or the upstream is not on the operator's lists; then ``api_key`` is empty and the agent
    # refuses to start).
    api_key_env: str = ""
    upstream_refused: str = ""
    # Variant "import": the agent class, "package.module:ClassName" (runs/agents/imported.py).
    agent_import_path: str = ""


@dataclass(frozen=True, slots=True)
class TaskView:
    task_id: str
    workdir: str  # inside the sandbox, e.g. /workspace/repo
    test_command: str
    timeout_sec: int
    setup_commands: tuple[str, ...] = ()
    problem_statement: str = ""
    gold_patch: str = ""
    # SWE-bench: the tests that grade (the instance's test patch) go in only after the agent,
    # so the visible tests passing at the start says nothing: the agent still runs.
    hidden_tests: bool = False
    # A Harbor task: the oracle runs this command (solution/solve.sh) with this environment,
    # and the agent's commands may ask for the network when the task allows the internet.
    oracle_command: str = ""
    oracle_env: dict[str, str] = field(default_factory=dict)
    allow_network: bool = False


@dataclass(frozen=True)
class AgentContext:
    sandbox: Sandbox
    task: TaskView
    budgets: Budgets
    model: ModelSettings
    artifacts_dir: Path  # the attempt's folder: events.jsonl, diffs/, logs/ go here


@dataclass
class AgentOutcome:
    """The agent's stop reason (None = the tests passed when it stopped) and its accounting."""

    reason: Reason | None
    stop: str  # tests_passed | gave_up | step_budget | time_budget | token_budget |
    #            cost_budget | repeated_failures | tool_error | llm_error | done
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    # The tokens by class and their cost as billed (runs/pricing.py); None: not broken down
    # (``cost_usd`` as computed from input and output, or nothing for an agent without a model).
    cost_detail: AttemptCost | None = None
    tool_calls: int = 0
    # Model API calls; None for an agent that calls no model (scripted, oracle, nop,
    # predictions), so its row shows "—" rather than a rate of calls it never made.
    steps: int | None = None
    error_text: str = ""
    is_timeout: bool = False
    is_empty_run: bool = False
    # "permanent" (auth, unknown model, bad parameter) or "transient"; run-level fail-fast
    # stops every run of the model configuration on a permanent one.
    llm_error_kind: str | None = None
    duration_sec: float = 0.0
    # An agent CLI's process: its exit code and signal (None: not killed by one), the command
    # line (with the gateway token redacted), its output, and what it reported about itself.
    exit_code: int | None = None
    signal: int | None = None
    command: str = ""
    stdout: str = ""
    stderr: str = ""
    cli: dict = field(default_factory=dict)


class Agent(Protocol):
    name: str

    def run(self, ctx: AgentContext) -> AgentOutcome: ...
