"""Each run's per-task tallies and usage sums, kept in this process and in the database, and
reused until that run's attempts change.

The results pages (leaderboard, compare, taxonomy, run page) and the API, CSV and CLI read a
suite's tallies through ``runs.results.selection.read_results``; without this, each request
scans every attempt of the suite twice (tallies, usage), and during a live run every request
is a miss of the page cache. Here a run's aggregates are kept under its stamp
(``runs.data_version``: a new random number with every committed write to one of its attempts,
set by database triggers, so ``save()``, ``queryset.update()``, ``bulk_create``, deletes, raw
SQL and other programs all count), and a request rereads only the attempts of the runs whose
stamp changed.

Two tiers: this process's memory (least recently used out past ``MAX_BYTES``), then the
database (``runs.results.tally_store``: one row per run and kind, read in one query for the runs
this process does not hold, written when a run is read from its attempts), so the first request
of a new web process, of each gunicorn worker and of each ``ab`` call reads stored aggregates
instead of every attempt. Both key by the stamp: a row of an older stamp is never used.

Exactness: the stamps are read before the attempts, so an entry never holds data older than its
stamp. A run without a stamp row (written before the triggers existed) is read and not kept.
On PostgreSQL the stamps change at commit, so a reader inside a transaction (which may hold
its own uncommitted writes) reads everything directly. Date filters read directly too (they
cut a run's attempts by when each finished); labels only narrow the tasks, so tallies kept per
task serve them, and usage (kept per run) is read directly under a label filter.

``RESULTS_RUN_CACHE=false`` turns both tiers off (nothing read from or written to the table).
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, Generic, TypeVar

import numpy as np
from django.conf import settings
from django.db import connections
from django.db.models.expressions import RawSQL

from runs import data_version
from runs.results import tally_store
from runs.results.scoring import COUNTS

# Kept per process, the least recently used dropped first past this many bytes: a run's tallies
# take 56 bytes a task it has attempts on (28 KB for 500 tasks), its usage sums a few hundred.
MAX_BYTES = 64 * 1024 * 1024

V = TypeVar("V")

_store: OrderedDict[tuple, tuple[object, int]] = OrderedDict()  # key -> (value, bytes)
_lock = threading.Lock()
_stats = {"hits": 0, "stored": 0, "misses": 0, "bytes": 0}


@dataclasses.dataclass(frozen=True)
class RunRows:
    """One run's attempts by task: ``task_ids[i]`` has the counts ``counts[i]`` (in the order
    of ``runs.results.scoring.COUNTS``)."""

    task_ids: np.ndarray  # int64
    counts: np.ndarray  # int64, shape (len(task_ids), len(COUNTS))


# A run's tallies in the database: the two arrays' bytes, for this order of COUNTS only.
ROWS: tally_store.Codec[RunRows] = tally_store.ArraysCodec(
    COUNTS, RunRows, lambda rows: (rows.task_ids, rows.counts)
)


def enabled(using: str = "default") -> bool:
    if not getattr(settings, "RESULTS_RUN_CACHE", True):
        return False
    connection = connections[using]
    if connection.vendor not in ("sqlite", "postgresql"):
        return False
    # PostgreSQL stamps at commit: inside a transaction the rows may already be newer.
    return not (connection.vendor == "postgresql" and connection.in_atomic_block)


def stamp_sql() -> RawSQL:
    """The run's stamp as an annotation of a ``Run`` query (NULL: no stamp row)."""
    return RawSQL(
        f'SELECT s.stamp FROM {data_version.RUN_TABLE} s WHERE s.run_id = "runs_run"."id"', ()
    )


def clear() -> None:
    """Forget every entry of this process (as a new process starts; a test's reset). The
    stored tier stays: ``tally_store.clear`` empties that."""
    with _lock:
        _store.clear()
        _stats.update(hits=0, stored=0, misses=0, bytes=0)


def stats() -> dict[str, int]:
    with _lock:
        return dict(_stats, entries=len(_store))


@dataclasses.dataclass(frozen=True)
class Kind(Generic[V]):
    """One kind of per-run aggregate: ``read(run ids)`` computes it from the attempts (runs
    absent from its answer get ``default``), ``codec`` stores it."""

    name: str
    read: Callable[[list[int]], Mapping[int, V]]
    default: V
    codec: tally_store.Codec[V]


