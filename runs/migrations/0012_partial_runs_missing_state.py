"""Partial runs (issue 22): "not attempted" is an attempt status of its own, unknown usage is
NULL, and a run keeps where its date came from and what was imported, when and by whom.

Existing rows: attempts flagged ``is_missing`` (stored as finished TESTS_FAILED) become status
``missing`` with no reason, stage, grade, time or usage; an imported run's report-only
attempts (every usage figure zero) get NULL usage; a published run takes its date from the
metadata its import kept (``metadata.date``, ``metadata.inspect_created``) or is marked as of
unknown date (``date_source`` "unknown"), its source path, import time and user copied from
what the import kept.
"""

import datetime as dt

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

USAGE = ("cost_usd", "tokens_in", "tokens_out", "steps", "tool_calls")


def _metadata_date(snapshot: dict) -> tuple[str, dt.datetime] | None:
    metadata = snapshot.get("metadata") or {}
    for key, source in (("date", "metadata"), ("inspect_created", "inspect")):
        value = metadata.get(key)
        if not isinstance(value, str):
            continue
        try:
            when = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            continue
        return source, when if when.tzinfo else when.replace(tzinfo=dt.UTC)
    return None


def _check_now(schema_editor) -> None:
    """Run now the checks PostgreSQL defers to commit (the deferrable foreign keys, the stamps'
    constraint triggers) for the rows just written: this migration alters runs_attempt next, and
    PostgreSQL refuses to alter a table with pending trigger events."""
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("SET CONSTRAINTS ALL IMMEDIATE")


def forward(apps, schema_editor):
    Attempt = apps.get_model("runs", "Attempt")
    Run = apps.get_model("runs", "Run")
    Attempt.objects.filter(is_missing=True).update(
        status="missing",
        failure_reason=None,
        failure_stage="",
        grade="",
        is_infra=False,
        is_timeout=False,
        started_at=None,
        finished_at=None,
        duration_sec=None,
        **dict.fromkeys(USAGE),
    )
    Attempt.objects.filter(run__source="published", **{f: 0 for f in USAGE}).update(
        **dict.fromkeys(USAGE)
    )
    for run in Run.objects.filter(source="published"):
        snapshot = run.config_snapshot or {}
        run.source_path = str(snapshot.get("source_path") or snapshot.get("source_file") or "")
        run.imported_at = run.created_at
        run.imported_by_id = run.created_by_id
        dated = _metadata_date(snapshot)
        if dated is None:
            run.date_source = "unknown"
        else:
            run.date_source, when = dated
            run.started_at = run.finished_at = when
            Attempt.objects.filter(run=run, status="finished").update(
                started_at=when, finished_at=when
            )
        run.save(
            update_fields=[
                "source_path",
                "imported_at",
                "imported_by",
                "date_source",
                "started_at",
                "finished_at",
            ]
        )
    _check_now(schema_editor)


def backward(apps, schema_editor):
    Attempt = apps.get_model("runs", "Attempt")
    for attempt in Attempt.objects.filter(status="missing").select_related("run"):
        attempt.status = "finished"
        attempt.is_missing = True
        attempt.failure_reason_id = "TESTS_FAILED"
        attempt.failure_stage = "final_test"
        attempt.grade = "NO"
        attempt.finished_at = attempt.started_at = attempt.run.finished_at or attempt.queued_at
        attempt.save()
    for field in USAGE:
        Attempt.objects.filter(**{f"{field}__isnull": True}).update(**{field: 0})
    _check_now(schema_editor)


COVER = [
    "suite",
    "status",
    "model_config",
    "task",
    "is_infra",
    "failure_reason",
    "sample_index",
    "run",
    "finished_at",
    "cost_usd",
    "tokens_in",
    "tokens_out",
    "steps",
    "duration_sec",
]
RUN_RESULTS = [
    "suite",
    "run",
    "task",
    "status",
    "is_infra",
    "failure_reason",
    "cost_usd",
    "tokens_in",
    "tokens_out",
    "steps",
    "duration_sec",
]


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0011_pagecache_data_version"),
        ("tasks_app", "0002_swebuild_gold_validation"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AlterField(
            model_name="attempt",
            name="status",
            field=models.CharField(
                choices=[
                    ("queued", "Queued"),
                    ("running", "Running"),
                    ("finished", "Finished"),
                    ("skipped", "Skipped"),
                    ("cancelled", "Cancelled"),
                    ("not_evaluated", "Not evaluated"),
                    ("missing", "Not attempted"),
                ],
                default="queued",
                max_length=20,
            ),
        ),
        migrations.AlterField(
            model_name="attempt",
            name="cost_usd",
            field=models.DecimalField(
                blank=True, decimal_places=6, default=0, max_digits=12, null=True
            ),
        ),
        migrations.AlterField(
            model_name="attempt",
            name="steps",
            field=models.PositiveIntegerField(blank=True, default=0, null=True),
        ),
        migrations.AlterField(
            model_name="attempt",
            name="tokens_in",
            field=models.PositiveBigIntegerField(blank=True, default=0, null=True),
        ),
        migrations.AlterField(
            model_name="attempt",
            name="tokens_out",
            field=models.PositiveBigIntegerField(blank=True, default=0, null=True),
        ),
        migrations.AlterField(
            model_name="attempt",
            name="tool_calls",
            field=models.PositiveIntegerField(blank=True, default=0, null=True),
        ),
        migrations.AddField(
            model_name="run",
            name="date_source",
            field=models.CharField(
                choices=[
                    ("harness", "this harness's clock"),
                    ("metadata", "the folder's metadata.yaml"),
                    ("inspect", "the Inspect log's timestamps"),
                    ("trajectories", "the trajectories' timestamps"),
                    ("given", "given on import (--date)"),
                    ("unknown", "unknown (the import time)"),
                ],
                default="harness",
                max_length=20,
            ),
        ),
        migrations.AddField(
            model_name="run",
            name="imported_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="run",
            name="imported_by",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AddField(
            model_name="run",
            name="source_path",
            field=models.CharField(blank=True, max_length=1000),
        ),
        migrations.RunPython(forward, backward),
        migrations.RemoveIndex(model_name="attempt", name="attempt_results_cover_idx"),
        migrations.RemoveIndex(model_name="attempt", name="attempt_run_results_idx"),
        migrations.RemoveField(model_name="attempt", name="is_missing"),
        migrations.AddIndex(
            model_name="attempt",
            index=models.Index(fields=COVER, name="attempt_results_cover_idx"),
        ),
        migrations.AddIndex(
            model_name="attempt",
            index=models.Index(fields=RUN_RESULTS, name="attempt_run_results_idx"),
        ),
    ]
