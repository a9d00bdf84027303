"""A two-sample Inspect task with a tool call, whose .json log is a fixture for the importer.

The model (mockllm, fixed outputs) calls a `run` tool once and then answers; the tool needs no
sandbox (it returns a fixed listing). The scorer marks the first sample correct, the second
incorrect, with a model_patch in its metadata, as inspect_evals' swe_bench scorer does."""

from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import CORRECT, INCORRECT, Score, Target, accuracy, scorer
from inspect_ai.solver import TaskState, generate, use_tools
from inspect_ai.tool import tool

PATCH = "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n"
IDS = ["psf__requests-1142", "psf__requests-1724"]


@tool
def run():
    async def execute(cmd: str) -> str:
        """Run a shell command (here: a fixed answer).

        Args:
            cmd: The command.
        """
        return f"$ {cmd}\nrequests/\nsetup.py\n"

    return execute


@scorer(metrics=[accuracy()])
def patch_scorer():
    async def score(state: TaskState, target: Target) -> Score:
        ok = state.sample_id == IDS[0]
        return Score(
            value=CORRECT if ok else INCORRECT,
            explanation="resolved" if ok else "FAIL_TO_PASS tests still fail",
            metadata={"model_patch": PATCH},
        )

    return score


@task
def swe_tools():
    return Task(
        dataset=[Sample(id=i, input=f"Fix the issue of {i}.", target="") for i in IDS],
        solver=[use_tools([run()]), generate()],
        scorer=patch_scorer(),
    )
