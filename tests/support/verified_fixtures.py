"""A SWE-bench-Verified-sized suite as issue 29 saw it, made fast with ``bulk_create``.

500 instances with the real (repo, version) pairs of Verified's repositories, labelled as the
import labels them (``env-exact`` / ``env-approximate`` from the official specification, read
here, at build time) and carrying the Python asked and used; and 9 runs:

* ``OWN``: a run of this harness on every task (graded here: cost, tokens, calls, wall known);
* ``PUBLISHED``: seven published per-instance result files on every task, no usage recorded
  (graded elsewhere: cost, tokens, calls and wall unknown);
* ``PARTIAL``: a published run that attempted the first 100 instances only (400 missing),
  its usage known from its trajectories: rated over the whole suite, last.

``seed_verified`` is a plain function (bench/pages.py and docs/screenshots/take.py use it);
``verified_suite`` is its pytest fixture.
"""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal

import pytest

SUITE = "verified"
TASKS = 500
PARTIAL_TASKS = 100
OWN = "claude-sonnet-4 (own run)"
PARTIAL = "gem100"
PUBLISHED = [
    "20250807_mini-v1.7.0_gpt-5",
    "20250522_tools_claude-4-opus",
    "20250519_trae-agent",
    "20250430_zencoder",
    "20250316_augment_agent_v0",
    "20250228_epam-ai-run",
    "20250117_wandb_programmer_o1",
]
# The skill of each published system (its resolved share), best first: the leader ~74%.
SKILLS = [0.744, 0.72, 0.706, 0.70, 0.65, 0.62, 0.58]
OWN_SKILL = 0.61
PARTIAL_SKILL = 0.81  # of the 100 it attempted: 16.2% over the whole suite
# Verified's repositories and how many instances each has (of 500).
REPOS = [
    ("django/django", 231),
    ("sympy/sympy", 75),
    ("sphinx-doc/sphinx", 44),
    ("matplotlib/matplotlib", 34),
    ("scikit-learn/scikit-learn", 32),
    ("astropy/astropy", 22),
    ("pydata/xarray", 22),
    ("pytest-dev/pytest", 19),
    ("pylint-dev/pylint", 10),
    ("psf/requests", 8),
    ("mwaskom/seaborn", 2),
    ("pallets/flask", 1),
]
T0 = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
PATCH = "--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"


def _environments() -> list[tuple[str, str, str, str, str]]:
    """(repo, version, label, python asked, python used) for each instance, in order: each
    repository's versions of the official specification, in turn."""
    from swebench.harness.constants import MAP_REPO_VERSION_TO_SPECS

    from sandbox.environments.envspec import approximate_pythons, environment_label

    out = []
    for repo, count in REPOS:
        versions = list(MAP_REPO_VERSION_TO_SPECS[repo])
        for i in range(count):
            version = versions[i % len(versions)]
            label = environment_label(repo, version) or ""
            asked, used = approximate_pythons(repo, version)
            out.append((repo, version, label, asked, used))
    return out


def seed_verified(*, tasks: int = TASKS, seed: int = 29) -> dict:
    """The suite, its 9 runs and their 4,500 attempts; returns what tests and bench need."""
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
    from tasks_app.models import Suite, Task, TaskSource

    rng = random.Random(seed)
    FailureReason.objects.sync_from_taxonomy()
    failed = FailureReason.objects.get(code="TESTS_FAILED")
    suite = Suite.objects.create(name=SUITE, source=TaskSource.SWEBENCH)
    has_python = hasattr(Task, "python_asked")  # main's code before issue 29 has no such field
    rows = []
    for i, (repo, version, label, asked, used) in enumerate(_environments()[:tasks]):
        owner, name = repo.split("/")
        labels = ["swebench", name, *([label] if label else [])]
        extra = {"python_asked": asked, "python_used": used} if has_python else {}
        rows.append(
            Task(
                suite=suite,
                task_id=f"{owner}__{name}-{10000 + i}",
                source=TaskSource.SWEBENCH,
                spec={"repo": repo, "version": version, "instance_id": f"{owner}__{name}-{i}"},
                repo_url=f"https://github.com/{repo}",
                test_command="pytest -q",
                labels=labels,
                labels_text="," + ",".join(labels) + ",",
                instance_version=version,
                gold_patch=PATCH,
                problem_statement="Something is wrong. " * 10,
                **extra,
            )
        )
    Task.objects.bulk_create(rows, batch_size=500)
    task_rows = list(Task.objects.filter(suite=suite).order_by("task_id"))
    names = [OWN, PARTIAL, *PUBLISHED]
    configs = ModelConfig.objects.bulk_create(
        ModelConfig(
            name=n,
            slug=n.lower().replace(" ", "-").replace("(", "").replace(")", ""),
            agent_variant=AgentVariant.LLM,
            model_name=n,
        )
        for n in names
    )
    runs = Run.objects.bulk_create(
        Run(
            suite=suite,
            model_config=c,
            samples=1,
            status=RunStatus.FINISHED,
            source=RunSource.HARNESS if n == OWN else RunSource.PUBLISHED,
            date_source=RunDateSource.HARNESS if n == OWN else RunDateSource.GIVEN,
            finished_at=T0 + dt.timedelta(days=30 * k),
        )
        for k, (n, c) in enumerate(zip(names, configs, strict=True))
    )
    attempts = []
    for n, run in zip(names, runs, strict=True):
        skill = {OWN: OWN_SKILL, PARTIAL: PARTIAL_SKILL}.get(n) or SKILLS[PUBLISHED.index(n)]
        usage = n in (OWN, PARTIAL)
        for t, task in enumerate(task_rows):
            if n == PARTIAL and t >= PARTIAL_TASKS:
                attempts.append(
                    Attempt(
                        run=run,
                        task=task,
                        suite=suite,
                        model_config=run.model_config,
                        status=AttemptStatus.MISSING,
                        cost_usd=None,
                        tokens_in=None,
                        tokens_out=None,
                        steps=None,
                        duration_sec=None,
                    )
                )
                continue
            resolved = rng.random() < skill
            attempts.append(
                Attempt(
                    run=run,
                    task=task,
                    suite=suite,
                    model_config=run.model_config,
                    status=AttemptStatus.FINISHED,
                    failure_reason=None if resolved else failed,
                    final_patch=PATCH,
                    finished_at=run.finished_at,
                    cost_usd=Decimal(f"{rng.uniform(0.05, 0.9):.4f}") if usage else None,
                    tokens_in=rng.randint(20_000, 900_000) if usage else None,
                    tokens_out=rng.randint(1_000, 30_000) if usage else None,
                    steps=rng.randint(8, 90) if usage else None,
                    duration_sec=rng.uniform(60, 900) if usage else None,
                )
            )
    Attempt.objects.bulk_create(attempts, batch_size=1000)
    by_name = dict(zip(names, runs, strict=True))
    return {"suite": suite, "runs": by_name, "tasks": task_rows}


@pytest.fixture
def verified_suite(db) -> dict:
    return seed_verified()
