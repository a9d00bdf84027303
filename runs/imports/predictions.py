"""Evaluating a system's predictions: one attempt per suite instance, the patch as its input.

A prediction is ``{"instance_id", "model_name_or_path", "model_patch"}``, in a JSONL file, a
JSON list, or a JSON object keyed by instance id. An instance with an empty or null patch, or
with no prediction at all, is recorded as a finished unresolved attempt, never dropped. The
others are queued; the pipeline applies the patch in the instance image, then the test patch,
runs the tests and grades them (``grading.grade_attempt_output``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from django.db import transaction
from django.utils import timezone

from runs.imports.bulk import insert_rows
from runs.imports.outcomes import Kind, external_model, finished_attempt
from runs.models import Attempt, AttemptStatus, Run, RunSource, RunStatus
from runs.services import attempts_enqueue, run_refresh_totals
from tasks_app.models import Suite, Task
from tasks_app.swebench.dataset import read_records
from tasks_app.swebench.errors import Problem, SwebenchInputError


@dataclass(frozen=True, slots=True)
class Prediction:
    instance_id: str
    patch: str | None
    model_name_or_path: str
    where: str


@dataclass
class PredictionsReport:
    suite: str
    model: str
    run_id: str = ""
    queued: int = 0
    not_evaluated: int = 0
    empty_patch: list[str] = field(default_factory=list)
    no_prediction: list[str] = field(default_factory=list)
    attempt_ids: list[int] = field(default_factory=list)

    def summary(self) -> str:
        waiting = f", {self.not_evaluated} not evaluated" if self.not_evaluated else ""
        return (
            f"run {self.run_id}: {self.queued} to evaluate{waiting}, {len(self.empty_patch)} empty "
            f"patch(es), {len(self.no_prediction)} instance(s) without a prediction"
        )


def read_predictions(source: Path | bytes | str, filename: str = "") -> list[Prediction]:
    """Parse and check a predictions file. Raises ``SwebenchInputError`` naming line and field."""
    if not filename and not isinstance(source, bytes):
        filename = Path(source).name
    records = read_records(source, filename, allow_keyed=True)
    problems: list[Problem] = []
    predictions: list[Prediction] = []
    seen: dict[str, str] = {}
    for record in records:
        row = record.data
        instance_id = row.get("instance_id", record.key or None)
        if not isinstance(instance_id, str) or not instance_id:
            problems.append(Problem(record.where, "missing or not a string", "instance_id"))
            continue
        if record.key and instance_id != record.key:
            problems.append(
                Problem(record.where, f"{instance_id!r} differs from its key", "instance_id")
            )
            continue
        if "model_patch" not in row:
            problems.append(Problem(record.where, "missing (null for no patch)", "model_patch"))
            continue
        patch = row["model_patch"]
        if patch is not None and not isinstance(patch, str):
            problems.append(Problem(record.where, "must be a string or null", "model_patch"))
            continue
        name = row.get("model_name_or_path") or ""
        if not isinstance(name, str):
            problems.append(Problem(record.where, "must be a string", "model_name_or_path"))
            continue
        if instance_id in seen:
            problems.append(
                Problem(
                    record.where, f"second prediction (first at {seen[instance_id]})", "instance_id"
                )
            )
            continue
        seen[instance_id] = record.where
        predictions.append(Prediction(instance_id, patch, name, record.where))
    if problems:
        raise SwebenchInputError(problems, filename)
    return predictions


def predictions_import(
    *,
    source: Path | bytes | str,
    filename: str = "",
    suite_name: str,
    model_name: str,
    enqueue: bool = False,
    evaluate_inline: bool = False,
    created_by=None,
) -> PredictionsReport:
    """Create a run (source "predictions") of external model ``model_name`` on the suite.

    Instances with a patch get an attempt holding it (``final_patch``): with ``enqueue`` it is
    queued and sent to the workers once committed; without, it stays ``not_evaluated`` (no
    worker or reaper touches it) until ``runs.services.run_evaluate`` asks for it.
    ``evaluate_inline`` queues it too, for a caller that runs ``predictions_execute_inline``
    right after. Unknown instance ids are errors naming the
    line. Raises ``SwebenchInputError``; nothing is stored on bad input.
    """
    if not filename and not isinstance(source, bytes):
        filename = Path(source).name
    predictions = read_predictions(source, filename)
    suite = Suite.objects.filter(name=suite_name).first()
    if suite is None:
        raise SwebenchInputError([Problem("suite", f"no suite named {suite_name!r}")], filename)
    # Only what the attempts need: the full rows carry every patch and test list.
    tasks = list(
        Task.objects.for_suite(suite).only("id", "task_id", "revision").order_by("task_id")
    )
    by_id = {p.instance_id: p for p in predictions}
    known = {t.task_id for t in tasks}
    unknown = [
        Problem(p.where, f"{p.instance_id!r} is not in suite {suite_name}", "instance_id")
        for p in predictions
        if p.instance_id not in known
    ]
    if unknown:
        raise SwebenchInputError(unknown, filename)

    report = PredictionsReport(suite=suite_name, model=model_name)
    # Queued only when someone will run them now (workers or this process); otherwise the
    # reaper would find queued attempts of an active run and send them anyway.
    queue = enqueue or evaluate_inline
    waiting = AttemptStatus.QUEUED if queue else AttemptStatus.NOT_EVALUATED
    with transaction.atomic():
        model = external_model(
            name=model_name, description="External system: evaluated from its predictions."
        )
        now = timezone.now()
        run = Run.objects.create(
            suite=suite,
            model_config=model,
            source=RunSource.PREDICTIONS,
            status=RunStatus.QUEUED,
            created_by=created_by,
            selection={"task_ids": [t.task_id for t in tasks]},
            notes=f"Predictions from {filename or 'upload'}.",
            config_snapshot={"predictions_file": filename, "model_name": model_name},
        )
        attempts: list[Attempt] = []
        for task in tasks:
            prediction = by_id.get(task.task_id)
            if prediction is None:
                report.no_prediction.append(task.task_id)
                attempts.append(_unresolved(run, suite, model, task, now, Kind.NO_PREDICTION))
            elif not (prediction.patch or "").strip():
                report.empty_patch.append(task.task_id)
                attempts.append(_unresolved(run, suite, model, task, now, Kind.EMPTY_PATCH))
            else:
                attempts.append(
                    Attempt(
                        run=run,
                        task=task,
                        suite=suite,
                        model_config=model,
                        task_revision=task.revision,
                        status=waiting,
                        final_patch=prediction.patch or "",
                    )
                )
        insert_rows(attempts)
        queued = list(run.attempts.filter(status=waiting).values_list("id", flat=True))
        report.queued = len(queued) if queue else 0
        report.not_evaluated = 0 if queue else len(queued)
        report.attempt_ids = queued if queue else []
        if not (queue and queued):
            run.status = RunStatus.FINISHED
            run.started_at = run.finished_at = now
            run.save(update_fields=["status", "started_at", "finished_at"])
        run_refresh_totals(run)
        report.run_id = str(run.public_id)
        if enqueue and queued:
            transaction.on_commit(lambda: attempts_enqueue(queued))
    return report


def _unresolved(run: Run, suite: Suite, model, task: Task, now, kind: Kind) -> Attempt:
    return finished_attempt(run=run, suite=suite, model=model, task=task, kind=kind, now=now)


def predictions_execute_inline(
    attempt_ids: list[int], *, progress: Callable[[int, int, Attempt], None] | None = None
) -> list[Attempt]:
    """Run queued prediction attempts one after the other in this process (no workers).

    Each goes through the worker's own task body (claim, pipeline, run bookkeeping), called
    directly instead of through the broker.
    """
    from runs.workers.tasks import attempt_run

    done: list[Attempt] = []
    for index, attempt_id in enumerate(attempt_ids, start=1):
        attempt_run(attempt_id)
        attempt = Attempt.objects.select_related("task").get(pk=attempt_id)
        done.append(attempt)
        if progress is not None:
            progress(index, len(attempt_ids), attempt)
    return done
