"""What a CLI run means: its exit, the gateway's summary and its own usage report, mapped to the
taxonomy. Pure: no Django, no I/O.

The decisions, in order (the first that applies):

1. killed by us at its time limit: ``TIMEOUT`` (``[timeout]``, ours: the harness's clock);
2. the kernel's OOM killer: ``SANDBOX_ERROR`` ``[oom]``;
3. an upstream error the gateway classed permanent (401/403, unknown model): ``LLM_ERROR``,
   ``error_kind=permanent``, so fail-fast stops the model configuration;
4. a budget the gateway enforced (calls, tokens, cost, wall time): ``AGENT_GAVE_UP``
   ``[budget:<name>]``;

Wall time has two clocks that must not contradict each other. The gateway's starts when the
agent does and refuses model calls past ``max_time_sec`` (``[budget:time]``); the harness kills
the CLI ``grace`` seconds later. A CLI that stopped by itself after the gateway told it its
time was up gave up on a budget (4); one the harness had to kill is a ``TIMEOUT`` (1), which
wins even when the gateway had refused it first (the error text then says so): it did not stop
when told, and a kill is ours. A CLI killed in the middle of a long tool call, with no model
call past the budget, is a ``TIMEOUT`` as well.
5. transient upstream errors the gateway's retries did not outlast: ``LLM_ERROR`` transient;
6. no model call at all (or calls without a token): an **empty run**, ``LLM_ERROR`` with
   ``is_empty_run`` (infrastructure, out of the rates). When the CLI's exit says why, the kind
   is permanent, as the reference classes them (``fail-fast-and-error-classification.md``):
   ``[cli-usage]`` a flag or argument it does not know (``unknown option``, ``unexpected
   argument``...), ``[cli-start]`` it could not start (exit 126/127: no binary, not executable,
   a missing loader or library; Node's ``Cannot find module``: its script is missing), the
   line that says so in the error text. Neither is the agent's fault: the definition or the
   install is wrong, and every attempt of the configuration would fail the same way;
   a usage listing printed alone (OpenCode's answer to a flag it does not know, exit 1,
   naming none) is ``[cli-usage]`` too;
7. otherwise the CLI worked: a non-zero exit after model calls is ``AGENT_GAVE_UP``
   ``[cli-exit]`` (its own turn limit, say) unless the final tests pass; exit 0 leaves the
   verdict to the final tests.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from runs.taxonomy import Reason

STDERR_TAIL_CHARS = 4000
_USAGE_ERRORS = re.compile(
    r"unknown (option|flag|argument)|unrecognized (option|argument)|unexpected argument|"
    r"invalid (option|flag)|no such option|unexpected extra argument",
    re.IGNORECASE,
)
# A usage listing (yargs') printed alone: OpenCode's answer to an argument it does not know,
# exit 1 without saying which.
_USAGE_LISTING = re.compile(r"^\s*-h, --help\s+show help", re.IGNORECASE | re.MULTILINE)
_START_ERRORS = re.compile(
    r"not found|no such file|cannot execute|exec format error|permission denied|"
    r"error while loading shared libraries|GLIBC_|cannot find module",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class CliRun:
    """How the CLI process ended."""

    exit_code: int
    signal: int | None
    timed_out: bool  # killed by the harness at its time limit
    oom_killed: bool
    duration_sec: float
    stdout: str
    stderr: str


@dataclass(frozen=True)
class GatewayView:
    """The part of the gateway's summary an outcome depends on."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    budget_exceeded: str | None = None
    permanent_error: str | None = None
    transient_exhausted: bool = False
    transient_error: str = ""


@dataclass(frozen=True)
class Classified:
    reason: Reason | None
    stop: str
    error_text: str = ""
    error_kind: str | None = None
    is_timeout: bool = False
    is_empty_run: bool = False


def signal_of(exit_code: int, signal: int | None = None) -> int | None:
    """The signal that ended the process: given, or a shell's 128+N."""
    if signal is not None:
        return signal
    return exit_code - 128 if 128 < exit_code < 160 else None


