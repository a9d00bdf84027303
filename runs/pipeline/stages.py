"""The stages of an attempt as functions over a sandbox or the host workspace. No Django.

Each returns a ``StageResult``: the commands it ran (command, exit code, duration, output) and
the taxonomy reason for its outcome, mapped with ``from_stage``.
"""

from __future__ import annotations

import contextlib
import re
import shlex
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from runs.pipeline import workspace
from runs.pipeline.plan import TaskPlan
from runs.taxonomy import Reason, Stage, from_stage
from sandbox.base import KILLED_EXIT_CODE, TIMEOUT_EXIT_CODE, ExecNetwork, ExecResult, Sandbox

Heartbeat = Callable[[], None]


@dataclass(frozen=True, slots=True)
class CommandRun:
    command: str
    exit_code: int
    stdout: str
    stderr: str
    duration_sec: float
    timed_out: bool = False
    truncated: bool = False
    where: str = "sandbox"  # or "host"
    oom_killed: bool = False
    disk_full: bool = False

    @classmethod
    def of(cls, command: str, result: ExecResult | workspace.HostResult) -> CommandRun:
        if isinstance(result, workspace.HostResult):
            return cls(
                result.command,
                result.exit_code,
                result.stdout,
                result.stderr,
                result.duration_sec,
                result.timed_out,
                where="host",
            )
        return cls(
            command,
            result.exit_code,
            result.stdout,
            result.stderr,
            result.duration_sec,
            result.timed_out,
            result.truncated,
            oom_killed=result.oom_killed,
            disk_full=result.disk_full,
        )


@dataclass
class StageResult:
    """One stage's record. ``name`` is the AttemptStage name and the log file's stem."""

    name: str
    stage: Stage
    runs: list[CommandRun] = field(default_factory=list)
    reason: Reason | None = None
    note: str = ""  # why the reason, when the exit code alone does not say
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    # False for stages kept for the record only (the baseline re-run that detects flakiness).
    counts: bool = True
    # Free text for the log of a stage that runs no command of its own (the agent).
    detail: str = ""
    # Time spent outside the recorded commands (the agent's whole run).
    extra_duration_sec: float = 0.0
    # The harness's own traceback when an exception ended the stage (goes into error_text).
    traceback: str = ""

    @property
    def command(self) -> str:
        return "\n".join(r.command for r in self.runs)

    @property
    def exit_code(self) -> int | None:
        return self.runs[-1].exit_code if self.runs else None

    @property
    def duration_sec(self) -> float:
        return sum(r.duration_sec for r in self.runs) + self.extra_duration_sec

    @property
    def timed_out(self) -> bool:
        return any(r.timed_out for r in self.runs)

    @property
    def truncated(self) -> bool:
        return any(r.truncated for r in self.runs)

    @property
    def output(self) -> str:
        return "".join(r.stdout + r.stderr for r in self.runs)

    @property
    def stderr(self) -> str:
        return "".join(r.stderr for r in self.runs)


OOM_TAG = "[oom]"
DISK_QUOTA_TAG = "[disk-quota]"


def command_reason(stage: Stage, run: CommandRun | None) -> tuple[Reason | None, str]:
    """(reason, note) for a stage whose last command was ``run``. The sandbox's own limits
    come first: an OOM kill is SANDBOX_ERROR ``[oom]``, a failed command with the disk quota
    full SANDBOX_ERROR ``[disk-quota]``. Then the exit
    code, read as a timeout only when the harness timed the command out (a SIGKILL from the
    command itself is 137 too)."""
    if run is None:
        return from_stage(stage, 0), ""
    if run.oom_killed:
        return Reason.SANDBOX_ERROR, (
            f"{OOM_TAG} the kernel's OOM killer ended the command (the sandbox's memory limit, "
            f"SANDBOX_MEMORY_MB): {run.command}"
        )
    if run.disk_full and run.exit_code != 0:
        return Reason.SANDBOX_ERROR, (
            f"{DISK_QUOTA_TAG} the command filled the sandbox's disk quota (workspace, /tmp "
            f"and home: SANDBOX_DISK_MB bytes, SANDBOX_MAX_FILES files): {run.command}"
        )
    reason = from_stage(stage, run.exit_code, timed_out=run.timed_out)
    if run.exit_code == KILLED_EXIT_CODE and not run.timed_out and reason is not None:
        return (
            reason,
            f"killed by SIGKILL (exit 137; not a timeout, not the OOM killer): {run.command}",
        )
    return reason, ""


