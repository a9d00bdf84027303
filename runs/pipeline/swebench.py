"""SWE-bench instances: the repository comes out of the instance's root filesystem or image
(built here by ``ab swebench build``, or a published one), the final tests are the official
eval script (``tasks_app.swebench.eval_script``: reset the test files, apply the test patch,
run the tests between the markers, reset), and its output is graded by
``tasks_app.swebench.grading``."""

from __future__ import annotations

import contextlib
import posixpath
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from runs.pipeline import stages
from runs.pipeline.plan import TaskPlan
from runs.pipeline.stages import CommandRun, Heartbeat, StageResult
from runs.taxonomy import Reason, Stage
from sandbox.base import BLACKHOLE, Sandbox
from sandbox.errors import SandboxError
from sandbox.filesystem import chown_tree_for_agent


@dataclass
class Grading:
    grade: str
    resolved: bool
    test_results: dict = field(default_factory=dict)


@contextlib.contextmanager
def local_build(plan: TaskPlan, *, backend: str) -> Iterator[TaskPlan]:
    """The plan with the instance's image and root filesystem built on this machine, its
    instance level held under a use lease for the block (the cache's eviction and pruning leave
    it alone meanwhile: ``sandbox.environments.cache``).

    Raises SandboxUnavailable when the instance was not built here and names no published
    image either, or when Docker is asked for and only the bubblewrap tree was built.
    """
    from sandbox.environments.handles import OFFLINE, Source, environment_of
    from sandbox.environments.official_images import official_record
    from sandbox.errors import SandboxUnavailable

    official = official_record(plan.task_id)
    if official is not None:  # ab swebench build --source image chose the official image
        from runs.pipeline.images import official_plan

        with official_plan(plan, official, backend=backend) as ready:
            yield ready
        return
    with environment_of(Source(OFFLINE, plan.task_id), tree=False) as built:
        if built is None or built.commit != plan.commit:
            if backend != "bwrap" and image_present(plan.image):
                yield plan  # a published instance image the operator pulled or loaded
                return
            raise SandboxUnavailable(
                f"SWE-bench instance {plan.task_id} is not built on this machine: "
                "run `ab swebench build SUITE --instance " + plan.task_id + "`"
            )
        if backend == "docker" and not built.image:
            raise SandboxUnavailable(
                f"SWE-bench instance {plan.task_id} has no Docker image here (built for "
                "bubblewrap only): run `ab swebench build SUITE --backend docker`"
            )
        yield replace(plan, image=built.image or plan.image, rootfs=built.tree)


def image_present(image: str) -> bool:
    from sandbox.environments.docker_images import image_key

    return image_key(image) is not None


def export_stage(plan: TaskPlan, ws: Path, *, max_bytes: int | None = None) -> StageResult:
    """The "clone" of an instance: copy /testbed out of its root filesystem (an instance
    built here: into the started sandbox's workspace, see execute._pipeline) or out of its
    image (into the host workspace, before the sandbox starts).

    A missing image or engine raises SandboxError (SANDBOX_ERROR), and so does a testbed over
    ``max_bytes`` (the sandbox's disk quota: it could not fit); a copy without a git
    repository is GIT_CLONE_FAILED.
    """
    result = StageResult("export_testbed", Stage.GIT_CLONE)
    started = time.monotonic()
    ws.mkdir(parents=True, exist_ok=True)
    if plan.rootfs:
        source = Path(plan.rootfs) / plan.workspace_path.lstrip("/")
        size = _tree_bytes(source)
        if max_bytes is not None and size > max_bytes:
            raise SandboxError(
                f"[disk-quota] {source} holds {size} bytes, over the sandbox's disk quota "
                f"({max_bytes} bytes, SANDBOX_DISK_MB)"
            )
        copy = subprocess.run(["cp", "-a", f"{source}/.", str(ws)], capture_output=True, text=True)
        if copy.returncode != 0:
            full = "No space left on device" in copy.stderr
            raise SandboxError(
                f"{'[disk-quota] ' if full else ''}cannot copy {source}: {copy.stderr.strip()}"
            )
        # The pipeline copies into a started sandbox's workspace (execute._pipeline): hand the
        # copy to the sandbox user, as the sandbox does with what it finds there at start.
        chown_tree_for_agent(ws)
        command = f"copy {source} -> workspace"
    else:
        from sandbox.docker_images import export_image_dir

        export_image_dir(plan.image, plan.workspace_path, ws, max_bytes=max_bytes)
        command = f"export {plan.image}:{plan.workspace_path} -> workspace"
    ok = (ws / ".git").exists()
    result.runs.append(
        CommandRun(
            command,
            0 if ok else 1,
            "",
            "" if ok else f"no git repository at {plan.workspace_path} in {plan.image}\n",
            time.monotonic() - started,
            where="host",
        )
    )
    if not ok:
        result.reason = Reason.GIT_CLONE_FAILED
        result.note = f"{plan.workspace_path} in {plan.image} is not a git repository"
    return result


# Where the eval script and its log go: inside the repository's .git folder, which is in the
# workspace (write_file reaches only the workspace) but in no diff or status. The script is a
# file, not an argument: a test patch can pass the 128 KiB limit of one argument.
SCRIPT_PATH = ".git/agentbench-eval.sh"
LOG_PATH = ".git/agentbench-eval.log"
# The environment of the script, two settings no official step depends on:
# - the instance images built offline hold shallow clones: there the base commit is a root,
#   and the script's "git show" (a record only) would print the whole tree as added (hundreds
#   of MB for some repositories) instead of the commit's own change. Its header is shown;
# - the final tests have no network: the spec's reinstall gives up on an unreachable index at
#   once instead of after pip's five retries (a local index or wheel folder still works).
EVAL_ENV = "GIT_CONFIG_PARAMETERS=\"'log.showRoot=false'\" PIP_RETRIES=0"
# Reading the log back is quick; this bounds it all the same.
SHOW_TIMEOUT_SEC = 120


