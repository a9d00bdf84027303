"""One attempt at a Harbor task folder: build, export the workdir, agent, verifier, reward.

The stages, as Harbor's harness runs them, in a sandbox of ours:

1. ``environment_build``: the task's ``environment/`` (or a one-line ``FROM docker_image``)
   built by the engine, keyed by its content (``sandbox.environments.dockerfile``), with one
   layer of ours on top: ``/logs``, ``/tests`` and ``/solution`` become links into
   ``/tmp/.harbor``, since the sandbox's root filesystem is read-only and /tmp is writable.
   Failing is infrastructure: ``SETUP_TIMEOUT`` past ``build_timeout_sec``, else
   ``SETUP_FAILED`` with the named reason and the log's tail.
2. ``export_workdir``: the image's ``WORKDIR`` (``/app`` when it sets none) copied out into the
   attempt's workspace, which the sandbox mounts there: the agent's writable folder.
3. the agent, given ``instruction.md``, within ``agent.timeout_sec``; the oracle runs
   ``solution/solve.sh`` (copied to ``/solution`` for it alone) with ``solution.env``.
4. ``final_test``: ``tests/`` copied to ``/tests`` only now, ``bash /tests/test.sh`` run from the
   workdir with ``verifier.env`` within ``verifier.timeout_sec``, then the reward it wrote
   (``harbor_verdict``). ``/logs/agent`` and ``/logs/verifier`` are kept as the attempt's
   ``logs/agent/`` and ``logs/verifier/``.

The sandbox gets the task's ``cpus`` (at most the host's) and ``memory_mb``, its
``storage_mb`` as the disk quota when quotas are on (``SANDBOX_DISK_MB``), and the internet
(never the host nor private ranges: the host fence) only when ``allow_internet`` is true.
A folder changed since its import is refused (its content hash), not run as something else.
"""

from __future__ import annotations

import dataclasses
import io
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from django.conf import settings

from runs.agents.contract import TaskView
from runs.models import AgentVariant
from runs.pipeline import artifacts, environment_build, harbor_verdict, images
from runs.pipeline.agent_stage import cli_resources_for, run_agent_stage
from runs.pipeline.stages import CommandRun, StageResult, ticking
from runs.pipeline.swebench import Grading  # what Execution keeps of a grade
from runs.taxonomy import Reason, Stage
from sandbox.base import SandboxConfig
from sandbox.environments import dockerfile, harbor_image
from sandbox.environments.harbor_image import HARNESS_DIR
from sandbox.filesystem import chown_tree_for_agent
from tasks_app import harbor as harbor_format

if TYPE_CHECKING:
    from runs.pipeline.execute import Execution

DEFAULT_WORKDIR = "/app"
LOGS_KEPT_MAX_BYTES = 50 * 1024 * 1024
# What an agent that runs test commands itself sees: the tests exist only after it.
HIDDEN_TEST_COMMAND = 'echo "the verifier runs after the agent: tests/ is not here yet" >&2; exit 1'


def run(ex: Execution, plan) -> None:
    """The Harbor stages of one attempt (``ex`` records them as any other)."""
    assert ex.folder is not None
    spec = plan.harbor
    folder = Path(spec["folder"])
    ex.checkpoint("environment_build", Stage.SETUP)
    changed = _changed(folder, spec) or "; ".join(
        f"[resource-cap] the task's {name}: {why}" for name, why in harbor_format.over_caps(spec)
    )
    if changed:
        ex.record_stage(
            StageResult("environment_build", Stage.SETUP, reason=Reason.SETUP_FAILED, note=changed)
        )
        return
    stage, image, log_path = build_stage(spec)
    environment_build.keep_log(ex.folder, image, log_path)  # beside the stage's summary
    ex.record_stage(stage)
    if image is None:
        return
    workdir = image_workdir(image.tag)
    plan = dataclasses.replace(plan, image=image.tag, workdir=workdir, workspace_path=workdir)
    ex.sandbox_info["environment"] = {
        "dockerfile_key": image.key,
        "image": image.tag,
        "reused": image.reused,
        "build_seconds": image.build_seconds,
    }
    # Leased for the attempt; on bubblewrap with the image's root-filesystem tree.
    with images.built_image(plan, key=image.key, backend=ex.backend) as ready:
        _in_image(ex, ready, spec, folder)


def _in_image(ex: Execution, plan, spec: dict, folder: Path) -> None:
    assert ex.folder is not None
    ws = ex.folder / artifacts.WORKSPACE_DIR
    if ws.exists():
        shutil.rmtree(ws)
    ex.checkpoint("export_workdir", Stage.GIT_CLONE)
    if ex.record_stage(export_stage(plan, ws)).reason is not None:
        return
    # The snapshot the patch is taken against: outside the attempt's folder (it goes with it).
    with tempfile.TemporaryDirectory(prefix="ab-harbor-base-") as git_dir:
        base = _Snapshot(Path(git_dir), ws)
        base.take()
        _sandboxed(ex, plan, spec, folder, ws, base)


