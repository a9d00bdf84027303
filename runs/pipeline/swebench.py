"""SWE-bench instances: the repository comes out of the instance image (built here by
``ab swebench build``, or a published one), the instance's test patch goes in before the final
run, and the output is graded by ``tasks_app.swebench``."""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from runs.pipeline import workspace
from runs.pipeline.plan import TaskPlan
from runs.pipeline.stages import CommandRun, StageResult
from runs.taxonomy import Reason, Stage
from sandbox.errors import SandboxError


@dataclass
class Grading:
    grade: str
    resolved: bool
    test_results: dict = field(default_factory=dict)


def with_local_build(plan: TaskPlan, *, backend: str) -> TaskPlan:
    """The plan with the instance's image and root filesystem built on this machine.

    Raises SandboxUnavailable when the instance was not built here and names no published
    image either, or when Docker is asked for and only the bubblewrap tree was built.
    """
    from sandbox.errors import SandboxUnavailable
    from tasks_app.swebench.build import built_instance

    built = built_instance(plan.task_id)
    if built is None or built.base_commit != plan.commit:
        if backend != "bwrap" and image_present(plan.image):
            return plan  # a published instance image the operator pulled or loaded
        raise SandboxUnavailable(
            f"SWE-bench instance {plan.task_id} is not built on this machine: "
            "run `ab swebench build SUITE --instance " + plan.task_id + "`"
        )
    if backend == "docker" and not built.image:
        raise SandboxUnavailable(
            f"SWE-bench instance {plan.task_id} has no Docker image here (built for bubblewrap "
            "only): run `ab swebench build SUITE --backend docker`"
        )
    return replace(plan, image=built.image or plan.image, rootfs=built.rootfs)


def image_present(image: str) -> bool:
    from tasks_app.swebench.docker_images import image_key

    return image_key(image) is not None


def export_stage(plan: TaskPlan, ws: Path) -> StageResult:
    """The "clone" of an instance: copy /testbed out of its root filesystem (an instance
    built here) or out of its image into the host workspace.

    A missing image or engine raises SandboxError (SANDBOX_ERROR); a copy without a git
    repository is GIT_CLONE_FAILED.
    """
    result = StageResult("export_testbed", Stage.GIT_CLONE)
    started = time.monotonic()
    ws.mkdir(parents=True, exist_ok=True)
    if plan.rootfs:
        source = Path(plan.rootfs) / plan.workspace_path.lstrip("/")
        copy = subprocess.run(["cp", "-a", f"{source}/.", str(ws)], capture_output=True, text=True)
        if copy.returncode != 0:
            raise SandboxError(f"cannot copy {source}: {copy.stderr.strip()}")
        command = f"copy {source} -> workspace"
    else:
        from sandbox.docker_backend import export_image_dir

        export_image_dir(plan.image, plan.workspace_path, ws)
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


def apply_test_patch_stage(plan: TaskPlan, repo_dir: Path, *, agent_patch: str) -> StageResult:
    result = StageResult("apply_test_patch", Stage.FINAL_TEST)
    run = workspace.apply_patch(repo_dir, plan.test_patch)
    result.runs.append(CommandRun.of("git apply <test patch>", run))
    if not run.ok:
        # The usual cause is an agent that edited the tests the patch changes: its result.
        result.reason = Reason.TESTS_FAILED if agent_patch.strip() else Reason.UNKNOWN
        result.note = "the instance's test patch does not apply"
    return result


def grade(final: StageResult, plan: TaskPlan) -> Grading:
    """Grade the final test output (FAIL_TO_PASS / PASS_TO_PASS); set the stage's reason."""
    from tasks_app.swebench.grading import grade_attempt_output

    result = grade_attempt_output(
        final.output,
        fail_to_pass=list(plan.fail_to_pass),
        pass_to_pass=list(plan.pass_to_pass),
        repo=plan.swebench_repo,
    )
    grading = Grading(
        grade=str(getattr(result.grade, "value", result.grade)),
        resolved=bool(result.resolved),
        test_results=dict(result.test_results or {}),
    )
    # A timeout stays a timeout; otherwise the grade, not pytest's exit code, decides (pytest
    # exits 2 on a collection error, which here means unresolved, not interrupted).
    if final.reason is not Reason.TIMEOUT:
        final.reason = None if grading.resolved else Reason.TESTS_FAILED
        final.note = f"grade {grading.grade}" + ("" if grading.resolved else ": not resolved")
    return grading