@contextlib.contextmanager
def ticking(heartbeat: Heartbeat | None, interval: float) -> Iterator[None]:
    """Call ``heartbeat`` every ``interval`` seconds from a helper thread while a long command
    runs, so a worker's attempt is not reaped as stale in the middle of a slow stage."""
    if heartbeat is None or interval <= 0:
        yield
        return
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(interval):
            with contextlib.suppress(Exception):  # a missed beat must never fail the attempt
                heartbeat()

    thread = threading.Thread(target=beat, name="attempt-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)


# --- host stages -----------------------------------------------------------------------


def clone_stage(plan: TaskPlan, repo_dir: Path, *, timeout: float) -> StageResult:
    result = StageResult("git_clone", Stage.GIT_CLONE)
    run = workspace.clone(plan.repo_url, repo_dir, timeout=timeout)
    result.runs.append(CommandRun.of(run.command, run))
    result.reason = from_stage(Stage.GIT_CLONE, run.exit_code)
    return result


def checkout_stage(plan: TaskPlan, repo_dir: Path, *, timeout: float) -> StageResult:
    result = StageResult("git_checkout", Stage.GIT_CHECKOUT)
    run = workspace.checkout(repo_dir, plan.commit, timeout=timeout)
    result.runs.append(CommandRun.of(run.command, run))
    result.reason = from_stage(Stage.GIT_CHECKOUT, run.exit_code)
    return result


# --- setup -----------------------------------------------------------------------------

_SEPARATORS = re.compile(r"(&&|\|\||;|\||\n)")
_PIP_INSTALL = re.compile(
    r"(?P<pip>(?:\b(?:python3?(?:\.\d+)?|[\w./-]*/python3?(?:\.\d+)?)\s+-m\s+)?"
    r"(?<![\w.-])pip3?(?:\.\d+)?\s+install)\b"
)
_TARGETED = re.compile(r"(?:^|\s)(?:--target|-t|--prefix|--root|--user)(?:[=\s]|$)")


def normalize_setup_command(command: str, site_packages: str) -> str:
    """Make ``pip install`` persist in the workspace: add ``--target <site-packages>`` to every
    pip install that does not already choose where to install."""
    parts = _SEPARATORS.split(command)
    for i in range(0, len(parts), 2):
        part = parts[i]
        match = _PIP_INSTALL.search(part)
        if match is None or _TARGETED.search(part[match.end() :]):
            continue
        insert = f" --target {shlex.quote(site_packages)}"
        parts[i] = part[: match.end()] + insert + part[match.end() :]
    return "".join(parts)


def uses_pip_install(commands: tuple[str, ...] | list[str]) -> bool:
    return any(_PIP_INSTALL.search(c) for c in commands)


def setup_stage(
    sandbox: Sandbox,
    plan: TaskPlan,
    *,
    heartbeat: Heartbeat | None = None,
    heartbeat_sec: float = 10,
) -> StageResult:
    """Run the setup commands in order (network only when the task allows it) within the
    task's setup timeout; stop at the first failure."""
    result = StageResult("setup", Stage.SETUP)
    deadline = time.monotonic() + plan.setup_timeout_sec
    commands = [normalize_setup_command(c, plan.site_packages) for c in plan.setup_commands]
    if uses_pip_install(commands):
        commands.append(_user_site_link(plan))
    env = plan.sandbox_env()
    for command in commands:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            spent = "[timeout] the setup budget was spent before this command\n"
            result.runs.append(CommandRun(command, TIMEOUT_EXIT_CODE, "", spent, 0.0, True))
            break
        with ticking(heartbeat, heartbeat_sec):
            run = sandbox.exec(
                command,
                timeout=remaining,
                cwd=plan.workdir,
                env=env,
                network=plan.setup_network,
            )
        result.runs.append(CommandRun.of(command, run))
        if not run.ok:
            break
    code = result.exit_code if result.runs else 0
    result.reason, result.note = command_reason(
        Stage.SETUP, result.runs[-1] if result.runs else None
    )
    if result.reason is Reason.SETUP_TIMEOUT:
        result.note = f"[timeout] setup exceeded {plan.setup_timeout_sec}s"
    elif result.reason is not None and not result.note:
        result.note = f"setup command exited {code}: {result.runs[-1].command}"
    return result


def _user_site_link(plan: TaskPlan) -> str:
    # A .pth file in the user site (PYTHONUSERBASE is in the workspace) keeps the installed
    # packages importable even when a test command sets its own PYTHONPATH=...
    code = (
        "import os, site; d = site.getusersitepackages(); os.makedirs(d, exist_ok=True); "
        f"open(os.path.join(d, 'agentbench-workspace.pth'), 'w').write({plan.site_packages!r})"
    )
    return f"python3 -c {shlex.quote(code)}"


def clean_tree_check(result: StageResult, repo_dir: Path, commit: str, excludes: list[str]) -> None:
    """Setup must leave the repository as checked out (harness folders and caches aside)."""
    status = workspace.changed_paths(repo_dir, commit, excludes=excludes)
    result.runs.append(CommandRun.of(status.command, status))
    if not status.ok:
        result.reason = Reason.SETUP_FAILED
        result.note = f"could not compare the working tree after setup: {status.stderr.strip()}"
    elif status.stdout.strip():
        changed = status.stdout.strip().splitlines()
        result.reason = Reason.SETUP_FAILED
        result.note = (
            f"setup changed the working tree ({len(changed)} path(s): "
            + ", ".join(changed[:5])
            + "); set validation.enforce_clean_setup: false if that is intended"
        )


# --- tests -----------------------------------------------------------------------------


def tests_stage(
    sandbox: Sandbox,
    plan: TaskPlan,
    *,
    name: str,
    stage: Stage,
    heartbeat: Heartbeat | None = None,
    heartbeat_sec: float = 10,
    command: str | None = None,
    network: ExecNetwork = False,
) -> StageResult:
    """Run the task's test command (or ``command``) with no network (or ``network``: the
    SWE-bench final tests get a black hole), mapped with the stage's rule."""
    command = command or plan.test_command
    result = StageResult(name, stage)
    with ticking(heartbeat, heartbeat_sec):
        run = sandbox.exec(
            command,
            timeout=plan.timeout_sec,
            cwd=plan.workdir,
            env=plan.sandbox_env(),
            network=network,
        )
    result.runs.append(CommandRun.of(command, run))
    result.reason, result.note = command_reason(stage, result.runs[-1])
    if run.timed_out or result.reason is Reason.TIMEOUT:
        result.note = f"[timeout] {name} exceeded {plan.timeout_sec}s"
    return result


def judge_baseline(result: StageResult, plan: TaskPlan) -> None:
    """Apply the task's validation expectations to a baseline run that failed as it should."""
    if result.reason is not None:
        if result.reason is Reason.BASELINE_NOT_FAILING:
            result.note = "the tests pass before any fix (exit 0): the task is invalid"
        elif not result.note:
            result.note = f"baseline exited {result.exit_code}"
        return
    spec = plan.validation
    code = result.exit_code
    output = result.output
    if spec.expected_exit_codes is not None and code not in spec.expected_exit_codes:
        result.reason = Reason.BASELINE_NOT_FAILING
        result.note = f"baseline exited {code}, expected one of {spec.expected_exit_codes}"
        return
    missing = [t for t in spec.expected_failing_tests if not _reported_failing(output, t)]
    if missing:
        result.reason = Reason.BASELINE_NOT_FAILING
        result.note = "expected failing test(s) did not fail: " + ", ".join(missing)
        return
    if spec.output_regex and not re.search(spec.output_regex, output, re.MULTILINE):
        result.reason = Reason.BASELINE_NOT_FAILING
        result.note = f"baseline output does not match output_regex {spec.output_regex!r}"


def _reported_failing(output: str, test_id: str) -> bool:
    # pytest's short summary ("FAILED tests/x.py::test_y - ...") or verbose lines
    # ("tests/x.py::test_y FAILED").
    tid = re.escape(test_id)
    return bool(
        re.search(rf"^(?:FAILED|ERROR) {tid}(?:\s|$)", output, re.MULTILINE)
        or re.search(rf"^{tid} (?:FAILED|ERROR)\b", output, re.MULTILINE)
    )


def baselines_disagree(first: StageResult, second: StageResult) -> bool:
    return (first.reason, first.exit_code) != (second.reason, second.exit_code)
