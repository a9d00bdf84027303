"""A three-sample Inspect task whose .eval log is a fixture for AgentBench's importer.

Sample ids are SWE-bench instance ids; the scorer marks the first correct, the others incorrect, and
records a model_patch in its metadata, as inspect_evals' swe_bench scorer does."""

from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import CORRECT, INCORRECT, Score, Target, accuracy, scorer
from inspect_ai.solver import TaskState, generate

PATCH = "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n"
IDS = ["psf__requests-1142", "psf__requests-1724", "django__django-10097"]


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
def swe_mini():
    return Task(
        dataset=[Sample(id=i, input=f"Fix the issue of {i}.", target="") for i in IDS],
        solver=[generate()],
        scorer=patch_scorer(),
    )