def _sandboxed(ex: Execution, plan, spec: dict, folder: Path, ws: Path, base: _Snapshot) -> None:
    assert ex.folder is not None
    ex.checkpoint("setup", Stage.SETUP)
    cli = cli_resources_for(
        ex.attempt.model_config,
        artifacts_dir=ex.folder,
        task_max_steps=ex.attempt.task.max_steps,
        owner=str(ex.attempt.public_id),
    )
    with cli as cli_res:
        config = sandbox_config(ex.sandbox_config(plan, ws), spec)
        if cli_res is not None:
            config = dataclasses.replace(config, **cli_res.sandbox_fields())
        from sandbox import open_sandbox

        rootfs = Path(plan.image_tree) if plan.image_tree else None
        with open_sandbox(config, backend=ex.backend, bwrap_rootfs=rootfs) as sandbox:
            ex.sandbox_info |= {
                "backend": sandbox.backend,
                "cpus": config.cpus,
                "memory_mb": config.memory_mb,
                "disk_quota": sandbox.disk_quota,
                "network": "internet" if config.allow_network else "none",
            }
            if sandbox.backend == "bwrap" and sandbox.disk_quota.startswith("none"):
                # Without a quota's filesystem each bubblewrap command gets a fresh /tmp: what
                # the agent left in /logs/agent, and /tests, would be gone by the next one.
                ex.record_stage(
                    StageResult(
                        "setup",
                        Stage.SETUP,
                        reason=Reason.SANDBOX_ERROR,
                        note="[no-disk-quota] a Harbor task on bubblewrap needs "
                        "the sandbox's disk quota (SANDBOX_DISK_MB) for a /tmp "
                        f"that lasts: {sandbox.disk_quota}",
                    )
                )
                return
            ex.sandbox_info |= {
                "backend": sandbox.backend,
                "image": config.image,
                "name": config.name,
                "workspace_path": config.workspace_path,
                "workdir": plan.workdir,
                "disk_quota": sandbox.disk_quota,
                "cpus": config.cpus,
                "memory_mb": config.memory_mb,
                "allow_internet": config.allow_network,
            }
            prepare = _prepare(sandbox, plan)
            if prepare is not None:
                ex.record_stage(prepare)
                return
            variant = ex.attempt.model_config.agent_variant
            oracle = variant == AgentVariant.ORACLE
            if oracle and spec.get("has_solution"):
                _copy_in(sandbox, plan, folder / "solution", f"{HARNESS_DIR}/solution")
            agent_stage = None
            if variant != AgentVariant.BASELINE:
                ex.checkpoint("agent_run", Stage.AGENT_RUN)
                with ticking(ex.heartbeat, settings.ATTEMPT_HEARTBEAT_SEC):
                    agent_stage, ex.agent_outcome = run_agent_stage(
                        sandbox=sandbox,
                        plan=plan,
                        config=ex.attempt.model_config,
                        task_max_steps=ex.attempt.task.max_steps,
                        artifacts_dir=ex.folder,
                        prediction_patch=ex.prediction(),
                        cli=cli_res,
                        task_view=task_view(plan, spec, oracle=oracle),
                        max_time_sec=float(spec.get("agent_timeout_sec") or 0) or None,
                    )
                if agent_stage is not None:
                    ex.record_stage(agent_stage)
            ex.final_patch = base.diff()
            artifacts.write_text(ex.folder, artifacts.FINAL_PATCH, ex.final_patch)
            ex.checkpoint("final_test", Stage.FINAL_TEST)
            final, ex.grading = verifier_stage(sandbox, plan, spec, folder)
            _keep_logs(sandbox, plan, ex.folder)
            if final.reason is None and agent_stage is not None:
                agent_stage.counts = False  # the verifier decides, not the agent's last words
            ex.record_stage(final)


# --- the environment ------------------------------------------------------------------------


def build_stage(
    spec: dict,
) -> tuple[StageResult, dockerfile.DockerfileImage | None, Path | None]:
    """Build (or find) the task's image, with the harness's layer (``harbor_image``)."""
    from sandbox.environments import eviction

    docker_image = spec.get("docker_image") or ""
    context = harbor_image.context_path(spec["folder"], docker_image)
    timeout = float(spec.get("build_timeout_sec") or harbor_format.DEFAULT_TIMEOUT_SEC)
    return environment_build.build_stage(
        context,
        timeout_sec=timeout,
        build=lambda: harbor_image.build(
            spec["folder"],
            docker_image=docker_image,
            timeout_sec=timeout,
            max_bytes=eviction.max_bytes_from_env(),
        ),
    )