def eval_script_for(plan: TaskPlan) -> str:
    """The instance's eval script (the task's own test command for a (repo, version) the
    official specification does not list; the instance's own script when it brought one)."""
    if plan.eval_script:
        return plan.eval_script
    from tasks_app.swebench.eval_script import eval_script

    return eval_script(
        repo=plan.swebench_repo,
        version=plan.swebench_version,
        base_commit=plan.commit,
        test_patch=plan.test_patch,
        test_command=plan.test_command,
        instance_id=plan.task_id,
    )


def final_test_stage(
    sandbox: Sandbox,
    plan: TaskPlan,
    script: str,
    *,
    heartbeat: Heartbeat | None = None,
    heartbeat_sec: float = 10,
) -> StageResult:
    """Run the eval script in the sandbox, stdout and stderr merged into one log as in the
    harness, and read the log back (``show_log_command``: within the output cap, the test
    section kept whole)."""
    script_path = posixpath.join(plan.workspace_path, SCRIPT_PATH)
    log_path = posixpath.join(plan.workspace_path, LOG_PATH)
    sandbox.write_file(script_path, script)
    result = stages.tests_stage(
        sandbox,
        plan,
        name="final_test",
        stage=Stage.FINAL_TEST,
        heartbeat=heartbeat,
        heartbeat_sec=heartbeat_sec,
        command=f"{EVAL_ENV} bash {script_path} > {log_path} 2>&1",
        # The official eval containers have a network: a test expecting a connect to time
        # out must see it time out, not fail at once on "Network is unreachable".
        network=BLACKHOLE,
    )
    shown = sandbox.exec(
        show_log_command(log_path, sandbox.config.output_cap_bytes),
        timeout=SHOW_TIMEOUT_SEC,
        cwd=plan.workdir,
        env=plan.sandbox_env(),
        network=False,
    )
    run = result.runs[0]
    result.runs[0] = replace(
        run,
        stdout=shown.stdout + run.stdout,
        stderr=run.stderr + shown.stderr,
        truncated=run.truncated or shown.truncated or CUT_NOTICE in shown.stdout,
    )
    return result


CUT_NOTICE = "[agentbench: output cut here"


def show_log_command(log_path: str, cap: int) -> str:
    """A POSIX shell command printing the eval log within ``cap`` bytes: all of it when it
    fits; else its first tenth of the cap, a line saying what was cut, and everything from the
    line holding the start marker on (without a marker: the last bytes that fit), so the
    test section reaches the grading whole unless it alone passes the cap."""
    from tasks_app.swebench.eval_script import START_MARKER

    head = cap // 10
    return (
        f'f={log_path}; if [ ! -f "$f" ]; then echo "no eval log at $f" >&2; exit 1; fi; '
        f'size=$(wc -c < "$f"); '
        f'if [ "$size" -le {cap} ]; then cat "$f"; exit 0; fi; '
        f"start=$(grep -a -b -m1 -F '{START_MARKER}' \"$f\" | cut -d: -f1); "
        f"start=${{start:-$((size - {cap - head - 200}))}}; "
        f'if [ "$start" -le {head} ]; then cat "$f"; exit 0; fi; '
        f'head -c {head} "$f"; '
        f'printf "\\n{CUT_NOTICE}: bytes {head} to %s of %s (the output cap)]\\n" '
        f'"$start" "$size"; '
        f'tail -c +$((start + 1)) "$f"'
    )


def grade(final: StageResult, plan: TaskPlan, *, agent_patch: str) -> Grading:
    """Grade the eval script's output (FAIL_TO_PASS / PASS_TO_PASS); set the stage's reason."""
    from tasks_app.swebench.eval_script import patch_apply_failed
    from tasks_app.swebench.grading import grade_attempt_output
    from tasks_app.swebench.parsers import marked_section

    output = final.output
    result = grade_attempt_output(
        output,
        fail_to_pass=list(plan.fail_to_pass),
        pass_to_pass=list(plan.pass_to_pass),
        repo=plan.swebench_repo,
        instance_id=plan.task_id,
        version=plan.swebench_version,
    )
    grading = Grading(
        grade=str(result.grade), resolved=result.resolved, test_results=result.test_results
    )
    # A timeout stays a timeout; otherwise the grade, not the script's exit code, decides.
    if final.reason is Reason.TIMEOUT:
        return grading
    final.reason = None if grading.resolved else Reason.TESTS_FAILED
    final.note = f"grade {grading.grade}" + ("" if grading.resolved else ": not resolved")
    if marked_section(output) is None:
        final.note += " (no test output between the markers)"
        if final.truncated:
            final.note += (
                "; the output was cut at the sandbox's output cap before the end marker "
                "(SANDBOX_OUTPUT_CAP_BYTES)"
            )
    if plan.test_patch and patch_apply_failed(output):
        # The official script runs the tests anyway, and so the grade stands. With an agent
        # patch the usual cause is a file the agent created where the test patch adds one;
        # without one the instance itself is broken.
        final.reason = Reason.TESTS_FAILED if agent_patch.strip() else Reason.UNKNOWN
        final.note += "; the instance's test patch does not apply"
    return grading


def _tree_bytes(root: Path) -> int:
    """Bytes of the regular files under ``root`` (links not followed)."""
    total = 0
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            total += path.lstat().st_size
    return total
