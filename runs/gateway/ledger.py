"""The attempt's running totals and its budgets, shared by the gateway's request threads.

Calls run in parallel, and a call's size is known only at its end: so each admitted model
call holds a reservation (its own estimate: the most input a provider can count for the
request, a token a byte plus its own prompt, plus the output it allows, ``max_tokens`` /
``max_output_tokens``), and the next call is admitted only against what is left after the
reservations of the calls in flight. One that does not fit waits for them to end (each frees
what it did not use); with nothing in flight it is admitted on what is left, its reservation
cut to that. A streamed answer is cut once its running usage passes its reservation
(forward.py); a whole answer cannot be cut, so only such an answer,
larger than what was left, can cross a limit: by that one answer, never by many in parallel.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, replace
from typing import Any

from runs.gateway.config import GatewayBudgets, GatewaySummary, UpstreamError
from runs.gateway.gemini import output_limit
from runs.pricing import CostBreakdown, TokenClasses

# The most input a provider can count for a request: a byte-level BPE token covers at least
# one byte, so a token a byte of the request (whose JSON holds every byte of its text), plus
# the provider's own prompt around it (Anthropic's tool-use prompt is some 350 tokens).
# Real requests count far less (JSON, English and code run 3.5 to 4.5 bytes a token), but
# the sandbox writes the text: a third of the bytes let text dense in tokens (digits,
# punctuation, rare scripts) race parallel calls past the budget (test_gateway_budgets.py).
# Reserving more only makes parallel calls wait for each other near the budget's end.
INPUT_BYTES_PER_TOKEN = 1
INPUT_TOKENS_OVERHEAD = 1024
# The request fields that bound a call's output, in the three wire APIs.
OUTPUT_LIMIT_FIELDS = ("max_tokens", "max_completion_tokens", "max_output_tokens")


def estimate(doc: dict[str, Any] | None, body_bytes: int, default_output: int) -> tuple[int, int]:
    """(input, output) tokens a call may use at most, by its request."""
    output = None
    for name in OUTPUT_LIMIT_FIELDS:
        value = (doc or {}).get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            output = value
            break
    output = output or output_limit(doc)  # Gemini: generationConfig.maxOutputTokens
    tokens_in = math.ceil(body_bytes / INPUT_BYTES_PER_TOKEN) + INPUT_TOKENS_OVERHEAD
    return tokens_in, output or default_output


@dataclass
class Reservation:
    """What one admitted call holds of the budgets until it is settled. ``tokens`` and
    ``cost`` are None where there is no such budget."""

    tokens: int | None
    cost: float | None
    settled: bool = False


class Ledger:
    def __init__(self, budgets: GatewayBudgets):
        self.budgets = budgets
        self._lock = threading.Condition()
        # What the calls in flight hold.
        self._held_tokens = 0
        self._held_cost = 0.0
        self._holders = 0
        self.started = 0.0
        self.deadline: float | None = None
        self.start_clock()
        self._summary = GatewaySummary()
        # Counters added since the summary was last made (a call adds several at a time).
        self._counts: dict[str, int | float] = {}
        self._ended: float | None = None

    def start_clock(self) -> None:
        """The wall-time budget (and ``wall_sec``) counts from now."""
        with self._lock:
            self.started = time.monotonic()
            wall = self.budgets.max_wall_sec
            self.deadline = None if wall is None else self.started + wall

    def admit(self, tokens: int = 0, cost: float = 0.0) -> Reservation | tuple[str, str]:
        """Take one model call of at most ``tokens`` and ``cost`` out of the budgets (waiting
        while calls in flight hold what it needs); or, when a budget is used up, ``(name,
        message)`` and the call is refused (the first such budget stays in the summary)."""
        b = self.budgets
        with self._lock:
            while True:
                s = self._current()
                refusal = self._used_up(s)
                if refusal is not None:
                    return self._refuse(*refusal)
                tokens_left = None if b.max_tokens is None else b.max_tokens - s.tokens
                cost_left = None if b.max_cost_usd is None else b.max_cost_usd - s.budget_cost_usd
                if tokens_left is not None:
                    tokens_left -= self._held_tokens
                if cost_left is not None:
                    cost_left -= self._held_cost
                fits = (tokens_left is None or tokens <= tokens_left) and (
                    cost_left is None or cost <= cost_left
                )
                if fits or self._holders == 0 or self._ended is not None:
                    break
                # The calls in flight hold what this one needs: wait for one to end.
                wait = None if self.deadline is None else self.deadline - time.monotonic()
                self._lock.wait(None if wait is None else max(wait, 0.0) + 0.01)
            if (tokens_left is not None and tokens_left <= 0) or (
                cost_left is not None and cost_left <= 0
            ):
                name = "tokens" if tokens_left is not None and tokens_left <= 0 else "cost"
                why = f"the rest is held by the {self._holders} call(s) in flight"
                return self._refuse(name, why)
            held = Reservation(
                tokens=None if tokens_left is None else min(tokens, tokens_left),
                cost=None if cost_left is None else min(cost, cost_left),
            )
            self._held_tokens += held.tokens or 0
            self._held_cost += held.cost or 0.0
            self._holders += 1
            self._summary = replace(s, calls=s.calls + 1)
            return held

    def _used_up(self, s: GatewaySummary) -> tuple[str, str] | None:
        b = self.budgets
        if self.deadline is not None and time.monotonic() >= self.deadline:
            return "time", f"its wall time of {b.max_wall_sec:g} s has passed"
        if b.max_calls is not None and s.calls >= b.max_calls:
            return "calls", f"its {b.max_calls} model calls are used up"
        if b.max_tokens is not None and s.tokens >= b.max_tokens:
            return "tokens", f"{s.tokens} of its {b.max_tokens} tokens are used"
        if b.max_cost_usd is not None and s.budget_cost_usd >= b.max_cost_usd:
            return "cost", f"${s.budget_cost_usd:.4f} of its ${b.max_cost_usd:g} is spent"
        return None

    def _refuse(self, name: str, why: str) -> tuple[str, str]:
        """(hold the lock)"""
        message = (
            f"agentbench gateway: the attempt's {name} budget is used up ({why}); "
            "no more model calls are allowed"
        )
        self._exceeded(name, message)
        return name, message

    def _exceeded(self, name: str, message: str) -> None:
        s = self._current()
        if s.budget_exceeded is None:
            self._summary = replace(s, budget_exceeded=name, budget_message=message)

    def exceeded(self, name: str, message: str) -> None:
        """A budget ran out during a call (its stream was cut)."""
        with self._lock:
            self._exceeded(name, message)

    def grow(self, held: Reservation, tokens: int, cost: float) -> bool:
        """Let a call in flight hold ``tokens`` and ``cost`` (its answer turned out larger
        than its reservation), if that much is still free; False when it is not."""
        b = self.budgets
        with self._lock:
            s = self._current()
            more_tokens = 0 if held.tokens is None else max(tokens - held.tokens, 0)
            more_cost = 0.0 if held.cost is None else max(cost - held.cost, 0.0)
            if (
                b.max_tokens is not None
                and more_tokens > 0
                and s.tokens + self._held_tokens + more_tokens > b.max_tokens
            ):
                return False
            if (
                b.max_cost_usd is not None
                and more_cost > 0
                and s.budget_cost_usd + self._held_cost + more_cost > b.max_cost_usd
            ):
                return False
            if held.tokens is not None:
                held.tokens += more_tokens
                self._held_tokens += more_tokens
            if held.cost is not None:
                held.cost += more_cost
                self._held_cost += more_cost
            return True

    def settle(
        self,
        held: Reservation,
        tokens: TokenClasses | None = None,
        cost: CostBreakdown | None = None,
        budget_cost: float = 0.0,
    ) -> None:
        """A call ended: what it used is counted (its token classes, their cost or why it is
        unknown, and what the cost budget counts of it), what it held freed (once; a call that
        got no answer settles with nothing)."""
        with self._lock:
            if held.settled:
                return
            held.settled = True
            self._held_tokens -= held.tokens or 0
            self._held_cost -= held.cost or 0.0
            self._holders -= 1
            if self._holders == 0:  # no float dust left behind
                self._held_tokens, self._held_cost = 0, 0.0
            t = tokens or TokenClasses()
            counts: dict[str, int | float] = {
                "input_tokens": t.input_total,
                "output_tokens": t.output,
                "cache_write_tokens": t.cache_write,
                "cache_read_tokens": t.cache_read,
                "budget_cost_usd": budget_cost,
            }
            if cost is not None and cost.known:
                counts.update(
                    cost_usd=cost.total or 0.0,
                    cost_input_usd=cost.input,
                    cost_cache_write_usd=cost.cache_write,
                    cost_cache_read_usd=cost.cache_read,
                    cost_output_usd=cost.output,
                )
            elif cost is not None:
                counts["unpriced_calls"] = 1
                if not self._summary.unpriced_reason:
                    self._summary = replace(self._summary, unpriced_reason=cost.reason)
            for name, value in counts.items():
                self._counts[name] = self._counts.get(name, 0) + value
            self._lock.notify_all()

    def add(self, **counts: int | float) -> None:
        """Add to the summary's counters (``input_tokens=``, ``refused=``, ...)."""
        with self._lock:
            for name, value in counts.items():
                self._counts[name] = self._counts.get(name, 0) + value

    def permanent(self, error: UpstreamError) -> None:
        with self._lock:
            if self._summary.permanent_error is None:
                self._summary = replace(self._summary, permanent_error=error)

    def transient(self, error: UpstreamError) -> None:
        """A model call's transient failure reached the CLI: counted, its words kept (the
        last one's: the attempt's error text quotes it)."""
        with self._lock:
            self._counts["transient_exhausted"] = self._counts.get("transient_exhausted", 0) + 1
            self._summary = replace(self._summary, transient_error=error)

    def end(self) -> None:
        with self._lock:
            if self._ended is None:
                self._ended = time.monotonic()
            self._lock.notify_all()  # calls waiting to be admitted stop waiting

    def summary(self) -> GatewaySummary:
        with self._lock:
            ended = self._ended if self._ended is not None else time.monotonic()
            return replace(self._current(), wall_sec=round(ended - self.started, 3))

    def _current(self) -> GatewaySummary:
        """The summary with the counters added in (hold the lock)."""
        if self._counts:
            s = self._summary
            added = {k: getattr(s, k) + v for k, v in self._counts.items()}
            self._summary = replace(s, **added)  # type: ignore[arg-type]
            self._counts.clear()
        return self._summary
