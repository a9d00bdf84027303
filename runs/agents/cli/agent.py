"""Run an agent CLI on an attempt: in its sandbox (Claude Code, Codex) or on the worker with its
commands in the sandbox (mini-swe-agent), its model calls through the gateway.

The pipeline calls ``cli_resources`` before it opens the sandbox (the install is mounted
read-only and the gateway exposed when the sandbox is made), then ``CliAgent.run`` in the agent
stage. The CLI gets the gateway's per-attempt token as its key, never the real one; the real
key stays in the gateway on the worker. What happened becomes an outcome in ``outcome.py``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import posixpath
import shlex
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runs.agents.cli.bridge import SandboxBridge
from runs.agents.cli.definition import AgentDefinition, DefinitionError, get_definition, render
from runs.agents.cli.install import InstallError, ensure_install
from runs.agents.cli.outcome import (
    CliRun,
    GatewayView,
    classify,
    read_summary,
)
from runs.agents.contract import AgentContext, AgentOutcome, Budgets, ModelSettings
from runs.agents.events import EventLog
from runs.taxonomy import Reason
from runs.transcript import MAX_FILE_BYTES, MODEL_CALLS, parse_model_calls
from sandbox.base import ReadOnlyMount

if TYPE_CHECKING:
    from runs.gateway import GatewaySummary, UpstreamError

MOUNT_ROOT = "/mnt/agentbench/agents"
SANDBOX_HOME = "/home/agent"
PROMPT_PATH = "/tmp/agentbench-prompt.txt"
BRIDGE_DIR = Path(__file__).parent / "msa"
OUTPUT_CAP_BYTES = 4_000_000
# The harness kills the CLI this long after its time budget ran out at the gateway, so that a
# CLI told "time is up" by a refused model call can stop by itself (AGENT_GAVE_UP
# [budget:time]); one still running then is killed (TIMEOUT, ours). See outcome.py.
KILL_GRACE_SEC = 15.0
# A prompt goes into the sandbox through environment variables of at most this size each
# (Linux caps one argument or variable at 128 KiB).
_ENV_CHUNK = 100_000


def _tool_calls(bridged: int | None, artifacts_dir: Path) -> int:
    """How many tool calls the agent made: the bridge's count where its commands came through
    one (mini-swe-agent), else the calls its model asked for in the gateway's record, counted
    as the transcript viewer shows them (a CLI in the sandbox runs its tools itself)."""
    if bridged is not None:
        return int(bridged)
    record = artifacts_dir / MODEL_CALLS
    try:
        with record.open("rb") as f:
            data = f.read(MAX_FILE_BYTES)
    except OSError:
        return 0
    return parse_model_calls(data).tool_call_count


@dataclass
class CliResources:
    """What an attempt of a CLI agent needs before its sandbox exists."""

    name: str
    definition: AgentDefinition | None = None
    install: Path | None = None
    gateway: Any = None  # an open runs.gateway handle
    error: str = ""  # why the CLI cannot run: the agent stage reports it
    error_reason: Reason = Reason.LLM_ERROR
    error_kind: str = "permanent"
    install_seconds: float = 0.0
    extra: dict = field(default_factory=dict)
    runtime: Path | None = None  # the runtime's install (Node), for a definition with one

    @property
    def mount_target(self) -> str:
        assert self.definition is not None
        return f"{MOUNT_ROOT}/{self.definition.install_dir_name}"

    @property
    def runtime_target(self) -> str:
        """Where the runtime is mounted, beside the install (its own folder in the cache)."""
        assert self.definition is not None
        runtime = self.definition.runtime_part()
        return f"{MOUNT_ROOT}/{runtime.install_dir_name}" if runtime is not None else ""

    def sandbox_fields(self) -> dict[str, Any]:
        """Fields for the attempt's ``SandboxConfig``: the install and its runtime (read-only,
        when the CLI runs inside) and the gateway's exposure."""
        fields: dict[str, Any] = {}
        if self.definition is None or self.install is None or self.gateway is None:
            return fields
        if self.definition.spec.runs_in == "sandbox":
            mounts = [ReadOnlyMount(self.install, self.mount_target)]
            if self.runtime is not None:
                mounts.append(ReadOnlyMount(self.runtime, self.runtime_target))
            fields["readonly_mounts"] = tuple(mounts)
        mount = getattr(self.gateway, "sandbox_mount", None)
        if mount is not None:
            fields["gateway"] = mount
        return fields


