"""What a gateway is opened with (``GatewayConfig``) and what it reports (``GatewaySummary``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from runs.llm_errors import RetryPolicy
from runs.pricing import AttemptCost, CostBreakdown, PriceRow, TokenClasses
from runs.upstreams import UpstreamPolicy
from sandbox.gateway_mount import DEFAULT_PORT

# The four budgets, in the order a request is checked against them.
BUDGET_NAMES = ("time", "calls", "tokens", "cost")


@dataclass(frozen=True, slots=True)
class GatewayBudgets:
    """Limits on the model calls of one attempt; None is no limit. A model call is refused
    once ``max_calls`` calls were made, once the tokens (in + out) or the cost reached their
    limit, or once ``max_wall_sec`` passed since the clock started: ``Gateway.start_clock()``
    (the agent starts), else the gateway's opening.

    Calls in flight hold a reservation (runs/gateway/ledger.py): a call is admitted against
    what is left after them, waiting while they hold it; a stream is cut once its running
    usage passes its reservation; only a whole (non-streamed) answer larger than what was
    left can cross a limit, by that one answer."""

    max_calls: int | None = None
    max_tokens: int | None = None
    max_cost_usd: float | None = None
    max_wall_sec: float | None = None


class GatewayConfigError(ValueError):
    """A configuration the gateway will not serve (the message names the field)."""


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    """One attempt's gateway. ``upstream_base_url`` is what the CLI would use without us
    (``https://api.openai.com/v1``, ``https://api.anthropic.com``): a request to
    ``<gateway>/<path>`` goes to ``<upstream_base_url>/<path>``, so the CLI's base URL is the
    gateway's URL whatever the provider. ``upstream_api_key`` never leaves the host."""

    upstream_base_url: str
    upstream_api_key: str
    # The model every request must name (or one of ``allowed_models``): another is refused
    # (400, ``not_allowed``). Empty: no model is pinned (a gateway used on its own).
    model_name: str = ""
    allowed_models: tuple[str, ...] = ()
    budgets: GatewayBudgets = field(default_factory=GatewayBudgets)
    # The configuration's prices (USD per million tokens); None: the price table.
    price_input_per_mtok: float | None = None
    price_output_per_mtok: float | None = None
    # The JSON price table (the LLM_PRICE_TABLE setting), over the price table's rows.
    price_table_path: str | None = None
    # The price table's rows (the runs.PriceEntry model, runs/prices.py); None: the list
    # prices shipped with the code (runs.pricing.LIST_PRICES). A call is priced by the rows in
    # effect on its day (UTC).
    price_rows: tuple[PriceRow, ...] | None = None
    # model_calls.jsonl; None records nothing (the summary is still kept).
    record_path: Path | None = None
    # Each request and response body is kept byte for byte up to this many bytes.
    body_cap_bytes: int = 1_000_000
    # All of model_calls.jsonl (runs/gateway/record.py): past it records are summarised, then
    # only counted.
    record_max_bytes: int = 64 * 1024 * 1024
    # Values never written to a record or a log, nor passed to the CLI, beside the key and
    # the token (runs/gateway/redact.py).
    secrets: tuple[str, ...] = ()
    # Output tokens reserved for a model call that sets no max_tokens / max_output_tokens.
    default_output_reserve: int = 8192
    # Retries of transient upstream failures (pass runs.agents.retries.retry_policy(): the
    # LLM_RETRY_* settings).
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    # Seconds to connect, and between two reads of an answer (a stream may last longer).
    upstream_timeout_sec: float = 600.0
    max_request_bytes: int = 32 * 1024 * 1024
    # Request bytes held in memory at once by all the calls being read or sent (a body waits
    # for room, then gets a 503): what parallel large requests may take of the worker.
    max_request_bytes_in_flight: int = 96 * 1024 * 1024
    # Client connections open at once (each has a thread), and requests being served at once;
    # one over either limit is refused (503, 429) and recorded.
    max_connections: int = 64
    max_calls_in_flight: int = 32
    # An answer's bytes, whole or streamed (a stream past it is cut: runs/gateway/meter.py).
    max_response_bytes: int = 64 * 1024 * 1024
    # Where the forwarder listens inside the sandbox.
    sandbox_port: int = DEFAULT_PORT
    # Whose gateway this is (the attempt's public id): its socket folder is named
    # ``<owner>.<random>``, so the reaper can tell a leftover of a finished attempt
    # (runs/workers/leftovers.py).
    owner: str = ""
    # Ask for usage in chat-completions streams (stream_options.include_usage) when the CLI
    # did not: without it a stream reports no tokens, and budgets cannot be kept.
    stream_usage: bool = True
    # The variable ``upstream_api_key`` was read from, and the operator's lists
    # (runs/upstreams.py): with a policy, the gateway refuses to open (``UpstreamRefused``)
    # for a variable or an upstream not on them.
    api_key_env: str = ""
    upstream_policy: UpstreamPolicy | None = None


class UpstreamError(NamedTuple):
    """An upstream error: its message (fingerprintable: no key, no token) and the HTTP status
    (None when there was no answer)."""

    message: str
    status: int | None


@dataclass(frozen=True, slots=True)
class GatewaySummary:
    """The attempt's model calls as the gateway saw them (``Gateway.summary``). Failures and
    retries are those of model calls; a request for the model list or a token count that fails
    counts only when the upstream refused the key (401, 403: every call would fail)."""

    calls: int = 0  # model calls let through (retries of one call count once)
    input_tokens: int = 0  # every input token, cached or not
    output_tokens: int = 0
    # The input tokens written to and read from the prompt cache (within input_tokens).
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    # The cost of the priced calls, and by class (runs/pricing.py); ``unpriced_calls`` calls
    # had no price (``unpriced_reason`` says the first's): then the attempt's cost is unknown.
    cost_usd: float = 0.0
    cost_input_usd: float = 0.0
    cost_cache_write_usd: float = 0.0
    cost_cache_read_usd: float = 0.0
    cost_output_usd: float = 0.0
    unpriced_calls: int = 0
    unpriced_reason: str = ""
    # What the cost budget counts: the cost, an unpriced cache class at a bound
    # (runs.pricing.UNPRICED_CACHE_BUDGET_FACTOR).
    budget_cost_usd: float = 0.0
    # The first budget a call was refused for: "calls", "tokens", "cost" or "time".
    budget_exceeded: str | None = None
    budget_message: str = ""
    # The first permanent upstream error (401, 403, unknown model...): not retried.
    permanent_error: UpstreamError | None = None
    transient_failures: int = 0  # transient upstream failures seen (retried or not)
    transient_exhausted: int = 0  # calls whose transient failure reached the CLI
    # The last of those, in the upstream's words (its status, None when it never answered).
    transient_error: UpstreamError | None = None
    refused: int = 0  # requests without the attempt's token (401)
    requests: int = 0  # every request received, refused ones included
    retries: int = 0
    wall_sec: float = 0.0  # since the clock started (start_clock, else the opening)

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def attempt_cost(self) -> AttemptCost:
        """The attempt's tokens by class and their cost (unknown when a call had no price)."""
        cached = self.cache_write_tokens + self.cache_read_tokens
        reason = ""
        if self.unpriced_calls:
            reason = f"{self.unpriced_calls} of {self.calls} model calls: {self.unpriced_reason}"
        return AttemptCost(
            TokenClasses(
                max(self.input_tokens - cached, 0),
                self.cache_write_tokens,
                self.cache_read_tokens,
                self.output_tokens,
            ),
            CostBreakdown(
                self.cost_input_usd,
                self.cost_cache_write_usd,
                self.cost_cache_read_usd,
                self.cost_output_usd,
                reason,
            ),
        )

    @property
    def known_cost_usd(self) -> float | None:
        """The cost, or None when a call had no price (an unknown cost is never $0)."""
        return None if self.unpriced_calls else self.cost_usd

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for name in ("permanent_error", "transient_error"):
            error = getattr(self, name)
            data[name] = None if error is None else error._asdict()
        return data
