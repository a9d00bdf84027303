"""An imported run is checked for integrity flags as it is indexed for search: at once for
``ab``'s own imports, in a process of its own for a web door's (``runs.services``).

On the real mini-swe-agent run (20 Verified instances): four of its submissions edit a test
file or tox.ini, one of them after a ``pip install`` in a sandbox without network (read from
the trajectories' ``info.submission`` and messages).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from benchsite.accounts.models import Door
from runs.imports import actions
from runs.integrity.services import rules_signature
from runs.models import Attempt, AttemptFlag, AttemptStatus, Run
from tests.conftest import REPO_ROOT
from tests.support.ab_cli import ab_main

# Each test's artifacts in a folder of its own (tests/support/pages_fixtures.py).
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("artifacts_root")]

MINI = REPO_ROOT / "examples" / "swebench" / "mini_swe_agent_run"
FLAGGED = {
    "astropy__astropy-13033": [("touches_tests", "astropy/timeseries/tests/test_sampled.py")],
    "sphinx-doc__sphinx-9602": [("touches_tests", "tox.ini")],
    "sympy__sympy-17630": [
        ("touches_tests", "sympy/matrices/expressions/tests/test_blockmatrix.py")
    ],
    "sympy__sympy-21612": [
        ("network_escape", "pip install antlr4-python3-runtime"),
        ("touches_tests", "sympy/parsing/tests/test_latex.py"),
    ],
}


def mini_import(tmp_path: Path, actor, door: Door):
    folder = Path(shutil.copytree(MINI, tmp_path / "run"))
    return actions.run_folder_import(
        actor=actor, door=door, path=folder, suite_name="verified-mini", model_name="mini"
    )


def flags_by_task(run_id: str) -> dict[str, list[tuple[str, str]]]:
    rows = AttemptFlag.objects.filter(attempt__run__public_id=run_id).order_by("rule")
    found: dict[str, list[tuple[str, str]]] = {}
    for task_id, rule, detail in rows.values_list("attempt__task__task_id", "rule", "detail"):
        found.setdefault(task_id, []).append((rule, detail))
    return found


def test_an_import_by_ab_is_checked_as_it_commits(tmp_path, alice):
    report = mini_import(tmp_path, alice, Door.CLI)

    attempts = Attempt.objects.filter(run__public_id=report.run_id)
    assert attempts.count() == 20
    assert set(attempts.values_list("status", flat=True)) == {AttemptStatus.FINISHED}
    assert set(attempts.values_list("integrity_rules", flat=True)) == {rules_signature()}
    assert flags_by_task(report.run_id) == FLAGGED


def test_a_web_doors_import_leaves_the_check_to_a_process_of_its_own(tmp_path, alice, monkeypatch):
    started: list[str] = []
    monkeypatch.setattr(actions, "imported_run_read_in_background", started.append)
    report = mini_import(tmp_path, alice, Door.API)

    assert started == [str(report.run_id)]
    assert not AttemptFlag.objects.exists()  # nothing read back in the request
    assert not Attempt.objects.exclude(integrity_rules="").exists()
    # What that process runs after indexing (runs.services.imported_run_read_in_background).
    done = ab_main("flags", "recompute", "--all", "--run", str(report.run_id)[:8])
    assert done.returncode == 0, done.stderr
    assert "checked 20 attempts: 4 flagged, 5 flags" in done.stdout
    assert flags_by_task(report.run_id) == FLAGGED


def test_a_bundle_imported_elsewhere_is_checked_again_there(tmp_path, alice):
    first = mini_import(tmp_path, alice, Door.CLI)
    bundle = tmp_path / "mini.tar.gz"
    done = ab_main("export-run", first.run_id, "--out", str(bundle))
    assert done.returncode == 0, done.stderr
    Run.objects.filter(public_id=first.run_id).delete()
    assert not AttemptFlag.objects.exists()

    done = ab_main("import-run", str(bundle))
    assert done.returncode == 0, done.stderr
    (run,) = Run.objects.all()
    assert set(run.attempts.values_list("integrity_rules", flat=True)) == {rules_signature()}
    assert flags_by_task(str(run.public_id)) == FLAGGED
