"""The failure taxonomy as pure functions: no Django, no I/O.

Success is ``None``; a failure is exactly one ``Reason``. The codes, precedence and mappings are
those of ``failure-taxonomy.md``; the category column is this project's decision (see
``docs`` in the README, "Failure taxonomy"):

* ``infrastructure`` outcomes say nothing about the agent and are excluded from success rates
  (``data-quality-empty-runs-and-timeouts.md``): the agent never got a fair chance.
* ``agent`` outcomes are the agent's result and count in the denominator.

Empty runs (the agent stage ran over a second but used no tokens) are recorded as
``LLM_ERROR`` with ``is_empty_run`` set; timeouts as ``TIMEOUT`` (``SETUP_TIMEOUT`` in setup)
with ``is_timeout`` set. Both are infrastructure, as the data-quality document requires.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

from sandbox.errors import SandboxError

# Any exception of this kind maps to SANDBOX_ERROR in ``from_stage``.
SandboxFailure = SandboxError


class Category(enum.StrEnum):
    INFRASTRUCTURE = "infrastructure"
    AGENT = "agent"


class Stage(enum.StrEnum):
    GIT_CLONE = "git_clone"
    GIT_CHECKOUT = "git_checkout"
    SETUP = "setup"
    BASELINE_RUN = "baseline_run"
    AGENT_RUN = "agent_run"
    FINAL_TEST = "final_test"


@dataclass(frozen=True, slots=True)
class ReasonInfo:
    precedence: int
    description: str
    typical_cause: str
    category: Category


class Reason(enum.StrEnum):
    GIT_CLONE_FAILED = "GIT_CLONE_FAILED"
    GIT_CHECKOUT_FAILED = "GIT_CHECKOUT_FAILED"
    SETUP_TIMEOUT = "SETUP_TIMEOUT"
    SETUP_FAILED = "SETUP_FAILED"
    BASELINE_NOT_FAILING = "BASELINE_NOT_FAILING"
    SANDBOX_ERROR = "SANDBOX_ERROR"
    LLM_ERROR = "LLM_ERROR"
    TOOL_ERROR = "TOOL_ERROR"
    TIMEOUT = "TIMEOUT"
    AGENT_GAVE_UP = "AGENT_GAVE_UP"
    TESTS_FAILED = "TESTS_FAILED"
    NO_TESTS_COLLECTED = "NO_TESTS_COLLECTED"
    INTERNAL_ERROR = "INTERNAL_ERROR"
    INTERRUPTED = "INTERRUPTED"
    UNKNOWN = "UNKNOWN"

    @property
    def info(self) -> ReasonInfo:
        return REASONS[self]

    @property
    def precedence(self) -> int:
        return REASONS[self].precedence

    @property
    def is_infrastructure(self) -> bool:
        return REASONS[self].category is Category.INFRASTRUCTURE


_I = Category.INFRASTRUCTURE
_A = Category.AGENT

REASONS: Final[dict[Reason, ReasonInfo]] = {
    Reason.GIT_CLONE_FAILED: ReasonInfo(1, "Could not clone repo", "Bad URL, network failure", _I),
    Reason.GIT_CHECKOUT_FAILED: ReasonInfo(
        2, "Could not checkout commit", "Invalid commit SHA", _I
    ),
    Reason.SETUP_TIMEOUT: ReasonInfo(
        3, "Setup exceeded timeout", "Slow network, large dependencies", _I
    ),
    Reason.SETUP_FAILED: ReasonInfo(
        4, "Setup command failed", "Missing dependency, broken pip install", _I
    ),
    Reason.BASELINE_NOT_FAILING: ReasonInfo(
        5, "Tests pass before fix", "Invalid task (already fixed)", _I
    ),
    Reason.SANDBOX_ERROR: ReasonInfo(6, "Docker/container failure", "Docker daemon down, OOM", _I),
    Reason.LLM_ERROR: ReasonInfo(7, "LLM API failure", "Rate limit, invalid key", _I),
    Reason.TOOL_ERROR: ReasonInfo(8, "Agent tool call failed", "Invalid patch, path escape", _A),
    # Infrastructure by the data-quality document: a timed-out attempt is excluded from rates
    # and counted on its own, so a slow machine never reads as a weak model.
    Reason.TIMEOUT: ReasonInfo(9, "Run command exceeded timeout", "Infinite loop, slow tests", _I),
    Reason.AGENT_GAVE_UP: ReasonInfo(10, "Agent hit step limit", "Complex bug, bad strategy", _A),
    Reason.TESTS_FAILED: ReasonInfo(11, "Tests fail after agent", "Agent didn't fix the bug", _A),
    Reason.NO_TESTS_COLLECTED: ReasonInfo(
        12, "pytest found no tests", "Wrong test path, missing tests", _I
    ),
    # After the agent, an internal error is nearly always code the agent broke (an import
    # error in conftest or the package); before it, the stage rule makes it infrastructure.
    Reason.INTERNAL_ERROR: ReasonInfo(
        13, "pytest internal error", "Broken conftest, import error", _A
    ),
    Reason.INTERRUPTED: ReasonInfo(14, "User cancelled", "Ctrl+C", _I),
    Reason.UNKNOWN: ReasonInfo(15, "Unexpected error", "Uncaught exception", _I),
}

PRE_AGENT_STAGES: Final = frozenset(
    {Stage.GIT_CLONE, Stage.GIT_CHECKOUT, Stage.SETUP, Stage.BASELINE_RUN}
)
TEST_STAGES: Final = frozenset({Stage.BASELINE_RUN, Stage.AGENT_RUN, Stage.FINAL_TEST})
TIMEOUT_EXIT_CODES: Final = frozenset({124, 137})
# A shell reports a command ended by Ctrl+C (SIGINT) as 130, in every stage. pytest's own
# "interrupted" (2) only means that in test stages: a shell in setup exits 2 on a bad command.
SIGINT_EXIT_CODE: Final = 130

_PYTEST_EXIT: Final[dict[int, Reason | None]] = {
    0: None,
    1: Reason.TESTS_FAILED,
    2: Reason.INTERRUPTED,
    3: Reason.INTERNAL_ERROR,
    4: Reason.INTERNAL_ERROR,
    5: Reason.NO_TESTS_COLLECTED,
    124: Reason.TIMEOUT,
    137: Reason.TIMEOUT,
}


def from_pytest_exit_code(exit_code: int) -> Reason | None:
    """Map a test command's exit code (pytest's conventions) to a reason; 0 is success."""
    return _PYTEST_EXIT.get(exit_code, Reason.UNKNOWN)


def from_stage(
    stage: Stage | str,
    exit_code: int | None = None,
    *,
    exception: BaseException | None = None,
    timed_out: bool | None = None,
) -> Reason | None:
    """The stage-aware mapping: exceptions first, then timeout codes, then the stage's rule.

    ``timed_out`` is whether the harness itself timed the command out. The harness always
    says; only when it is unknown (None) are 124 and 137 read as timeouts, as the reference
    table does. Told False, a 137 is a SIGKILL from elsewhere (the OOM killer, or the command
    itself: the caller names which) and 124 the command's own exit code: the stage's rule
    applies, and in a test stage either is UNKNOWN rather than a timeout.
    """
    stage = Stage(stage)
    if exception is not None:
        if isinstance(exception, KeyboardInterrupt):
            return Reason.INTERRUPTED
        if isinstance(exception, SandboxFailure):
            return Reason.SANDBOX_ERROR
        return Reason.UNKNOWN
    if exit_code is None:
        raise ValueError("from_stage needs an exit code or an exception")
    if exit_code in TIMEOUT_EXIT_CODES and timed_out is not False:
        return Reason.SETUP_TIMEOUT if stage is Stage.SETUP else Reason.TIMEOUT
    if timed_out and exit_code != 0:
        return Reason.SETUP_TIMEOUT if stage is Stage.SETUP else Reason.TIMEOUT
    if exit_code in TIMEOUT_EXIT_CODES and stage in TEST_STAGES:
        return Reason.UNKNOWN
    if exit_code == SIGINT_EXIT_CODE:
        return Reason.INTERRUPTED
    if stage is Stage.GIT_CLONE:
        return Reason.GIT_CLONE_FAILED if exit_code != 0 else None
    if stage is Stage.GIT_CHECKOUT:
        return Reason.GIT_CHECKOUT_FAILED if exit_code != 0 else None
    if stage is Stage.SETUP:
        return Reason.SETUP_FAILED if exit_code != 0 else None
    if stage is Stage.BASELINE_RUN:
        return _baseline_reason(exit_code)
    return from_pytest_exit_code(exit_code)


def _baseline_reason(exit_code: int) -> Reason | None:
    # Tests must fail before the fix. A failing run is only a valid baseline when the tests
    # actually ran: pytest's "no tests" (5) and "internal/usage error" (3, 4) are not.
    if exit_code == 0:
        return Reason.BASELINE_NOT_FAILING
    if exit_code == 2:
        return Reason.INTERRUPTED
    if exit_code in (3, 4):
        return Reason.INTERNAL_ERROR
    if exit_code == 5:
        return Reason.NO_TESTS_COLLECTED
    return None


def primary_reason(reasons: list[Reason | None] | tuple[Reason | None, ...]) -> Reason | None:
    """The reason with the lowest precedence number among those given; None when all are None."""
    present = [r for r in reasons if r is not None]
    if not present:
        return None
    return min(present, key=lambda r: r.precedence)


def is_infrastructure(reason: Reason | None, stage: Stage | str | None = None) -> bool:
    """Whether an outcome is excluded from success rates.

    Any failure before the agent starts is infrastructure whatever its code: the agent had no
    chance to act on the task. Success is never infrastructure.
    """
    if reason is None:
        return False
    if stage is not None and Stage(stage) in PRE_AGENT_STAGES:
        return True
    return reason.is_infrastructure


# --- Imported runs: the agent's own exit status ------------------------------------------------


@dataclass(frozen=True, slots=True)
class ExitStatusRule:
    reason: Reason
    tag: str  # "[tag]" in the attempt's error text
    why: str


# How another harness said its agent stopped, mapped onto our reasons (README, "Importing a
# run folder"). "Submitted" maps to nothing: the evaluation decides. mini-swe-agent writes the
# exception's class name; SWE-agent writes ``exit_*`` (``submitted (exit_cost)`` when it
# auto-submitted after hitting a limit: the limit is kept as the reason should the patch fail).
_GAVE_UP = ExitStatusRule(Reason.AGENT_GAVE_UP, "budget", "the agent used up a step/cost budget")
_CONTEXT = ExitStatusRule(Reason.AGENT_GAVE_UP, "context", "the conversation outgrew the window")
_FORMAT = ExitStatusRule(Reason.TOOL_ERROR, "format-error", "the model's actions were malformed")
_TIMEOUT = ExitStatusRule(Reason.TIMEOUT, "timeout", "a command or the run ran out of time")
_LLM = ExitStatusRule(Reason.LLM_ERROR, "llm-error", "the model API failed")
_ENV = ExitStatusRule(Reason.SANDBOX_ERROR, "environment", "the agent's environment failed")
_GAVE_UP_EARLY = ExitStatusRule(Reason.AGENT_GAVE_UP, "gave-up", "the agent stopped by itself")
EXIT_STATUS_RULES: Final[dict[str, ExitStatusRule]] = {
    # mini-swe-agent
    "LimitsExceeded": _GAVE_UP,
    "CostLimitExceeded": _GAVE_UP,
    "StepLimitExceeded": _GAVE_UP,
    "ContextWindowExceededError": _CONTEXT,
    "FormatError": _FORMAT,
    "ExecutionTimeoutError": _TIMEOUT,
    "TimeoutExpired": _TIMEOUT,
    "TimeoutError": _TIMEOUT,
    "AuthenticationError": _LLM,
    "RateLimitError": _LLM,
    "APIError": _LLM,
    "APIConnectionError": _LLM,
    "APITimeoutError": _LLM,
    "BadRequestError": _LLM,
    "InternalServerError": _LLM,
    "ServiceUnavailableError": _LLM,
    "NotFoundError": _LLM,
    # SWE-agent
    "exit_cost": _GAVE_UP,
    "exit_step_limit": _GAVE_UP,
    "exit_context": _CONTEXT,
    "exit_format": _FORMAT,
    "exit_command_timeout": _TIMEOUT,
    "exit_total_execution_time": _TIMEOUT,
    "exit_api": _LLM,
    "exit_environment_error": _ENV,
    "early_exit": _GAVE_UP_EARLY,
    "exit_forfeit": _GAVE_UP_EARLY,
    # Inspect AI sample limits (``limit.type``)
    "limit:message": _GAVE_UP,
    "limit:token": _GAVE_UP,
    "limit:cost": _GAVE_UP,
    "limit:operator": _GAVE_UP,
    "limit:context": _CONTEXT,
    "limit:time": _TIMEOUT,
    "limit:working": _TIMEOUT,
}
SUBMITTED_STATUSES: Final = frozenset({"Submitted", "submitted", "completed", ""})
UNRECOGNISED_EXIT = ExitStatusRule(Reason.UNKNOWN, "exit-status", "an exit status we do not know")


def from_exit_status(status: str) -> ExitStatusRule | None:
    """The rule for an imported agent's exit status; None when it submitted normally.

    An unknown status is ``UNKNOWN`` (infrastructure): we cannot tell whose fault it was, so
    it is neither credited to nor held against the agent.
    """
    status = (status or "").strip()
    if status in SUBMITTED_STATUSES:
        return None
    if status.startswith("submitted (") and status.endswith(")"):
        # Auto-submitted after a limit: the inner status says which.
        return EXIT_STATUS_RULES.get(status[len("submitted (") : -1], UNRECOGNISED_EXIT)
    return EXIT_STATUS_RULES.get(status, UNRECOGNISED_EXIT)