def classify(
    name: str, run: CliRun, gateway: GatewayView, *, time_limit: float, grace: float = 0.0
) -> Classified:
    last = last_line(run.stderr) or last_line(run.stdout)
    if run.timed_out:
        limit = f"{time_limit:g}s" + (f" and {grace:g}s of grace" if grace else "")
        told = (
            "; the gateway had refused its model calls past its time budget"
            if gateway.budget_exceeded == "time"
            else ""
        )
        return Classified(
            Reason.TIMEOUT,
            "time_budget",
            f"[timeout] {name} killed by the harness at its time limit ({limit}){told}",
            is_timeout=True,
        )
    if run.oom_killed:
        return Classified(Reason.SANDBOX_ERROR, "oom", f"[oom] {name} was killed by the OOM killer")
    if gateway.permanent_error:
        return Classified(
            Reason.LLM_ERROR,
            "llm_error",
            f"[llm-permanent] {name}: the upstream refused: {gateway.permanent_error}",
            error_kind="permanent",
        )
    if gateway.budget_exceeded:
        return Classified(
            Reason.AGENT_GAVE_UP,
            f"{gateway.budget_exceeded}_budget",
            f"[budget:{gateway.budget_exceeded}] {name} ran past the {gateway.budget_exceeded} "
            "budget: the gateway refused its further calls",
        )
    if gateway.transient_exhausted:
        return Classified(
            Reason.LLM_ERROR,
            "llm_error",
            f"[llm-transient] {name}: upstream errors outlasted the gateway's retries: "
            f"{gateway.transient_error}".rstrip(": "),
            error_kind="transient",
        )
    if gateway.calls == 0 or gateway.input_tokens + gateway.output_tokens == 0:
        made = "before any model call" if gateway.calls == 0 else "with 0 tokens"
        head = f"{name} exited {run.exit_code} {made}"
        what = head + (f": {last}" if last else "")
        output = run.stderr + run.stdout
        if run.exit_code in (126, 127) or (run.exit_code != 0 and _START_ERRORS.search(output)):
            return Classified(
                Reason.LLM_ERROR,
                "cli_start",
                f"[cli-start] {_said(head, last, output, _START_ERRORS)}",
                error_kind="permanent",
                is_empty_run=True,
            )
        if run.exit_code != 0 and _USAGE_ERRORS.search(output):
            return Classified(
                Reason.LLM_ERROR,
                "cli_usage",
                f"[cli-usage] {_said(head, last, output, _USAGE_ERRORS)}",
                error_kind="permanent",
                is_empty_run=True,
            )
        if run.exit_code != 0 and _USAGE_LISTING.search(run.stderr) and not run.stdout.strip():
            return Classified(
                Reason.LLM_ERROR,
                "cli_usage",
                f"[cli-usage] {head}, printing its usage and nothing else (its answer to an "
                "argument it does not know)",
                error_kind="permanent",
                is_empty_run=True,
            )
        return Classified(
            Reason.LLM_ERROR, "empty_run", what, error_kind="transient", is_empty_run=True
        )
    if run.exit_code != 0:
        sig = signal_of(run.exit_code, run.signal)
        how = f"signal {sig}" if sig else f"exit {run.exit_code}"
        return Classified(
            Reason.AGENT_GAVE_UP,
            "cli_exit",
            f"[cli-exit] {name} stopped with {how}" + (f": {last}" if last else ""),
        )
    return Classified(None, "done")


def _said(head: str, last: str, output: str, pattern: re.Pattern[str]) -> str:
    """``head`` and the line of the output that says why: its last line, unless another says
    it (a CLI that prints its whole help after "Unknown arguments: ...")."""
    if last and not pattern.search(last):
        last = next((x.strip()[:300] for x in output.splitlines() if pattern.search(x)), last)
    return f"{head}: {last}" if last else head


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def stderr_tail(text: str) -> str:
    return text[-STDERR_TAIL_CHARS:]


@dataclass(frozen=True)
class CliSummary:
    """What the CLI itself reported (its own count, kept beside the gateway's)."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    turns: int | None = None
    cost_usd: float | None = None
    is_error: bool | None = None
    text: str = ""

    def to_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v not in (None, "")}


def read_summary(kind: str, stdout: str) -> CliSummary:
    """The usage report a CLI prints on stdout, read as its definition's ``summary`` says."""
    if kind == "claude-json":
        for line in reversed(stdout.strip().splitlines()):
            data = _json(line)
            if isinstance(data, dict) and data.get("type") == "result":
                usage = data.get("usage") or {}
                return CliSummary(
                    input_tokens=usage.get("input_tokens"),
                    output_tokens=usage.get("output_tokens"),
                    turns=data.get("num_turns"),
                    cost_usd=data.get("total_cost_usd"),
                    is_error=data.get("is_error"),
                    text=str(data.get("result") or "")[:2000],
                )
        return CliSummary()
    if kind == "codex-jsonl":
        tokens_in = tokens_out = turns = 0
        text, failed = "", None
        for line in stdout.splitlines():
            event = _json(line)
            if not isinstance(event, dict):
                continue
            if event.get("type") == "turn.completed":
                usage = event.get("usage") or {}
                tokens_in += int(usage.get("input_tokens") or 0)
                tokens_out += int(usage.get("output_tokens") or 0)
                turns += 1
            elif event.get("type") == "turn.failed":
                failed = True
                text = str((event.get("error") or {}).get("message") or "")[:2000]
            elif event.get("type") == "item.completed":
                item = event.get("item") or {}
                if item.get("type") == "agent_message":
                    text = str(item.get("text") or "")[:2000]
        return CliSummary(tokens_in, tokens_out, turns, None, failed or False, text)
    if kind == "qwen-json":
        return _qwen_summary(stdout)
    if kind == "gemini-json":
        return _gemini_summary(stdout)
    if kind == "opencode-json":
        return _opencode_summary(stdout)
    if kind == "mini-swe-agent":  # its trajectory file (``--output``), not its stdout
        data = _json(stdout)
        info = data.get("info") if isinstance(data, dict) else None
        if isinstance(info, dict):
            stats = info.get("model_stats") or {}
            return CliSummary(
                turns=stats.get("api_calls"),
                cost_usd=stats.get("instance_cost"),
                is_error=info.get("exit_status") != "Submitted",
                text=str(info.get("exit_status") or ""),
            )
    return CliSummary()


