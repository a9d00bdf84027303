"""One ``executemany`` INSERT for many model rows.

Django's ``bulk_create`` builds its SQL value by value, and SQLite's 999-parameter cap splits
500 rows of a 47-column table into 24 statements: most of an import's time. Here the statement
is built once and every row goes through the same field preparation Django itself applies
(``pre_save`` for auto-now fields, ``get_db_prep_save``), so new columns with defaults need no
change. Primary keys are not read back. Rows of one import repeat most values (the run, the
suite, the defaults), so a prepared scalar is reused for an equal value of the same type.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections, models, router


def insert_rows(objs: Sequence[models.Model], *, batch_size: int = 1000) -> None:
    """Insert ``objs`` (all of one model, not yet saved) in the current transaction."""
    if not objs:
        return
    model = type(objs[0])
    meta = model._meta
    # The router falls back to the default itself; typed optional.
    connection = connections[router.db_for_write(model) or DEFAULT_DB_ALIAS]
    fields = [
        f
        for f in meta.concrete_fields
        if not (f.primary_key and isinstance(f, models.AutoField | models.BigAutoField))
    ]
    quote = connection.ops.quote_name
    # A concrete field always has a column; django-stubs types it optional.
    columns = ", ".join(quote(f.column) for f in fields)  # type: ignore[arg-type]
    placeholders = ", ".join(["%s"] * len(fields))
    sql = f"INSERT INTO {quote(meta.db_table)} ({columns}) VALUES ({placeholders})"
    prepared: dict[tuple[str, type, Hashable], Any] = {}

    def prepare(field: models.Field, obj: models.Model) -> Any:
        value = field.pre_save(obj, True)
        if not isinstance(value, SCALARS):
            return field.get_db_prep_save(value, connection)
        key = (field.attname, type(value), value)
        if key not in prepared:
            prepared[key] = field.get_db_prep_save(value, connection)
        return prepared[key]

    with connection.cursor() as cursor:
        for start in range(0, len(objs), batch_size):
            rows = [[prepare(f, obj) for f in fields] for obj in objs[start : start + batch_size]]
            cursor.executemany(sql, rows)


# Immutable values whose database form depends only on the value (dicts and lists do not hash).
SCALARS = (str, int, float, bool, type(None), Decimal, datetime)
