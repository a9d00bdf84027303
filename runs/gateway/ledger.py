"""The attempt's running totals and its budgets, shared by the gateway's request threads."""

from __future__ import annotations

import threading
import time
from dataclasses import replace

from runs.gateway.config import GatewayBudgets, GatewaySummary, UpstreamError


class Ledger:
    def __init__(self, budgets: GatewayBudgets):
        self.budgets = budgets
        self._lock = threading.Lock()
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

    def admit(self) -> tuple[str, str] | None:
        """Take one model call out of the budgets; or, when one is used up, ``(name,
        message)`` and the call is refused (the first such budget stays in the summary)."""
        b = self.budgets
        with self._lock:
            s = self._current()
            refusal = None
            if self.deadline is not None and time.monotonic() >= self.deadline:
                refusal = ("time", f"its wall time of {b.max_wall_sec:g} s has passed")
            elif b.max_calls is not None and s.calls >= b.max_calls:
                refusal = ("calls", f"its {b.max_calls} model calls are used up")
            elif b.max_tokens is not None and s.tokens >= b.max_tokens:
                refusal = ("tokens", f"{s.tokens} of its {b.max_tokens} tokens are used")
            elif b.max_cost_usd is not None and s.cost_usd >= b.max_cost_usd:
                refusal = ("cost", f"${s.cost_usd:.4f} of its ${b.max_cost_usd:g} is spent")
            if refusal is None:
                self._summary = replace(s, calls=s.calls + 1)
                return None
            name, why = refusal
            message = (
                f"agentbench gateway: the attempt's {name} budget is used up ({why}); "
                "no more model calls are allowed"
            )
            if s.budget_exceeded is None:
                self._summary = replace(s, budget_exceeded=name, budget_message=message)
            return name, message

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
