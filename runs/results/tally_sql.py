"""The SQL that tallies attempts by run and task: one grouped query whatever their number.

``runs.results.selection`` reads a selection's tallies with it, and ``runs.results.run_tallies``
keeps them per run; ``runs.results.scoring`` does the arithmetic.
"""

from __future__ import annotations

import numpy as np
from django.db import connections
from django.db.models import Count, Q, QuerySet

from runs.models import Attempt
from runs.results.scoring import (
    COUNTS,
    FINAL_STATUSES,
    FINISHED,
    MISSING,
    NOT_EVALUATED,
    UNRUN_STATUSES,
    Tallies,
    TaskIndex,
)

# Each attempt's class as one number: a digit (base 2^10) per count of ``scoring.COUNTS``, so
# one SUM per run x task gives every count at once (a single CASE a row: twice as fast as a
# filtered COUNT per count on SQLite). Exact while a run has fewer than 1,024 attempts on one
# task; ``read_results`` checks the runs' samples.
BASE = 1 << 10
DIGIT = {name: BASE**i for i, name in enumerate(COUNTS)}
CLASS_SQL = (
    f"CASE status WHEN '{FINISHED}' THEN CASE WHEN is_infra THEN {DIGIT['excluded']} "
    f"WHEN failure_reason_id IS NULL THEN {DIGIT['scored'] + DIGIT['resolved']} "
    f"ELSE {DIGIT['scored']} END "
    f"WHEN '{MISSING}' THEN {DIGIT['missing']} "
    + "".join(f"WHEN '{s}' THEN {DIGIT['excluded']} " for s in sorted(UNRUN_STATUSES))
    + f"WHEN '{NOT_EVALUATED}' THEN {DIGIT['pending'] + DIGIT['not_evaluated']} "
    f"ELSE {DIGIT['pending']} END"
)


def grouped_rows(attempts: QuerySet[Attempt]) -> list[tuple[int, int, str]]:
    """(run id, class sum, comma-separated task ids) groups, in one query.

    The inner query sums each attempt's class (``CLASS_SQL``: ``runs.results.scoring.classify``
    written in SQL) by run x task (in the order of ``attempt_run_results_idx``, so without a
    sort); the outer one groups those by run x sum and lists the tasks of each group, so a few
    hundred rows reach Python however many attempts there are.
    """
    sql, params = attempts.order_by().values_list("run_id", "task_id").query.sql_with_params()
    connection = connections[attempts.db]
    if connection.vendor == "postgresql":
        task_list = "STRING_AGG(CAST(task_id AS TEXT), ',')"
        summed = f"SUM({CLASS_SQL})::bigint"
    else:
        task_list = "GROUP_CONCAT(task_id)"
        summed = f"SUM({CLASS_SQL})"
    select, _, rest = sql.partition(" FROM ")
    grouped = f"{select}, {summed} AS code FROM {rest} GROUP BY 1, 2"
    outer = f"SELECT run_id, code, {task_list} FROM ({grouped}) per_task GROUP BY run_id, code"
    with connection.cursor() as cursor:
        cursor.execute(outer, params)
        return cursor.fetchall()


def decode(code: int) -> tuple[int, ...]:
    return tuple((code >> (10 * i)) & (BASE - 1) for i in range(len(COUNTS)))


def tables(index: TaskIndex[int], rows) -> dict[int, Tallies]:
    """``Tallies`` per run from (run id, counts, comma-separated task ids) groups: every group's
    task ids parsed in one go, then one scatter per run."""
    rows = list(rows)
    tables: dict[int, Tallies] = {}
    if not rows:
        return tables
    position = np.full(max(index.keys, default=0) + 1, -1, dtype=np.int64)
    position[list(index.keys)] = np.arange(len(index))
    texts = [str(ids) for _, _, ids in rows]
    ids = np.array(",".join(texts).split(","), dtype=np.int64)
    group = np.repeat(np.arange(len(rows)), [t.count(",") + 1 for t in texts])
    counts = np.array([c for _, c, _ in rows], dtype=np.int64)  # (groups, len(COUNTS))
    known = ids < len(position)
    at = np.where(known, position[np.where(known, ids, 0)], -1)
    keep = at >= 0
    runs = np.array([r for r, _, _ in rows], dtype=np.int64)[group]
    for run_id in dict.fromkeys(r for r, _, _ in rows):
        table = tables[run_id] = Tallies.empty(index)
        mine = keep & (runs == run_id)
        table.counts[:, at[mine]] = counts[group[mine]].T
    return tables


def grouped_tallies_counted(
    attempts: QuerySet[Attempt], index: TaskIndex[int]
) -> dict[int, Tallies]:
    """The same tallies counted one filter per count: for runs with 1,024+ samples a task."""
    scored = Q(status=FINISHED, is_infra=False)
    # The ignore: django-stubs takes the annotation "resolved" in values_list() rows for a
    # redefinition of the model's property of that name; the rows are tuples, no Attempt.
    rows = (
        attempts.order_by()  # type: ignore[no-redef]
        .values_list("run_id", "task_id")
        .annotate(
            scored=Count("id", filter=scored),
            resolved=Count("id", filter=scored & Q(failure_reason__isnull=True)),
            excluded=Count(
                "id",
                filter=Q(status=FINISHED, is_infra=True) | Q(status__in=list(UNRUN_STATUSES)),
            ),
            pending=Count("id", filter=~Q(status__in=list(FINAL_STATUSES))),
            not_evaluated=Count("id", filter=Q(status=NOT_EVALUATED)),
            missing=Count("id", filter=Q(status=MISSING)),
        )
    )
    return tables(index, ((run, counts, str(task)) for run, task, *counts in rows))