def cached(
    kinds: Sequence[Kind[Any]], *, using: str, suite_id: int, stamps: Mapping[int, int | None]
) -> list[dict[int, Any]]:
    """Each kind's value for each run of ``stamps`` (run id -> stamp read before the rows), in
    the order of ``kinds``: the ones this process keeps, then the ones stored in the database
    under the same stamp (one query for every kind), and ``read`` for the others, kept and
    stored under their stamp (one write for every kind)."""
    database = connections[using].settings_dict.get("NAME")
    stamped = {run: stamp for run, stamp in stamps.items() if stamp is not None}

    def key(kind: Kind[Any], run: int) -> tuple:
        return (kind.name, using, str(database), suite_id, run, stamped[run])

    outs: list[dict[int, Any]] = [{} for _ in kinds]
    with _lock:
        for kind, out in zip(kinds, outs, strict=True):
            for run in stamped:
                if key(kind, run) in _store:
                    _store.move_to_end(key(kind, run))
                    out[run] = _store[key(kind, run)][0]
            _stats["hits"] += len(out)
    wanted = {run for run in stamped if any(run not in out for out in outs)}
    stored = tally_store.load(
        {kind.name: kind.codec for kind in kinds},
        using=using,
        stamps={run: stamped[run] for run in wanted},
    )
    fresh: dict[str, tuple[tally_store.Codec[Any], dict[int, tuple[int, Any]]]] = {}
    for kind, out in zip(kinds, outs, strict=True):
        found = {run: v for run, v in stored[kind.name].items() if run not in out}
        out.update(found)
        missing = [run for run in stamps if run not in out]
        read = kind.read(missing) if missing else {}
        with _lock:
            _stats["stored"] += len(found)
            _stats["misses"] += len(missing)
            for run in missing:
                out[run] = read.get(run, kind.default)
            for run in [*found, *missing]:
                if run in stamped and key(kind, run) not in _store:
                    size = _size(out[run])
                    _store[key(kind, run)] = (out[run], size)
                    _stats["bytes"] += size
            while _stats["bytes"] > MAX_BYTES and _store:
                _stats["bytes"] -= _store.popitem(last=False)[1][1]
        fresh[kind.name] = (
            kind.codec,
            {run: (stamped[run], out[run]) for run in missing if run in stamped},
        )
    tally_store.save(fresh, using=using)
    return outs


def _size(value: object) -> int:
    if isinstance(value, RunRows):
        return 200 + value.task_ids.nbytes + value.counts.nbytes
    return 400


def run_rows(rows: Iterable[tuple[int, tuple[int, ...], str]]) -> dict[int, RunRows]:
    """``RunRows`` per run from (run id, counts, comma-separated task ids) groups: every
    group's task ids parsed in one go, then one selection per run."""
    rows = list(rows)
    if not rows:
        return {}
    texts = [str(ids) for _, _, ids in rows]
    ids = np.array(",".join(texts).split(","), dtype=np.int64)
    group = np.repeat(np.arange(len(rows)), [t.count(",") + 1 for t in texts])
    counts = np.array([c for _, c, _ in rows], dtype=np.int64)[group]
    runs = np.array([r for r, _, _ in rows], dtype=np.int64)[group]
    out = {}
    for run in dict.fromkeys(r for r, _, _ in rows):
        mine = runs == run
        out[run] = RunRows(ids[mine], counts[mine])
    return out


def scatter(rows: RunRows, keys: Collection[int], position: np.ndarray) -> np.ndarray | None:
    """The run's counts over a task index (``position[task pk]`` = column, -1 when the task is
    not in it), or None when none of its attempts is on a task of the index."""
    ids = rows.task_ids
    known = ids < len(position)
    at = np.where(known, position[np.where(known, ids, 0)], -1)
    keep = at >= 0
    if not keep.any():
        return None
    out = np.zeros((rows.counts.shape[1], len(keys)), dtype=np.int64)
    out[:, at[keep]] = rows.counts[keep].T
    return out