def image_workdir(tag: str) -> str:
    done = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{ .Config.WorkingDir }}", tag],
        capture_output=True,
        text=True,
    )
    workdir = done.stdout.strip().rstrip("/")
    return workdir if workdir.startswith("/") else DEFAULT_WORKDIR


def export_stage(plan, ws: Path) -> StageResult:
    """The image's workdir copied into the workspace (empty when the image has none)."""
    from sandbox.docker_images import export_image_dir
    from sandbox.errors import SandboxError

    stage = StageResult("export_workdir", Stage.GIT_CLONE)
    started = time.monotonic()
    ws.mkdir(parents=True, exist_ok=True)
    # The sandbox's quota (the task's storage_mb when quotas are on): a workdir over it could
    # never fit.
    quota = int(plan.harbor.get("storage_mb") or 0) * 1024 * 1024 if settings.SANDBOX_DISK_MB else 0
    command = f"export {plan.image}:{plan.workdir} -> workspace"
    try:
        export_image_dir(plan.image, plan.workdir, ws, max_bytes=quota or None)
    except SandboxError as exc:
        if "[disk-quota]" in str(exc):
            raise
        # A workdir the image does not hold: the agent starts in an empty one.
        stage.note = f"the image has no {plan.workdir}: the workspace starts empty ({exc})"
    chown_tree_for_agent(ws)
    stage.runs.append(CommandRun(command, 0, "", "", time.monotonic() - started, where="host"))
    return stage


def sandbox_config(config: SandboxConfig, spec: dict) -> SandboxConfig:
    """The attempt's sandbox with the task's resources and network."""
    cpus = min(float(spec.get("cpus") or 1), float(os.cpu_count() or 1))
    disk = int(spec.get("storage_mb") or 0) if config.disk_mb else config.disk_mb
    return dataclasses.replace(
        config,
        cpus=cpus,
        memory_mb=int(spec.get("memory_mb") or config.memory_mb),
        disk_mb=disk or config.disk_mb,
        allow_network=bool(spec.get("allow_internet")),
    )


def task_view(plan, spec: dict, *, oracle: bool) -> TaskView:
    has_solution = bool(spec.get("has_solution"))
    return TaskView(
        task_id=plan.task_id,
        workdir=plan.workdir,
        test_command=HIDDEN_TEST_COMMAND,
        timeout_sec=int(float(spec.get("agent_timeout_sec") or plan.timeout_sec)),
        problem_statement=plan.problem_statement,
        hidden_tests=True,
        oracle_command=(
            f"bash {harbor_format.SOLUTION_DIR}/solve.sh" if oracle and has_solution else ""
        ),
        oracle_env=dict(spec.get("solution_env") or {}),
        allow_network=bool(spec.get("allow_internet")),
    )


def _changed(folder: Path, spec: dict) -> str:
    try:
        now = harbor_format.content_hash(folder)
    except OSError as exc:
        return f"[task-changed] the task folder {folder} cannot be read: {exc}; re-import it"
    if now != spec.get("content_hash"):
        return (
            f"[task-changed] the task folder {folder} changed since its import; re-import it "
            "(ab import-tasks) so the attempt runs what the task page shows"
        )
    return ""


# --- inside the sandbox ---------------------------------------------------------------------


def _prepare(sandbox, plan) -> StageResult | None:
    dirs = " ".join(
        f"{HARNESS_DIR}/{d}" for d in ("logs/agent", "logs/verifier", "tests", "solution")
    )
    result = sandbox.exec(f"mkdir -p {dirs}", timeout=60, cwd=plan.workdir)
    if result.ok:
        return None
    stage = StageResult(
        "setup",
        Stage.SETUP,
        reason=Reason.SETUP_FAILED,
        note=f"cannot make the harness's folders under {HARNESS_DIR}",
    )
    stage.runs.append(CommandRun.of("mkdir -p " + dirs, result))
    return stage


