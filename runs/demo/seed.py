"""Deterministic demo runs for the pages: several models on custom-dev and a SWE-bench suite.

Every value comes from a ``random.Random`` seeded with the suite, model and run names, and
runs are keyed in ``config_snapshot["seed_demo"]``, so seeding twice changes nothing.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import math
import random
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

from django.conf import settings
from django.db import transaction

from runs.demo.artifacts import Outcome, grade, test_results, write_artifacts
from runs.models import (
    AgentVariant,
    Attempt,
    AttemptStatus,
    FailureReason,
    ModelConfig,
    Run,
    RunDateSource,
    RunSource,
    RunStatus,
)
from runs.taxonomy import Reason, Stage
from tasks_app.models import Suite, Task, TaskSource

BASE_TIME = dt.datetime(2026, 10, 1, 9, 0, tzinfo=dt.UTC)
SWEBENCH_SUITE = "swebench-lite-dev"  # the name tasks_app's import_swebench_sample uses
REPO_ROOT = Path(settings.BASE_DIR)


@dataclass(frozen=True)
class DemoModel:
    name: str
    variant: str
    model_name: str
    skill: float  # logit shift: higher resolves more
    price_in: float | None = None
    price_out: float | None = None
    description: str = ""


MODELS = [
    DemoModel(
        "gpt-4o (agent loop)", AgentVariant.LLM, "gpt-4o", 0.4, 2.5, 10.0, "OpenAI API, T=0.2"
    ),
    DemoModel(
        "claude-3.5-sonnet (agent loop)",
        AgentVariant.LLM,
        "claude-3-5-sonnet-20241022",
        0.9,
        3.0,
        15.0,
        "Through an OpenAI-compatible gateway",
    ),
    DemoModel(
        "qwen2.5-coder-32b (local vLLM)",
        AgentVariant.LLM,
        "Qwen/Qwen2.5-Coder-32B-Instruct",
        -0.4,
        0.2,
        0.6,
        "Self-hosted vLLM, T=0",
    ),
    DemoModel("deepseek-v3 (agent loop)", AgentVariant.LLM, "deepseek-chat", 0.5, 0.27, 1.1),
    DemoModel(
        "oracle (gold patch)", AgentVariant.ORACLE, "", 9.0, description="Applies the gold patch"
    ),
    DemoModel("no-op agent", AgentVariant.NOP, "", -9.0, description="Changes nothing"),
    DemoModel(
        "SWE-agent + GPT-4 (published)",
        AgentVariant.EXTERNAL,
        "gpt-4-1106-preview",
        0.2,
        description="Imported from a published report",
    ),
]


@dataclass(frozen=True)
class DemoRun:
    key: str
    model: str
    samples: int
    days_ago: int  # before BASE_TIME + 30 days
    skill_delta: float = 0.0
    source: str = RunSource.HARNESS


SWEBENCH_RUNS = [
    DemoRun("gpt4o-early", "gpt-4o (agent loop)", 1, 21, -0.5),
    DemoRun("gpt4o", "gpt-4o (agent loop)", 3, 3),
    DemoRun("claude-early", "claude-3.5-sonnet (agent loop)", 1, 18, -0.4),
    DemoRun("claude", "claude-3.5-sonnet (agent loop)", 3, 2),
    DemoRun("qwen", "qwen2.5-coder-32b (local vLLM)", 1, 6),
    DemoRun("deepseek", "deepseek-v3 (agent loop)", 3, 4),
    DemoRun("oracle", "oracle (gold patch)", 1, 10),
    DemoRun("nop", "no-op agent", 1, 10),
    DemoRun("published", "SWE-agent + GPT-4 (published)", 1, 25, source=RunSource.PUBLISHED),
]

CUSTOM_DEV_RUNS = [
    DemoRun("gpt4o", "gpt-4o (agent loop)", 3, 5),
    DemoRun("claude", "claude-3.5-sonnet (agent loop)", 3, 4),
    DemoRun("qwen-early", "qwen2.5-coder-32b (local vLLM)", 1, 14, -0.5),
    DemoRun("qwen", "qwen2.5-coder-32b (local vLLM)", 1, 3),
    DemoRun("oracle", "oracle (gold patch)", 1, 9),
    DemoRun("nop", "no-op agent", 1, 9),
]

# custom-dev's failure-path tasks fail the same way whoever runs them.
CUSTOM_DEV_FIXED: dict[str, tuple[Reason, Stage, int]] = {
    "toy_baseline_passes": (Reason.BASELINE_NOT_FAILING, Stage.BASELINE_RUN, 0),
    "toy_no_tests": (Reason.NO_TESTS_COLLECTED, Stage.BASELINE_RUN, 5),
    "toy_setup_fails": (Reason.SETUP_FAILED, Stage.SETUP, 1),
    "toy_setup_hangs": (Reason.SETUP_TIMEOUT, Stage.SETUP, 124),
    "toy_tests_hang": (Reason.TIMEOUT, Stage.FINAL_TEST, 124),
}


@dataclass
class SeedReport:
    runs_created: list[str] = field(default_factory=list)
    runs_kept: list[str] = field(default_factory=list)
    attempts: int = 0


def seed_demo() -> SeedReport:
    """Create the demo suites' tasks if missing and every demo run not created before."""
    report = SeedReport()
    custom_dev = _custom_dev_suite()
    swebench = _swebench_suite()
    models = {m.name: _model_config(m) for m in MODELS}
    reasons = {r.code: r for r in FailureReason.objects.all()}
    for suite, plans in ((custom_dev, CUSTOM_DEV_RUNS), (swebench, SWEBENCH_RUNS)):
        if suite is None:
            continue
        for plan in plans:
            key = f"{suite.name}/{plan.key}"
            if Run.objects.filter(suite=suite, config_snapshot__seed_demo=key).exists():
                report.runs_kept.append(key)
                continue
            spec = next(m for m in MODELS if m.name == plan.model)
            with transaction.atomic():
                report.attempts += _seed_run(suite, models[plan.model], spec, plan, key, reasons)
            report.runs_created.append(key)
    return report


