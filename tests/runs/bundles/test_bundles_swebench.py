"""The SWE-bench export of a run graded here: a real SWE-bench instance
(marshmallow-code__marshmallow-1359, built offline from its git archive) run by the oracle
(gold patch) and the no-op agent, graded by this harness, exported in the experiments layout.
The official ``swebench`` package re-grades each exported ``test_output.txt`` to the same
verdicts (resolved, every test's side), and ``ab import-run`` reads the folder back to the
same resolved set."""

from __future__ import annotations

import json

import pytest
from swebench.harness import grading as official
from swebench.harness.test_spec.test_spec import TestSpec as OfficialSpec

from runs.models import Attempt
from runs.pipeline.adhoc import attempt_create_adhoc, model_config_for_variant
from runs.pipeline.execute import attempt_execute
from tasks_app.models import Task
from tests.support.ab_cli import ab_main
from tests.support.swebench_fixtures import EXAMPLES, LITE_DEV, rows, write_jsonl

pytestmark = [pytest.mark.django_db, pytest.mark.docker, pytest.mark.slow]

INSTANCE = "marshmallow-code__marshmallow-1359"


@pytest.fixture
def marshmallow(tmp_path, artifacts_root):
    """The instance, imported and built offline (found cached after the first build)."""
    row = next(r for r in rows(LITE_DEV) if r["instance_id"] == INSTANCE)
    path = write_jsonl(tmp_path / "lite.jsonl", [row])
    assert ab_main("import-swebench", str(path), "--suite", "lite-bundle").returncode == 0
    built = ab_main(
        "swebench",
        "build",
        "lite-bundle",
        "--repos",
        str(EXAMPLES / "repos"),
        "--backend",
        "docker",
    )
    assert built.returncode == 0, built.stdout + built.stderr
    return row, Task.objects.get(suite__name="lite-bundle", task_id=INSTANCE)


def official_spec(row: dict) -> OfficialSpec:
    """The official TestSpec without its environment scripts (those reach GitHub)."""
    return OfficialSpec(
        instance_id=row["instance_id"],
        repo=row["repo"],
        version=row["version"],
        repo_script_list=[],
        eval_script_list=[],
        env_script_list=[],
        arch="x86_64",
        FAIL_TO_PASS=json.loads(row["FAIL_TO_PASS"]),
        PASS_TO_PASS=json.loads(row["PASS_TO_PASS"]),
        language="py",
        docker_specs={},
        namespace=None,
    )


def test_the_official_package_grades_the_exported_logs_to_our_verdicts(marshmallow, tmp_path):
    row, task = marshmallow
    graded: list[Attempt] = []
    for variant in ("oracle", "nop"):
        attempt = attempt_create_adhoc(task=task, model_config=model_config_for_variant(variant))
        graded.append(attempt_execute(attempt, backend="docker"))
    assert [a.resolved for a in graded] == [True, False], [a.error_text for a in graded]

    for attempt in graded:
        out = tmp_path / f"export-{attempt.model_config.name}"
        done = ab_main(
            "export-run", str(attempt.run.public_id), "--format", "swebench", "--out", str(out)
        )
        assert done.returncode == 0, done.stderr
        preds = [json.loads(line) for line in (out / "all_preds.jsonl").read_text().splitlines()]
        assert [p["instance_id"] for p in preds] == [INSTANCE]
        logs = out / "logs" / INSTANCE
        ours = json.loads((logs / "report.json").read_text())[INSTANCE]
        prediction = {**preds[0], "model_patch": preds[0]["model_patch"] or "x"}
        theirs = official.get_eval_report(
            official_spec(row), prediction, str(logs / "test_output.txt"), include_tests_status=True
        )[INSTANCE]
        assert theirs["resolved"] == ours["resolved"] == attempt.resolved
        for side in ("FAIL_TO_PASS", "PASS_TO_PASS"):
            for verdict in ("success", "failure"):
                assert sorted(theirs["tests_status"][side][verdict]) == sorted(
                    ours["tests_status"][side][verdict]
                ), (attempt.model_config.name, side, verdict)

        # The importer of experiments folders reads it back to the same verdict.
        name = f"reimported-{attempt.model_config.name}"
        back = ab_main("import-run", str(out), "--suite", "lite-bundle", "--model", name)
        assert back.returncode == 0, back.stdout + back.stderr
        again = Attempt.objects.get(model_config__name=name, task=task)
        assert again.resolved == attempt.resolved