@contextlib.contextmanager
def cli_resources(
    name: str,
    *,
    model: ModelSettings,
    budgets: Budgets,
    artifacts_dir: Path,
    body_cap_bytes: int,
    record_max_bytes: int = 64 * 1024 * 1024,
    price_table_path: str | None = None,
    owner: str = "",
    find: Callable[[str], AgentDefinition] = get_definition,
) -> Iterator[CliResources]:
    """The definition, its cached install and an open gateway for one attempt (``owner``, its
    public id, names the gateway's socket folder); on a problem, resources that say why (the
    agent stage turns it into the attempt's outcome). ``find`` looks the definition up (the
    pipeline's also knows the ones staff added: ``runs.agent_clis``)."""
    try:
        definition = find(name)
    except DefinitionError as exc:
        yield CliResources(name, error=f"[cli-definition] {exc}")
        return
    if model.upstream_refused:  # runs/upstreams.py: the gateway never opens with that key
        yield CliResources(name, definition, error=f"[upstream-refused] {model.upstream_refused}")
        return
    try:
        install = ensure_install(definition)
        runtime_part = definition.runtime_part()
        runtime = ensure_install(runtime_part) if runtime_part is not None else None
    except InstallError as exc:
        yield CliResources(
            name,
            definition,
            error=f"[cli-install] {exc}",
            error_reason=Reason.SANDBOX_ERROR,
            error_kind="transient",
        )
        return
    if not model.model_name:
        yield CliResources(name, definition, error="[cli-config] no model name configured")
        return
    from runs.agents.retries import retry_policy
    from runs.gateway import GatewayBudgets, GatewayConfig, GatewayConfigError, open_gateway
    from runs.upstreams import policy_from_settings

    config = GatewayConfig(
        upstream_base_url=model.base_url,
        upstream_api_key=model.api_key,
        api_key_env=model.api_key_env,
        upstream_policy=policy_from_settings(),
        model_name=model.model_name,
        budgets=GatewayBudgets(
            max_calls=budgets.max_model_calls,
            max_tokens=budgets.max_tokens,
            max_cost_usd=budgets.max_cost_usd,
            # Counted from the agent's start (CliAgent.run starts the clock), not from here:
            # setup and the baseline are not the agent's time.
            max_wall_sec=budgets.max_time_sec,
        ),
        price_input_per_mtok=model.price_input_per_mtok,
        price_output_per_mtok=model.price_output_per_mtok,
        price_table_path=price_table_path,
        price_rows=model.price_rows,
        record_path=artifacts_dir / MODEL_CALLS,
        body_cap_bytes=body_cap_bytes,
        record_max_bytes=record_max_bytes,
        retry=retry_policy(),
        owner=owner,
    )
    try:
        gateway = open_gateway(config)
    except GatewayConfigError as exc:  # a cost budget without a price, say
        yield CliResources(name, definition, error=f"[cli-config] {exc}")
        return
    with gateway:
        yield CliResources(
            name,
            definition,
            install.path,
            gateway,
            install_seconds=install.seconds + (runtime.seconds if runtime is not None else 0.0),
            runtime=runtime.path if runtime is not None else None,
        )