def _custom_dev_suite() -> Suite | None:
    suite = Suite.objects.filter(name="custom-dev").first()
    if suite is None and (Path(settings.AB_TASKS_DIR) / "custom-dev").is_dir():
        from tasks_app.services import tasks_import

        tasks_import(directory=settings.AB_TASKS_DIR)
        suite = Suite.objects.filter(name="custom-dev").first()
    return suite


def _swebench_suite() -> Suite | None:
    """An imported SWE-bench suite, or the Lite dev sample imported here."""
    existing = (
        Suite.objects.filter(source=TaskSource.SWEBENCH, tasks__isnull=False).distinct().first()
    )
    if existing is not None:
        return existing
    from django.core.management import CommandError, call_command, get_commands

    if "import_swebench_sample" in get_commands():
        # The real importer (ab import-swebench) on the shipped sample, when it is there.
        with contextlib.suppress(CommandError):  # e.g. the sample file is absent
            call_command("import_swebench_sample", stdout=io.StringIO())
        existing = Suite.objects.filter(name=SWEBENCH_SUITE, tasks__isnull=False).first()
        if existing is not None:
            return existing
    for candidate in (
        REPO_ROOT / "examples" / "swebench" / "lite_dev.jsonl",
        REPO_ROOT.parent / "shared" / "swebench" / "lite_dev.jsonl",
    ):
        if candidate.is_file():
            return _import_swebench_file(candidate)
    return None


def _import_swebench_file(path: Path) -> Suite:
    from tasks_app.services import task_upsert
    from tasks_app.swebench.dataset import read_records
    from tasks_app.swebench.fields import check_instances

    instances, problems = check_instances(read_records(path))
    if problems:
        raise ValueError(f"{path}: {problems[0]}")
    with transaction.atomic():
        suite, _ = Suite.objects.get_or_create(
            name=SWEBENCH_SUITE,
            defaults={
                "source": TaskSource.SWEBENCH,
                "description": "SWE-bench Lite, dev split (23 real instances).",
            },
        )
        for instance in instances:
            task_upsert(
                suite=suite,
                task_id=instance.instance_id,
                fields={**instance.task_fields(), **_pythons(instance)},
                source_file=str(path),
                dataset_version="princeton-nlp/SWE-bench_Lite dev",
            )
    return suite


def _pythons(instance) -> dict[str, str]:
    """The Python asked and used, stored on the task as the dataset import stores them."""
    asked, used = instance.pythons()
    return {"python_asked": asked, "python_used": used}


def _model_config(spec: DemoModel) -> ModelConfig:
    config, _ = ModelConfig.objects.get_or_create(
        name=spec.name,
        defaults={
            "agent_variant": spec.variant,
            "model_name": spec.model_name,
            "description": spec.description,
            "temperature": 0.2 if spec.variant == AgentVariant.LLM else None,
            "price_input_per_mtok": _dec(spec.price_in),
            "price_output_per_mtok": _dec(spec.price_out),
        },
    )
    return config


def _dec(value: float | None) -> Decimal | None:
    return None if value is None else Decimal(str(value))


