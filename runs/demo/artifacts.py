"""The demo's attempt artifacts: stage logs, trajectories, per-test results and grades.

One description of what an attempt's final tests did (``_final_failures``) feeds its log,
its exit code, its per-test results and its grade, so they never disagree.
"""

from __future__ import annotations

import datetime as dt
import json
import random
from dataclasses import dataclass

from django.core.files.base import ContentFile
from django.core.files.storage import storages

from runs.models import AgentVariant, Attempt, AttemptStage, Grade
from runs.taxonomy import Reason, Stage
from tasks_app.models import Task


@dataclass
class Outcome:
    """What the demo decided an attempt did; everything written about it follows from this."""

    reason: Reason | None
    stage: Stage | None
    exit_code: int
    duration: float
    tokens_in: int = 0
    tokens_out: int = 0
    steps: int = 0
    missing: bool = False
    patch: str = ""


def _graded_tests(task: Task) -> tuple[list[str], list[str]]:
    """The FAIL_TO_PASS and PASS_TO_PASS tests the demo's logs and results both list."""
    f2p = list(task.fail_to_pass or ["tests/test_calc.py::test_mean_of_odd_total"])
    return f2p, list(task.pass_to_pass)[:15]


def _final_failures(outcome: Outcome) -> tuple[int, str]:
    """The final test stage's exit code and what its tests did: "pass", "one" (the first
    FAIL_TO_PASS test still fails), "internal" (pytest crashed, no test ran) or "timeout"."""
    if outcome.reason is None:
        return 0, "pass"
    if outcome.reason is Reason.INTERNAL_ERROR:
        return 3, "internal"
    if outcome.reason is Reason.TIMEOUT:
        return 124, "timeout"
    return 1, "one"


def test_results(task: Task, outcome: Outcome) -> dict:
    """Per-test results that say what the final test log says (one source: _final_failures)."""
    if (
        not task.fail_to_pass
        or outcome.missing
        or outcome.stage in (Stage.SETUP, Stage.BASELINE_RUN)
        or outcome.reason is Reason.TIMEOUT
        or (outcome.stage is Stage.AGENT_RUN and outcome.reason is not Reason.AGENT_GAVE_UP)
    ):
        return {}
    f2p, p2p = _graded_tests(task)
    _, kind = _final_failures(outcome)
    if kind == "pass":
        failing: set[str] = set()
    elif kind == "internal":
        failing = set(f2p) | set(p2p)  # no test ran: a missing test fails
    else:
        failing = {f2p[0]}
    return {
        name: {
            "success": [t for t in tests if t not in failing],
            "failure": [t for t in tests if t in failing],
        }
        for name, tests in (("FAIL_TO_PASS", f2p), ("PASS_TO_PASS", p2p))
    }


def grade(task: Task, outcome: Outcome) -> str:
    """The grade the results of _test_results earn (SWE-bench's FULL / PARTIAL / NO)."""
    if not task.fail_to_pass or outcome.missing:
        return ""
    results = test_results(task, outcome)
    if not results:
        return Grade.NO
    f2p, p2p = results["FAIL_TO_PASS"], results["PASS_TO_PASS"]
    if not f2p["failure"] and not p2p["failure"]:
        return Grade.FULL
    if f2p["success"] and not p2p["failure"]:
        return Grade.PARTIAL
    return Grade.NO


def write_artifacts(
    rng: random.Random, attempt: Attempt, task: Task, outcome: Outcome, variant: str
) -> None:
    """The attempt's stage logs, events.jsonl, patch and result file, and its stage rows."""
    if outcome.missing:
        return
    store = storages["artifacts"]
    root = attempt.artifacts_dir
    stages = [
        (Stage.GIT_CLONE, f"git clone --quiet {task.repo_url} repo", "logs/git_clone.txt"),
        (Stage.GIT_CHECKOUT, f"git checkout --quiet {task.repo_commit}", "logs/git_checkout.txt"),
        (Stage.SETUP, " && ".join(task.setup_commands) or "true", "logs/setup.txt"),
        (Stage.BASELINE_RUN, task.test_command, "logs/baseline.txt"),
        (Stage.AGENT_RUN, f"agent {variant}", "logs/agent.txt"),
        (Stage.FINAL_TEST, task.test_command, "logs/final_test.txt"),
    ]
    at = attempt.started_at
    assert at is not None  # the seed starts every attempt it writes artifacts for
    for order, (stage, command, path) in enumerate(stages):
        failed_here = outcome.stage is stage
        code = outcome.exit_code if failed_here else (1 if stage is Stage.BASELINE_RUN else 0)
        if stage is Stage.FINAL_TEST:
            code = _final_failures(outcome)[0]
        text = _stage_log(rng, stage, command, code, task, outcome)
        store.save(f"{root}/{path}", ContentFile(text.encode()))
        duration = round(rng.uniform(0.3, 4.0), 2)
        if stage is Stage.AGENT_RUN:
            duration = round(outcome.duration * 0.8, 2)
        AttemptStage.objects.create(
            attempt=attempt,
            name=stage.value,
            order=order,
            command=command,
            exit_code=code,
            duration_sec=duration,
            timed_out=failed_here and code == 124,
            output_path=path,
            started_at=at,
        )
        at = at + dt.timedelta(seconds=duration)
        if failed_here and stage is not Stage.AGENT_RUN:
            break
        if failed_here and stage is Stage.AGENT_RUN and outcome.reason is not Reason.AGENT_GAVE_UP:
            break
    if (
        outcome.stage not in (Stage.SETUP, Stage.BASELINE_RUN, Stage.GIT_CLONE)
        and variant != AgentVariant.EXTERNAL
    ):
        store.save(f"{root}/events.jsonl", ContentFile(_events(rng, task, outcome).encode()))
    if outcome.patch:
        store.save(f"{root}/patch.diff", ContentFile(outcome.patch.encode()))
    result = {
        "schema_version": Attempt.SCHEMA_VERSION,
        "task_id": task.task_id,
        "failure_reason": outcome.reason.value if outcome.reason else None,
        "failure_stage": outcome.stage.value if outcome.stage else None,
        "exit_code": outcome.exit_code,
        "tokens_in": outcome.tokens_in,
        "tokens_out": outcome.tokens_out,
    }
    store.save(f"{root}/result.json", ContentFile(json.dumps(result, indent=2).encode()))