class CliAgent:
    """The agent for a model configuration of variant ``cli``."""

    def __init__(self, resources: CliResources):
        self.resources = resources
        self.name = f"cli:{resources.name}"

    def run(self, ctx: AgentContext) -> AgentOutcome:
        started = time.monotonic()
        events = EventLog(ctx.artifacts_dir)
        res = self.resources
        events.emit("agent_start", agent=self.name, task=ctx.task.task_id)
        if res.error or res.definition is None or res.install is None:
            events.emit("agent_error", agent=self.name, error=res.error)
            return AgentOutcome(
                reason=res.error_reason,
                stop="cli_error",
                error_text=res.error,
                llm_error_kind=res.error_kind,
            )
        definition = res.definition
        # The wall-time budget starts with the agent (the gateway opened before the sandbox).
        res.gateway.start_clock()
        values = {
            "model": ctx.model.model_name,
            "max_turns": ctx.budgets.max_steps,
            "token": res.gateway.token,
            "workdir": ctx.task.workdir,
            "prompt": prompt_for(definition, ctx),
        }
        if definition.spec.runs_in == "sandbox":
            run = self._run_in_sandbox(ctx, definition, values)
        else:
            run = self._run_on_worker(ctx, definition, values)
        # What the CLI printed is stored and served: the token (and the key, would the CLI
        # ever see it) out by value, as in the gateway's record.
        run = dataclasses.replace(
            run,
            stdout=res.gateway.scrub_text(run.stdout),
            stderr=res.gateway.scrub_text(run.stderr),
        )
        if "summary_text" in res.extra:
            res.extra["summary_text"] = res.gateway.scrub_text(res.extra["summary_text"])
        summary = res.gateway.summary
        view = gateway_view(summary)
        verdict = classify(
            definition.spec.title,
            run,
            view,
            time_limit=ctx.budgets.max_time_sec,
            grace=KILL_GRACE_SEC,
        )
        own = read_summary(definition.spec.summary, res.extra.pop("summary_text", run.stdout))
        outcome = AgentOutcome(
            reason=verdict.reason,
            stop=verdict.stop,
            tokens_in=view.input_tokens,
            tokens_out=view.output_tokens,
            cost_usd=view.cost_usd,
            cost_detail=summary.attempt_cost(),
            tool_calls=_tool_calls(res.extra.pop("tool_calls", None), ctx.artifacts_dir),
            steps=view.calls,
            error_text=verdict.error_text,
            is_timeout=verdict.is_timeout,
            is_empty_run=verdict.is_empty_run,
            llm_error_kind=verdict.error_kind,
            duration_sec=round(time.monotonic() - started, 3),
            exit_code=run.exit_code,
            signal=run.signal,
            command=res.extra.pop("command", ""),
            stdout=run.stdout,
            stderr=run.stderr,
            cli={
                "name": definition.name,
                "version": definition.spec.install.version,
                "runs_in": definition.spec.runs_in,
                "summary": own.to_dict(),
                "install": res.install.name,
                **({"runtime": res.runtime.name} if res.runtime is not None else {}),
            },
        )
        events.emit(
            "agent_finish",
            stop=outcome.stop,
            exit_code=run.exit_code,
            signal=run.signal,
            calls=view.calls,
            error=outcome.error_text[:500],
        )
        return outcome

    # -- inside the sandbox ------------------------------------------------------------------

    def _run_in_sandbox(
        self, ctx: AgentContext, definition: AgentDefinition, values: dict[str, Any]
    ) -> CliRun:
        res = self.resources
        sb = ctx.sandbox
        values |= {
            "install": res.mount_target,
            "runtime": res.runtime_target,
            "base_url": res.gateway.sandbox_base_url,
            "home": SANDBOX_HOME,
            "prompt_file": PROMPT_PATH,
            "bridge": "",
        }
        prompt = values.pop("prompt")
        chunks = [prompt[i : i + _ENV_CHUNK] for i in range(0, len(prompt), _ENV_CHUNK)] or [""]
        env = {f"AB_PROMPT_{i}": chunk for i, chunk in enumerate(chunks)}
        joined = "".join(f'"$AB_PROMPT_{i}"' for i in range(len(chunks)))
        files = {f"{SANDBOX_HOME}/{p}": t for p, t in definition.spec.home_files.items()}
        folders = [f"{SANDBOX_HOME}/{d}" for d in definition.spec.writable]
        folders += sorted({posixpath.dirname(p) for p in files} - {SANDBOX_HOME})
        dirs = " ".join(shlex.quote(d) for d in folders)
        prepare = f"printf %s {joined} > {PROMPT_PATH}" + (f" && mkdir -p {dirs}" if dirs else "")
        for i, (path, text) in enumerate(files.items()):  # its settings, as the CLI's user
            env[f"AB_HOME_FILE_{i}"] = text
            prepare += f' && printf %s "$AB_HOME_FILE_{i}" > {shlex.quote(path)}'
        prepared = sb.exec(prepare, timeout=60, env=env)
        if not prepared.ok:  # the CLI never starts: an empty run that says why
            return CliRun(
                prepared.exit_code,
                None,
                False,
                prepared.oom_killed,
                0.0,
                "",
                f"could not write the prompt into the sandbox: {prepared.stderr}",
            )
        values["prompt"] = ""
        argv = [render(t, values) for t in definition.spec.command]
        command = " ".join(shlex.quote(a) for a in argv)
        if definition.spec.stdin:
            command += " < " + shlex.quote(render(definition.spec.stdin, values))
        cli_env = {k: render(v, values) for k, v in definition.spec.env.items()}
        cli_env.setdefault("HOME", SANDBOX_HOME)
        res.extra["command"] = _redact(command, res.gateway.token)
        result = sb.exec(command, timeout=_kill_after(ctx), cwd=ctx.task.workdir, env=cli_env)
        return CliRun(
            exit_code=result.exit_code,
            signal=None,
            timed_out=result.timed_out,
            oom_killed=result.oom_killed,
            duration_sec=result.duration_sec,
            stdout=result.stdout,
            stderr=result.stderr,
        )

    # -- on the worker, commands in the sandbox ----------------------------------------------

    def _run_on_worker(
        self, ctx: AgentContext, definition: AgentDefinition, values: dict[str, Any]
    ) -> CliRun:
        res = self.resources
        assert res.install is not None
        with tempfile.TemporaryDirectory(prefix="ab-cli-") as tmp:
            home = Path(tmp) / "home"
            home.mkdir(mode=0o700)
            bridge = SandboxBridge(
                ctx.sandbox, Path(tmp) / "bridge.sock", default_cwd=ctx.task.workdir
            )
            values |= {
                "install": str(res.install),
                "runtime": str(res.runtime) if res.runtime is not None else "",
                "base_url": res.gateway.host_base_url,
                "home": str(home),
                "prompt_file": str(Path(tmp) / "prompt.txt"),
                "bridge": str(BRIDGE_DIR),
            }
            Path(values["prompt_file"]).write_text(values["prompt"])
            for name, text in definition.spec.home_files.items():
                (home / name).parent.mkdir(parents=True, exist_ok=True)
                (home / name).write_text(text)
            argv = [render(t, values) for t in definition.spec.command]
            # Only what the CLI needs: the worker's environment holds the real key.
            env = {
                "PATH": "/usr/local/bin:/usr/bin:/bin",
                "HOME": str(home),
                "LANG": "C.UTF-8",
                "AGENTBENCH_BRIDGE_SOCKET": str(bridge.path),
            } | {k: render(v, values) for k, v in definition.spec.env.items()}
            res.extra["command"] = _redact(shlex.join(argv), res.gateway.token)
            with bridge:
                run = _run_process(argv, env=env, cwd=Path(tmp), timeout=_kill_after(ctx))
            res.extra["tool_calls"] = bridge.calls
            trajectory = home / "trajectory.json"
            if trajectory.is_file():
                text = trajectory.read_text(errors="replace")
                res.extra["summary_text"] = text
                (ctx.artifacts_dir / f"{definition.name}.trajectory.json").write_text(text)
            return run