def _seed_run(
    suite: Suite,
    config: ModelConfig,
    spec: DemoModel,
    plan: DemoRun,
    key: str,
    reasons: dict[str, FailureReason],
) -> int:
    rng = random.Random(key)
    created = BASE_TIME + dt.timedelta(days=30 - plan.days_ago, hours=rng.randint(0, 8))
    run = Run.objects.create(
        suite=suite,
        model_config=config,
        samples=plan.samples,
        source=plan.source,
        status=RunStatus.FINISHED,
        harness_version=settings.HARNESS_VERSION,
        config_snapshot={"seed_demo": key, "model": spec.model_name, "variant": spec.variant},
        notes="Generated demo data (ab setup-demo).",
    )
    tasks = list(Task.objects.for_suite(suite).order_by("task_id"))
    clock = created
    count = 0
    missing = (
        set(rng.sample([t.task_id for t in tasks], 2)) if plan.source == "published" else set()
    )
    for task in tasks:
        for sample in range(plan.samples):
            outcome = _outcome(rng, spec, plan, task, missing)
            duration = outcome.duration
            started = clock
            clock = clock + dt.timedelta(seconds=duration + rng.uniform(1, 5))
            attempt = _create_attempt(
                rng, run, task, sample, spec, outcome, started, clock, reasons
            )
            write_artifacts(rng, attempt, task, outcome, spec.variant)
            count += 1
    Run.objects.filter(id=run.id).update(
        created_at=created,
        started_at=created,
        finished_at=clock,
        totals={"attempts": count},
        # The demo's published runs say when they ran, as a metadata.yaml would.
        date_source=RunDateSource.METADATA if plan.source == "published" else RunDateSource.HARNESS,
    )
    return count


def _outcome(
    rng: random.Random, spec: DemoModel, plan: DemoRun, task: Task, missing: set[str]
) -> Outcome:
    if task.task_id in missing:
        return Outcome(Reason.UNKNOWN, None, 0, 0.0, missing=True)
    agentless = spec.variant in (AgentVariant.ORACLE, AgentVariant.NOP, AgentVariant.EXTERNAL)
    fixed = CUSTOM_DEV_FIXED.get(task.task_id) if task.suite.source != TaskSource.SWEBENCH else None
    if fixed is not None:
        reason, stage, code = fixed
        duration = {Stage.SETUP: 120.0 if code == 124 else 4.2, Stage.FINAL_TEST: 60.0}.get(
            stage, 3.1
        )
        if stage is not Stage.FINAL_TEST:
            return Outcome(reason, stage, code, duration + rng.uniform(0, 2))
    else:
        reason = None
    tokens_in = 0 if agentless else rng.randint(8_000, 90_000)
    tokens_out = 0 if agentless else rng.randint(600, 6_000)
    steps = 0 if agentless else rng.randint(3, 28)
    duration = rng.uniform(20, 400) if not agentless else rng.uniform(5, 30)
    if reason is not None:  # toy_tests_hang: the agent ran, then the tests hung
        return Outcome(reason, Stage.FINAL_TEST, 124, duration + 60, tokens_in, tokens_out, steps)
    infra = rng.random()
    if not agentless and infra < 0.05:
        which = rng.choice([Reason.LLM_ERROR, Reason.SANDBOX_ERROR, Reason.TIMEOUT])
        stage = Stage.FINAL_TEST if which is Reason.TIMEOUT else Stage.AGENT_RUN
        return Outcome(
            which,
            stage,
            124 if which is Reason.TIMEOUT else 1,
            duration,
            tokens_in,
            tokens_out,
            steps,
        )
    difficulty = _difficulty(task.task_id)
    p = 1 / (1 + math.exp(-(spec.skill + plan.skill_delta - difficulty)))
    if task.task_id == "toy_flaky":
        p = 0.5
    if rng.random() < p:
        return Outcome(None, None, 0, duration, tokens_in, tokens_out, steps)
    if agentless:
        return Outcome(Reason.TESTS_FAILED, Stage.FINAL_TEST, 1, duration)
    roll = rng.random()
    if roll < 0.6:
        reason = Reason.TESTS_FAILED
    elif roll < 0.8:
        reason = Reason.AGENT_GAVE_UP
        steps = 30
    elif roll < 0.92:
        reason = Reason.TOOL_ERROR
    else:
        reason = Reason.INTERNAL_ERROR
    stage = (
        Stage.AGENT_RUN if reason in (Reason.AGENT_GAVE_UP, Reason.TOOL_ERROR) else Stage.FINAL_TEST
    )
    code = {Reason.TESTS_FAILED: 1, Reason.INTERNAL_ERROR: 3}.get(reason, 0)
    return Outcome(reason, stage, code, duration, tokens_in, tokens_out, steps)