def _copy_in(sandbox, plan, host_dir: Path, target: str) -> None:
    """``host_dir``'s files into ``target`` (outside the workspace): a tarball dropped in the
    workspace under a random name, unpacked there by a command and removed."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(host_dir, arcname=".")
    name = f".harbor-in-{uuid.uuid4().hex}.tgz"
    sandbox.write_file(f"{plan.workspace_path}/{name}", buffer.getvalue())
    inside = f"{plan.workspace_path}/{name}"
    result = sandbox.exec(
        f"rm -rf {target} && mkdir -p {target} && tar -xzf {inside} -C {target} "
        f"--no-same-owner; code=$?; rm -f {inside}; exit $code",
        timeout=120,
        cwd=plan.workdir,
    )
    if not result.ok:
        raise RuntimeError(f"cannot copy {host_dir} to {target}: {result.stderr.strip()[:500]}")


def _cat(sandbox, plan, path: str) -> str | None:
    result = sandbox.exec(
        ["sh", "-c", 'test -f "$1" && cat "$1"', "sh", path], timeout=60, cwd=plan.workdir
    )
    return result.stdout if result.ok else None


def verifier_stage(sandbox, plan, spec: dict, folder: Path) -> tuple[StageResult, Grading | None]:
    stage = StageResult("final_test", Stage.FINAL_TEST)
    timeout = float(spec.get("verifier_timeout_sec") or harbor_format.DEFAULT_TIMEOUT_SEC)
    # What the agent may have left in /logs/verifier or /tests is not the verifier's.
    sandbox.exec(
        f"rm -rf {HARNESS_DIR}/logs/verifier && mkdir -p {HARNESS_DIR}/logs/verifier",
        timeout=60,
        cwd=plan.workdir,
    )
    _copy_in(sandbox, plan, folder / "tests", f"{HARNESS_DIR}/tests")
    command = f"bash {harbor_format.TESTS_DIR}/test.sh"
    result = sandbox.exec(
        command,
        timeout=timeout,
        cwd=plan.workdir,
        env=dict(spec.get("verifier_env") or {}),
        network=bool(spec.get("allow_internet")),
    )
    stage.runs.append(CommandRun.of(command, result))
    logs = f"{harbor_format.LOGS_DIR}/verifier"
    reward = harbor_verdict.read_reward(
        _cat(sandbox, plan, f"{logs}/{harbor_verdict.REWARD_TXT}"),
        _cat(sandbox, plan, f"{logs}/{harbor_verdict.REWARD_JSON}"),
    )
    tests = harbor_verdict.read_ctrf(_cat(sandbox, plan, f"{logs}/{harbor_verdict.CTRF_JSON}"))
    stage.reason, stage.note = harbor_verdict.verifier_reason(
        reward, exit_code=result.exit_code, timed_out=result.timed_out, timeout_sec=timeout
    )
    if reward.value is None:
        return stage, None
    results = harbor_verdict.test_results(reward, tests)
    return stage, Grading(reward.grade, reward.grade == "FULL", results)


def _keep_logs(sandbox, plan, attempt_folder: Path) -> None:
    """/logs/agent and /logs/verifier as the attempt's logs/agent/ and logs/verifier/."""
    name = f".harbor-logs-{uuid.uuid4().hex}.tgz"
    inside = f"{plan.workspace_path}/{name}"
    packed = sandbox.exec(
        f"tar -czf {inside} -C {HARNESS_DIR}/logs agent verifier", timeout=120, cwd=plan.workdir
    )
    try:
        if not packed.ok:
            return
        data = sandbox.read_file(inside)
    finally:
        sandbox.exec(f"rm -f {inside}", timeout=60, cwd=plan.workdir)
    if len(data) > LOGS_KEPT_MAX_BYTES:
        artifacts.write_text(
            attempt_folder,
            "logs/harbor-logs-not-kept.txt",
            f"/logs was {len(data)} bytes packed, over {LOGS_KEPT_MAX_BYTES}",
        )
        return
    target = attempt_folder / "logs"
    target.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        tar.extractall(target, filter="data")  # no links out, no devices, no absolute paths


class _Snapshot:
    """The workspace as the image gave it, in a git folder of the harness (outside the
    workspace: the agent never sees it), so the attempt's patch is what the agent changed."""

    def __init__(self, git_dir: Path, work_tree: Path):
        self.git_dir = git_dir
        self.work_tree = work_tree
        self.ok = False

    def _git(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [
                "git",
                "-c",
                "core.hooksPath=/dev/null",
                "-c",
                "core.fsmonitor=false",
                "-c",
                f"safe.directory={self.work_tree}",
                f"--git-dir={self.git_dir}",
                f"--work-tree={self.work_tree}",
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=300,
            env={
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "HOME": str(self.git_dir),
                "GIT_CONFIG_NOSYSTEM": "1",
                "GIT_AUTHOR_NAME": "agentbench",
                "GIT_AUTHOR_EMAIL": "agentbench@localhost",
                "GIT_COMMITTER_NAME": "agentbench",
                "GIT_COMMITTER_EMAIL": "agentbench@localhost",
            },
        )

    def take(self) -> None:
        if self._git("init", "-q").returncode != 0:
            return
        self._git("add", "-A", ".")
        self.ok = self._git("commit", "-q", "--allow-empty", "-m", "image").returncode == 0

    def diff(self) -> str:
        if not self.ok:
            return ""
        self._git("add", "-A", ".")
        done = self._git(
            "diff", "--cached", "--binary", "--no-color", "--no-ext-diff", "--no-textconv", "HEAD"
        )
        return done.stdout if done.returncode == 0 else ""
