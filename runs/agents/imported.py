"""Agents named by import path (``package.module:ClassName``), as Harbor's ``--agent-import-path``.

Importing a module runs its code in the worker's process, with the worker's rights: so the
module must sit under a prefix the operator listed (``AGENT_IMPORT_PATHS``, empty by default:
none), and only a superuser may set the path (runs/model_configs.py). Checked when a model
configuration is written and again when an attempt starts.

Two forms are accepted, both classes built with no arguments, one instance per attempt:

- an *agent*: a ``run(ctx: AgentContext) -> AgentOutcome`` method (runs/agents/contract.py);
- a *policy* for the built-in loop: ``start``, ``decide`` and ``observe`` methods, a ``name``
  and a ``uses_llm`` flag (runs/agents/loop.py), run by ``AgentLoop`` with its budgets,
  tools, automatic test runs and events.
"""

from __future__ import annotations

import importlib
import re
import time
import traceback
from collections.abc import Iterable
from dataclasses import dataclass

from billiard.exceptions import SoftTimeLimitExceeded

from runs.agents.contract import AgentContext, AgentOutcome
from runs.agents.events import EventLog
from runs.taxonomy import Reason
from sandbox.errors import SandboxError

# The error text's tag of an attempt whose agent could not be loaded or crashed.
IMPORT_TAG = "agent-import"
CRASH_TAG = "agent-crashed"
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
IMPORT_PATH_RE = re.compile(rf"^{_IDENT}(\.{_IDENT})*:{_IDENT}$")
POLICY_METHODS = ("start", "decide", "observe")


class ImportPathError(ValueError):
    """Why an import path names no usable agent (the message names the path)."""


@dataclass(frozen=True, slots=True)
class Resolved:
    cls: type
    form: str  # "agent" | "policy"


def module_allowed(module: str, prefixes: Iterable[str]) -> bool:
    """``module`` is one of ``prefixes`` or inside one (``a.b`` allows ``a.b.c``, not ``a.bc``)."""
    return any(module == p or module.startswith(p + ".") for p in prefixes if p)


def check_format(path: str, prefixes: Iterable[str]) -> str:
    """The module part of a well-formed, allowed path; ``ImportPathError`` otherwise. Imports
    nothing: cheap enough for every save."""
    if not IMPORT_PATH_RE.match(path):
        raise ImportPathError(
            f"{path!r} is not 'package.module:ClassName' (dotted module, a colon, a class name)"
        )
    module = path.split(":", 1)[0]
    prefixes = [p.strip() for p in prefixes if p.strip()]
    if not module_allowed(module, prefixes):
        listed = ", ".join(prefixes) or "none: the setting is empty"
        raise ImportPathError(
            f"module {module!r} is not under AGENT_IMPORT_PATHS "
            f"(AGENTBENCH_AGENT_IMPORT_PATHS lists: {listed})"
        )
    return module


def resolve(path: str, prefixes: Iterable[str]) -> Resolved:
    """Import the class ``path`` names and say which form it has; ``ImportPathError`` with
    the exception's type and message otherwise (never a traceback)."""
    module_name = check_format(path, prefixes)
    class_name = path.split(":", 1)[1]
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # any error of the module's own code: the path is unusable
        raise ImportPathError(f"cannot import {path!r}: {type(exc).__name__}: {exc}") from None
    cls = getattr(module, class_name, None)
    if cls is None:
        raise ImportPathError(f"cannot import {path!r}: module {module_name!r} has no {class_name}")
    if not isinstance(cls, type):
        raise ImportPathError(f"{path!r} is not a class ({type(cls).__name__})")
    if all(callable(getattr(cls, m, None)) for m in POLICY_METHODS):
        return Resolved(cls, "policy")
    if callable(getattr(cls, "run", None)):
        return Resolved(cls, "agent")
    raise ImportPathError(
        f"{path!r} is not an agent: it needs a run(ctx) -> AgentOutcome method, or "
        "start/decide/observe methods of a policy for the built-in loop"
    )


class ImportedAgent:
    """Runs an imported agent class, turning what it does wrong (raising, returning something
    else than an ``AgentOutcome``) into a named outcome instead of a crashed attempt. Sandbox
    failures pass through: the pipeline records them as SANDBOX_ERROR."""

    def __init__(self, path: str, resolved: Resolved):
        self.path = path
        self.resolved = resolved
        self.name = str(getattr(resolved.cls, "name", "") or path)

    def run(self, ctx: AgentContext) -> AgentOutcome:
        from runs.agents.loop import AgentLoop

        started = time.monotonic()
        events = EventLog(ctx.artifacts_dir)
        try:
            if self.resolved.form == "policy":
                outcome = AgentLoop(ctx, self.resolved.cls()).run()
            else:
                outcome = self.resolved.cls().run(ctx)
        except (SandboxError, SoftTimeLimitExceeded):  # the pipeline's to record
            raise
        except Exception as exc:
            events.emit("agent_error", agent=self.name, error=traceback.format_exc()[-4000:])
            return _failed(f"[{CRASH_TAG}] {self.path} raised {type(exc).__name__}: {exc}", started)
        if not isinstance(outcome, AgentOutcome):
            got = type(outcome).__name__
            error = f"[{CRASH_TAG}] {self.path}.run returned {got}, not AgentOutcome"
            return _failed(error, started)
        if not outcome.duration_sec:
            outcome.duration_sec = round(time.monotonic() - started, 3)
        return outcome


def _failed(error: str, started: float) -> AgentOutcome:
    """As for an agent that cannot be built (registry.MisconfiguredAgent): infrastructure,
    ahead of the final tests' verdict, and permanent, so fail-fast stops the run at once
    rather than let the same bug fail every task."""
    return AgentOutcome(
        reason=Reason.LLM_ERROR,
        stop="agent_error",
        error_text=error,
        llm_error_kind="permanent",
        duration_sec=round(time.monotonic() - started, 3),
    )
