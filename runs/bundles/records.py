"""Rows as JSON records and back: every concrete field by its column name, values as Django's
JSON encoder writes them, read back through each field's own ``to_python``. One place for
what an export leaves out (keys of this database, worker bookkeeping)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import models

# Columns that only mean something in the database that wrote them.
LOCAL = frozenset(
    {
        "id",
        "run_id",
        "task_id",
        "suite_id",
        "model_config_id",
        "attempt_id",
        "created_by_id",
        "imported_by_id",
        "artifacts_dir",
        "celery_task_id",
        "worker",
        "requeue_count",
        "heartbeat_at",
        "source_path",
    }
)


def record(obj: models.Model, *, leave_out: Iterable[str] = ()) -> dict[str, Any]:
    """``obj``'s columns (``failure_reason_id`` as ``failure_reason``), encodable as JSON."""
    skip = LOCAL | set(leave_out)
    out: dict[str, Any] = {}
    for field in obj._meta.concrete_fields:
        name = field.attname
        if name == "failure_reason_id":
            out["failure_reason"] = getattr(obj, name)
        elif name == "task_id" and obj._meta.model_name == "task":
            out["task_id"] = obj.task_id  # type: ignore[attr-defined]  # the instance id
        elif name not in skip:
            out[name] = getattr(obj, name)
    return out


def dumps(data: Any) -> bytes:
    return json.dumps(data, cls=DjangoJSONEncoder, indent=1, sort_keys=True).encode()


def jsonl(items: Iterable[dict]) -> bytes:
    return b"".join(
        json.dumps(item, cls=DjangoJSONEncoder, sort_keys=True).encode() + b"\n" for item in items
    )


def fields_of(model: type[models.Model], data: dict[str, Any], *, keep: Iterable[str] = ()):
    """The values of ``data`` that ``model`` has columns for, each as its field reads it;
    ``keep`` names keys passed as they are (foreign keys given by the caller)."""
    kept = set(keep)
    columns = {f.attname: f for f in model._meta.concrete_fields}
    out: dict[str, Any] = {}
    for name, value in data.items():
        if name in kept:
            out[name] = value
        elif name in columns and name not in LOCAL | {"task_id"} and name != "id":
            field = columns[name]
            out[name] = value if isinstance(field, models.JSONField) else field.to_python(value)
    return out