def _difficulty(task_id: str) -> float:
    # Stable per task, independent of the model: the same tasks are hard for everyone.
    return random.Random(f"difficulty/{task_id}").uniform(-1.0, 2.0)


def _create_attempt(
    rng: random.Random,
    run: Run,
    task: Task,
    sample: int,
    spec: DemoModel,
    outcome: Outcome,
    started: dt.datetime,
    finished: dt.datetime,
    reasons: dict[str, FailureReason],
) -> Attempt:
    reason = reasons[outcome.reason.value] if outcome.reason else None
    pre_agent = outcome.stage in (
        Stage.GIT_CLONE,
        Stage.GIT_CHECKOUT,
        Stage.SETUP,
        Stage.BASELINE_RUN,
    )
    if outcome.missing:
        # Never attempted: a state of its own, no reason, grade, time or usage.
        reason = None
    is_infra = bool(reason and (pre_agent or reason.is_infrastructure))
    patch = _patch_for(rng, task, spec, outcome)
    outcome.patch = patch
    cost = Decimal(0)
    if spec.price_in is not None and spec.price_out is not None:
        cost = Decimal(
            str(
                round(
                    outcome.tokens_in * spec.price_in / 1e6
                    + outcome.tokens_out * spec.price_out / 1e6,
                    6,
                )
            )
        )
    error = ""
    if outcome.missing:
        error = "No entry for this instance in the published results."
    elif reason is not None:
        error = f"{reason.code}: {reason.description}"
        if outcome.reason is Reason.TIMEOUT or outcome.reason is Reason.SETUP_TIMEOUT:
            error = "[timeout] " + error
    # Published results carry no usage (no trajectory): unknown, not zero.
    known = not outcome.missing and spec.variant != AgentVariant.EXTERNAL
    attempt = Attempt.objects.create(
        run=run,
        task=task,
        suite=run.suite,
        model_config=run.model_config,
        sample_index=sample,
        task_revision=task.revision,
        status=AttemptStatus.MISSING if outcome.missing else AttemptStatus.FINISHED,
        failure_reason=reason,
        failure_stage=outcome.stage.value if outcome.stage and reason else "",
        is_infra=is_infra,
        is_timeout=outcome.reason in (Reason.TIMEOUT, Reason.SETUP_TIMEOUT) and reason is not None,
        exit_code=None if outcome.missing else outcome.exit_code,
        duration_sec=round(outcome.duration, 2) if not outcome.missing else None,
        tokens_in=outcome.tokens_in if known else None,
        tokens_out=outcome.tokens_out if known else None,
        cost_usd=cost if known else None,
        tool_calls=(outcome.steps + rng.randint(0, 4) if outcome.steps else 0) if known else None,
        # No model call recorded (an agentless reference, an attempt that never reached its
        # agent) is no figure, not 0: the row shows "—" for calls it never made.
        steps=(outcome.steps or None) if known else None,
        lines_changed=sum(
            1 for ln in patch.splitlines() if ln[:1] in "+-" and ln[:3] not in ("+++", "---")
        ),
        files_touched=sorted({ln[6:] for ln in patch.splitlines() if ln.startswith("+++ b/")}),
        final_patch=patch,
        error_text=error,
        test_results=test_results(task, outcome),
        grade=grade(task, outcome),
        started_at=None if outcome.missing else started,
        finished_at=None if outcome.missing else finished,
    )
    Attempt.objects.filter(id=attempt.id).update(
        queued_at=started, artifacts_dir=f"demo/{run.public_id}/{attempt.public_id}"
    )
    attempt.artifacts_dir = f"demo/{run.public_id}/{attempt.public_id}"
    return attempt


def _patch_for(rng: random.Random, task: Task, spec: DemoModel, outcome: Outcome) -> str:
    if outcome.missing or spec.variant == AgentVariant.NOP:
        return ""
    if outcome.stage in (Stage.SETUP, Stage.BASELINE_RUN) and outcome.reason is not None:
        return ""
    gold = task.gold_patch or ""
    if outcome.reason is None or spec.variant == AgentVariant.ORACLE:
        return gold
    if not gold:
        return ""
    # A wrong fix: the gold patch's added lines with a plausible mistake.
    lines = []
    for line in gold.splitlines():
        if line.startswith("+") and not line.startswith("+++") and rng.random() < 0.5:
            line = line + "  # also covers the empty case"
        lines.append(line)
    return "\n".join(lines) + "\n"
