"""Importing predictions: one attempt per suite instance, empty and absent ones never dropped."""

from __future__ import annotations

import json

import pytest

from runs.imports.predictions import predictions_import, read_predictions
from runs.models import Attempt, Run
from tasks_app.swebench.errors import SwebenchInputError
from tasks_app.swebench.importer import swebench_import
from tests.support.ab_cli import ab
from tests.support.swebench_fixtures import LITE_DEV, rows

pytestmark = pytest.mark.django_db

LITE = rows(LITE_DEV)
IDS = [r["instance_id"] for r in LITE]


@pytest.fixture
def lite(db):
    swebench_import(source=LITE_DEV, suite_name="lite-dev")
    return "lite-dev"


def prediction(instance_id: str, patch: str | None) -> dict:
    return {"instance_id": instance_id, "model_name_or_path": "my-agent", "model_patch": patch}


def test_it_keeps_patched_instances_not_evaluated_and_records_the_rest_as_unresolved(
    lite, tmp_path
):
    gold = {r["instance_id"]: r["patch"] for r in LITE}
    items = [prediction(i, gold[i]) for i in IDS[:10]]
    items += [prediction(IDS[10], ""), prediction(IDS[11], None)]
    path = tmp_path / "preds.jsonl"
    path.write_text("".join(json.dumps(i) + "\n" for i in items))

    report = predictions_import(source=path, suite_name=lite, model_name="my-agent")

    run = Run.objects.get(public_id=report.run_id)
    assert run.source == "predictions" and run.model_config.agent_variant == "external"
    attempts = {a.task.task_id: a for a in run.attempts.select_related("task")}
    assert len(attempts) == 23
    # Nobody asked for an evaluation: the patched ones wait, outside every queue.
    waiting = [a for a in attempts.values() if a.status == "not_evaluated"]
    assert len(waiting) == 10 == report.not_evaluated
    assert report.queued == 0 and report.attempt_ids == []
    assert attempts[IDS[0]].final_patch == gold[IDS[0]]
    for instance_id in (IDS[10], IDS[11]):
        attempt = attempts[instance_id]
        assert attempt.status == "finished" and attempt.failure_reason_id == "TESTS_FAILED"
        assert attempt.error_text.startswith("[empty-patch]")
    absent = attempts[IDS[12]]
    # Not attempted: a state of its own, no failure reason and no grade.
    assert absent.status == "missing" and absent.is_missing and absent.failure_reason_id is None
    assert absent.grade == "" and absent.finished_at is None
    assert absent.error_text.startswith("[no-prediction]")
    assert report.no_prediction == sorted(IDS[12:])
    # Nothing is left to run, so the run is settled; the waiting ones are counted apart.
    run.refresh_from_db()
    assert run.status == "finished" and run.totals["not_evaluated"] == 10
    assert run.totals["final"] == 13


def test_it_queues_patched_instances_when_they_are_evaluated_now(lite, tmp_path):
    gold = {r["instance_id"]: r["patch"] for r in LITE}
    path = tmp_path / "preds.jsonl"
    path.write_text("".join(json.dumps(prediction(i, gold[i])) + "\n" for i in IDS[:3]))

    report = predictions_import(
        source=path, suite_name=lite, model_name="my-agent", evaluate_inline=True
    )

    run = Run.objects.get(public_id=report.run_id)
    assert run.status == "queued" and report.queued == 3 and len(report.attempt_ids) == 3
    assert run.attempts.filter(status="queued").count() == 3


def test_it_reads_a_json_list_and_an_object_keyed_by_id(tmp_path):
    as_list = tmp_path / "p.json"
    as_list.write_text(json.dumps([prediction(IDS[0], "x"), prediction(IDS[1], None)]))
    assert [(p.instance_id, p.patch) for p in read_predictions(as_list)] == [
        (IDS[0], "x"),
        (IDS[1], None),
    ]
    keyed = tmp_path / "k.json"
    keyed.write_text(json.dumps({IDS[0]: {"model_patch": "y", "model_name_or_path": "m"}}))
    assert [(p.instance_id, p.patch) for p in read_predictions(keyed)] == [(IDS[0], "y")]


def test_unknown_instances_and_bad_fields_name_their_line(lite, tmp_path):
    path = tmp_path / "preds.jsonl"
    path.write_text(
        json.dumps(prediction(IDS[0], "p"))
        + "\n"
        + json.dumps(prediction("astropy__astropy-1", "p"))
        + "\n"
        + json.dumps({"instance_id": IDS[1], "model_patch": 5})
        + "\n"
    )
    with pytest.raises(SwebenchInputError) as caught:
        predictions_import(source=path, suite_name=lite, model_name="m")
    assert [str(p) for p in caught.value.problems] == [
        "line 3, field model_patch: must be a string or null"
    ]

    path.write_text(
        json.dumps(prediction(IDS[0], "p"))
        + "\n"
        + json.dumps(prediction("astropy__astropy-1", "p"))
    )
    with pytest.raises(SwebenchInputError) as caught:
        predictions_import(source=path, suite_name=lite, model_name="m")
    assert [str(p) for p in caught.value.problems] == [
        "line 2, field instance_id: 'astropy__astropy-1' is not in suite lite-dev"
    ]
    assert not Run.objects.exists() and not Attempt.objects.exists()


def test_a_run_with_nothing_to_evaluate_is_finished_at_once(lite, tmp_path):
    path = tmp_path / "preds.jsonl"
    path.write_text(json.dumps(prediction(IDS[0], "")) + "\n")
    report = predictions_import(source=path, suite_name=lite, model_name="m")
    run = Run.objects.get(public_id=report.run_id)
    assert run.status == "finished" and run.totals["resolved"] == 0
    # One empty patch scored; 22 instances never attempted (0 in the rate, no failures).
    assert (run.totals["scored"], run.totals["missing"], run.totals["tasks"]) == (1, 22, 23)


@pytest.mark.slow
def test_ab_import_predictions_lists_what_it_recorded(tmp_path):
    var = tmp_path / "var"
    assert ab("import-swebench", str(LITE_DEV), "--suite", "lite", var_dir=var).returncode == 0
    path = tmp_path / "preds.jsonl"
    path.write_text(json.dumps(prediction(IDS[0], None)) + "\n")
    out = ab("import-predictions", str(path), "--suite", "lite", "--model", "m", var_dir=var)
    assert out.returncode == 0, out.stderr
    assert f"empty patch    {IDS[0]}" in out.stdout
    assert "0 to evaluate, 1 empty patch(es), 22 instance(s) without a prediction" in out.stdout
