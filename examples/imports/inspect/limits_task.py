"""Two Inspect samples that end early: one on its message limit, one on a solver error.

Written with `python make_limits_log.py` (inspect-ai 0.3.285, mockllm model)."""

from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import INCORRECT, Score, Target, accuracy, scorer
from inspect_ai.solver import Generate, TaskState, generate, solver


@solver
def fail_on(instance_id: str):
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        if state.sample_id == instance_id:
            raise RuntimeError("sandbox container exited unexpectedly")
        return state

    return solve


@scorer(metrics=[accuracy()])
def never():
    async def score(state: TaskState, target: Target) -> Score:
        return Score(value=INCORRECT)

    return score


@task
def swe_limits():
    return Task(
        dataset=[
            Sample(id="psf__requests-1142", input="Fix it."),
            Sample(id="psf__requests-1724", input="Fix it."),
        ],
        solver=[fail_on("psf__requests-1724"), generate(), generate(), generate()],
        scorer=never(),
        message_limit=2,
    )