def _qwen_summary(stdout: str) -> CliSummary:
    """Qwen Code's ``--output-format json``: one JSON array of its events, printed at the end,
    the last a ``result`` (its usage summed over its calls, side calls included)."""
    events = _json(stdout.strip())
    if isinstance(events, dict) and isinstance(events.get("error"), dict):  # it failed
        return CliSummary(is_error=True, text=str(events["error"].get("message") or "")[:2000])
    if not isinstance(events, list):
        return CliSummary()
    for event in reversed(events):
        if isinstance(event, dict) and event.get("type") == "result":
            usage = event.get("usage") or {}
            return CliSummary(
                input_tokens=usage.get("input_tokens"),
                output_tokens=usage.get("output_tokens"),
                turns=event.get("num_turns"),
                is_error=event.get("is_error"),
                text=str(event.get("result") or event.get("error") or "")[:2000],
            )
    return CliSummary()


def _gemini_summary(stdout: str) -> CliSummary:
    """Gemini CLI's ``--output-format json``: one object at the end, its ``response`` and its
    ``stats`` per model (``prompt`` tokens in, ``candidates`` and ``thoughts`` out), or an
    ``error``."""
    doc = _json(stdout.strip())
    if not isinstance(doc, dict):
        return CliSummary()
    error = doc.get("error")
    if isinstance(error, dict):
        return CliSummary(is_error=True, text=str(error.get("message") or "")[:2000])
    models = ((doc.get("stats") or {}).get("models") or {}).values()
    tokens = [m.get("tokens") or {} for m in models if isinstance(m, dict)]
    calls = [(m.get("api") or {}).get("totalRequests") or 0 for m in models if isinstance(m, dict)]
    return CliSummary(
        input_tokens=sum(int(t.get("prompt") or 0) for t in tokens) if tokens else None,
        output_tokens=sum(
            int(t.get("candidates") or 0) + int(t.get("thoughts") or 0) for t in tokens
        )
        if tokens
        else None,
        turns=sum(int(c) for c in calls) if calls else None,
        is_error=False,
        text=str(doc.get("response") or "")[:2000],
    )


def _opencode_summary(stdout: str) -> CliSummary:
    """OpenCode's ``--format json``: one event a line; each ``step_finish`` (a model call of its
    loop) carries that call's tokens and cost, an ``error`` event says why it stopped (a 401).
    Its side calls (the session's title) are not in it: the gateway counts those."""
    tokens_in = tokens_out = turns = 0
    cost = 0.0
    text, failed = "", False
    for line in stdout.splitlines():
        event = _object(_json(line))
        part = _object(event.get("part"))
        if event.get("type") == "step_finish":
            tokens = _object(part.get("tokens"))
            tokens_in += int(tokens.get("input") or 0)
            tokens_out += int(tokens.get("output") or 0)
            cost += float(part.get("cost") or 0)
            turns += 1
        elif event.get("type") == "text":
            text = str(part.get("text") or "")[:2000]
        elif event.get("type") == "error":
            failed = True
            error = _object(event.get("error"))
            said = _object(error.get("data")).get("message") or error.get("name") or "error"
            text = str(said)[:2000]
    if not turns and not failed:
        return CliSummary()
    return CliSummary(tokens_in, tokens_out, turns, cost, failed, text)


def _object(value: object) -> dict:
    return value if isinstance(value, dict) else {}


def _json(line: str) -> object:
    try:
        return json.loads(line)
    except ValueError:
        return None
