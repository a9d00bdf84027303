"""A suite with runs that cover part of it, from real SWE-bench data (issue 22's scenario,
scaled down): the 20 Verified instances of examples/swebench/mini_swe_agent_run as a suite,

* ``full``: the mini-swe-agent run on all 20 (reports and trajectories: 11 resolved, dated by
  the trajectories' timestamps, usage known);
* ``partial``: the same system's reports for the first 10 instances only (5 resolved): a strict
  subset of ``full`` with identical verdicts, report-only (usage unknown), imported without a
  date;
* ``sample``: the 6 per-instance reports of examples/swebench/sample_reports (3 resolved),
  imported with ``--date``;
* ``own``: a run of this harness (pages_fixtures) on 12 of the tasks, one infrastructure
  failure among them (5 of 11 resolved).

Every import goes through the real importer (``run_folder_import``, ``results_import``).
"""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import pytest

from runs.imports.results import results_import
from runs.imports.run_import import run_folder_import
from runs.models import Run
from tasks_app.models import Suite, Task
from tasks_app.swebench.importer import swebench_import
from tests.support.pages_fixtures import make_model, make_run, outcomes
from tests.support.swebench_fixtures import EXAMPLES, REPORTS

MINI = EXAMPLES / "mini_swe_agent_run"
SUITE = "verified-partial"
FULL = "mini-swe-agent + Gemini 3 Pro"
PARTIAL = "mini-swe-agent + Gemini 3 Pro (first 10)"
SAMPLE = "mini-swe-agent sample reports"
OWN = "own-llm"
SAMPLE_DATE = dt.date(2025, 11, 20)
IDS = sorted(p.name for p in (MINI / "logs").iterdir())
PARTIAL_IDS = IDS[:10]


def copy_reports(ids: list[str], target: Path) -> Path:
    """The harness's ``logs/<id>/report.json`` of ``ids``, as the README's layout has them."""
    for instance_id in ids:
        folder = target / "logs" / instance_id
        folder.mkdir(parents=True)
        shutil.copy(MINI / "logs" / instance_id / "report.json", folder / "report.json")
    return target


@pytest.fixture
def partial_suite(tmp_path, artifacts_root) -> Suite:
    swebench_import(source=MINI / "instances.jsonl", suite_name=SUITE)
    run_folder_import(path=MINI, suite_name=SUITE, model_name=FULL)
    run_folder_import(
        path=copy_reports(PARTIAL_IDS, tmp_path / "partial"), suite_name=SUITE, model_name=PARTIAL
    )
    results_import(source=REPORTS, suite_name=SUITE, model_name=SAMPLE, date=SAMPLE_DATE)
    suite = Suite.objects.get(name=SUITE)
    tasks = list(Task.objects.for_suite(suite).order_by("task_id"))[:12]
    F, R, I = "TESTS_FAILED", None, "SANDBOX_ERROR"  # noqa: E741
    outcomes(
        make_run(suite, make_model(OWN)),
        [[F], [F], [R], [R], [I], [F], [R], [F], [F], [R], [F], [R]],
        tasks,
    )
    return suite


def run_of(model: str) -> Run:
    return Run.objects.get(model_config__name=model)
