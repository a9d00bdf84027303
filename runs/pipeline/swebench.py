"""SWE-bench instances: the repository comes out of the instance image, the final tests are
the official eval script (``tasks_app.swebench.eval_script``: reset the test files, apply the
test patch, run the tests between the markers, reset), and its output is graded by
``tasks_app.swebench.grading``."""

from __future__ import annotations

import posixpath
import time
from dataclasses import dataclass, field
from pathlib import Path

from runs.pipeline import stages
from runs.pipeline.plan import TaskPlan
from runs.pipeline.stages import CommandRun, Heartbeat, StageResult
from runs.taxonomy import Reason, Stage
from sandbox.base import Sandbox


@dataclass
class Grading:
    grade: str
    resolved: bool
    test_results: dict = field(default_factory=dict)


def export_stage(plan: TaskPlan, ws: Path) -> StageResult:
    """The "clone" of an instance: copy /testbed out of its image into the host workspace.

    A missing image or engine raises SandboxError (SANDBOX_ERROR); a copy without a git
    repository is GIT_CLONE_FAILED.
    """
    from sandbox.docker_backend import export_image_dir

    result = StageResult("export_testbed", Stage.GIT_CLONE)
    started = time.monotonic()
    ws.mkdir(parents=True, exist_ok=True)
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


# Where the eval script goes: inside the repository's .git folder, which is in the workspace
# (write_file reaches only the workspace) but in no diff or status. A file, not an argument:
# a test patch can pass the 128 KiB limit of one command-line argument.
SCRIPT_PATH = ".git/agentbench-eval.sh"


def eval_script_for(plan: TaskPlan) -> str:
    """The instance's eval script (the task's own test command for a (repo, version) the
    official specification does not list)."""
    from tasks_app.swebench.eval_script import eval_script

    return eval_script(
        repo=plan.swebench_repo,
        version=plan.swebench_version,
        base_commit=plan.commit,
        test_patch=plan.test_patch,
        test_command=plan.test_command,
    )


def final_test_stage(
    sandbox: Sandbox,
    plan: TaskPlan,
    script: str,
    *,
    heartbeat: Heartbeat | None = None,
    heartbeat_sec: float = 10,
) -> StageResult:
    """Run the eval script in the sandbox, stdout and stderr merged as in the harness's log."""
    path = posixpath.join(plan.workspace_path, SCRIPT_PATH)
    sandbox.write_file(path, script)
    return stages.tests_stage(
        sandbox,
        plan,
        name="final_test",
        stage=Stage.FINAL_TEST,
        heartbeat=heartbeat,
        heartbeat_sec=heartbeat_sec,
        command=f"bash {path} 2>&1",
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