def _stage_log(
    rng: random.Random, stage: Stage, command: str, code: int, task: Task, outcome: Outcome
) -> str:
    lines = [f"$ {command}"]
    if stage in (Stage.BASELINE_RUN, Stage.FINAL_TEST):
        f2p, p2p = _graded_tests(task)
        tests = f2p + p2p
        if stage is Stage.BASELINE_RUN:
            kind = {0: "pass", 5: "none"}.get(code, "one")
        else:
            kind = _final_failures(outcome)[1]
        seconds = rng.uniform(0.5, 9)
        lines.append(">>>>> Start Test Output")
        lines.append(
            "============================= test session starts =============================="
        )
        if kind == "none":
            lines.append("collected 0 items")
            lines.append(f"=============== no tests ran in {seconds:.2f}s ===============")
        elif kind == "internal":
            lines.append("INTERNALERROR> Traceback (most recent call last):")
            lines.append('INTERNALERROR>   File "conftest.py", line 12, in pytest_configure')
            lines.append("INTERNALERROR> ImportError: cannot import name 'mean' from 'calc'")
            lines.append(f"=============== no tests ran in {seconds:.2f}s ===============")
        else:
            lines.append(f"collected {len(tests)} items")
            shown = tests[: len(tests) // 2] if kind == "timeout" else tests
            for i, name in enumerate(shown):
                failed = kind == "one" and i == 0
                lines.append(f"{'FAILED' if failed else 'PASSED'} {name}")
            if kind == "timeout":
                lines.append("!!! timeout: the test command was killed after the task's timeout")
            else:
                failed_n = int(kind == "one")
                lines.append(
                    f"=============== {failed_n} failed, {len(tests) - failed_n} passed in "
                    f"{seconds:.2f}s ==============="
                )
        lines.append(">>>>> End Test Output")
    elif stage is Stage.SETUP:
        lines.append("Collecting dependencies ...")
        if code == 1:
            lines.append(
                "ERROR: Could not find a version that satisfies the requirement does-not-exist-pkg"
            )
            lines.append("ERROR: No matching distribution found for does-not-exist-pkg")
        elif code == 124:
            lines.append("... (no output for 120 s; killed at the setup timeout)")
        else:
            lines.append("Successfully installed the environment.")
    elif stage is Stage.AGENT_RUN:
        lines.append(
            f"steps: {outcome.steps}, tokens in/out: {outcome.tokens_in}/{outcome.tokens_out}"
        )
        if outcome.reason is Reason.LLM_ERROR:
            lines.append(
                "openai.RateLimitError: Error code: 429 - rate limit exceeded (retried 5 times)"
            )
        if outcome.reason is Reason.AGENT_GAVE_UP:
            lines.append("stopped: step budget exhausted (30 steps)")
        if outcome.reason is Reason.TOOL_ERROR:
            lines.append("apply_patch failed: patch does not apply (hunk 1 at line 42)")
        if outcome.reason is Reason.SANDBOX_ERROR:
            lines.append("sandbox error: container exited unexpectedly (OOM killed)")
    lines.append(f"[exit code {code}]")
    return "\n".join(lines) + "\n"


def _events(rng: random.Random, task: Task, outcome: Outcome) -> str:
    t = 0.0
    events = []

    def emit(event: str, **fields) -> None:
        nonlocal t
        t += rng.uniform(0.2, 6.0)
        events.append({"t": round(t, 3), "event": event, **fields})

    first_file = next(
        (ln[6:] for ln in (task.gold_patch or "").splitlines() if ln.startswith("+++ b/")),
        "src/toy/calc.py",
    )
    emit("agent_start", task_id=task.task_id)
    for step in range(max(1, min(outcome.steps, 8))):
        emit(
            "llm_request",
            step=step,
            tokens_in=rng.randint(2000, 9000),
            tokens_out=rng.randint(50, 600),
        )
        tool = ["list_files", "read_file", "search", "read_file", "apply_patch", "run_tests"][
            step % 6
        ]
        args = (
            {"path": first_file}
            if tool == "read_file"
            else {"pattern": "def "}
            if tool == "search"
            else {}
        )
        emit("tool_start", tool=tool, input=args, step=step)
        output = {
            "list_files": "src/\ntests/\nREADME.md\npyproject.toml",
            "read_file": f"# {first_file}\n" + "\n".join(f"line {i}" for i in range(1, 12)),
            "search": f"{first_file}:12: def mean(values):",
            "apply_patch": "patch applied",
            "run_tests": "1 failed, 5 passed",
        }[tool]
        emit("tool_finish", tool=tool, output=output, ok=True, step=step)
    if outcome.reason is Reason.TOOL_ERROR:
        emit("tool_finish", tool="apply_patch", output="error: patch does not apply", ok=False)
    emit("tests_start", command=task.test_command)
    emit("tests_finish", exit_code=0 if outcome.reason is None else 1)
    if outcome.patch:
        emit("patch", lines=len(outcome.patch.splitlines()))
    emit("agent_finish", stop="tests_passed" if outcome.reason is None else "gave_up")
    return "\n".join(json.dumps(e) for e in events) + "\n"