def _kill_after(ctx: AgentContext) -> float:
    """When the harness kills the CLI: its time budget (kept by the gateway) and the grace."""
    return ctx.budgets.max_time_sec + KILL_GRACE_SEC


def _run_process(argv: list[str], *, env: dict[str, str], cwd: Path, timeout: float) -> CliRun:
    started = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(
                argv,
                env=env,
                cwd=cwd,
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as exc:  # no such program, not executable
            return CliRun(127, None, False, False, 0.0, "", f"{argv[0]}: {exc.strerror}")
        timed_out = False
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        code = proc.returncode
        sig = -code if code < 0 else None
        return CliRun(
            exit_code=128 + sig if sig else code,
            signal=sig,
            timed_out=timed_out,
            oom_killed=False,
            duration_sec=round(time.monotonic() - started, 3),
            stdout=_read_capped(out),
            stderr=_read_capped(err),
        )


def _read_capped(handle: Any) -> str:
    handle.seek(0, os.SEEK_END)
    size = handle.tell()
    handle.seek(max(0, size - OUTPUT_CAP_BYTES))
    return handle.read().decode("utf-8", errors="replace")


def gateway_view(summary: GatewaySummary) -> GatewayView:
    """The gateway's summary as the outcome reads it."""
    return GatewayView(
        calls=summary.calls,
        input_tokens=summary.input_tokens,
        output_tokens=summary.output_tokens,
        cost_usd=summary.cost_usd,
        budget_exceeded=summary.budget_exceeded,
        permanent_error=_error_words(summary.permanent_error),
        transient_exhausted=summary.transient_exhausted > 0,
        transient_error=_error_words(summary.transient_error) or "",
    )


def _error_words(error: UpstreamError | None) -> str | None:
    """An upstream error's message, its status in front unless the message names it."""
    if error is None:
        return None
    if error.status is None or f"HTTP {error.status}" in error.message:
        return error.message
    return f"{error.status} {error.message}"


def prompt_for(definition: AgentDefinition, ctx: AgentContext) -> str:
    problem = ctx.task.problem_statement.strip() or "The tests of this repository fail."
    return definition.spec.prompt.replace("{problem}", problem).replace(
        "{test_command}", ctx.task.test_command
    )


def _redact(text: str, token: str) -> str:
    return text.replace(token, "<gateway-token>") if token else text
