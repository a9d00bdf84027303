"""Each run's tallies and usage kept per run (runs/results/run_tallies.py, in the process and
stored in the database by runs/results/tally_store.py): after a write through any path (an
attempt finishing, a regrade, an import, a deleted attempt or run, a retry, the reaper, a
hand-back, a bulk update, raw SQL) every surface (leaderboard page, API, CSV, CLI, taxonomy)
shows the figure a fresh read of every attempt gives, and a write to one run rereads only that
run; a new process (the process's tier emptied) reads the stored rows, never a stale, corrupt or
foreign one. Transactional tests, so the cache is in use on PostgreSQL too (a reader inside a
transaction reads directly there): run this file with DATABASE_URL=postgres://... as well."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import sqlite3
import uuid
from datetime import timedelta

import pytest
from django.core.cache import caches
from django.db import connection, transaction
from django.test.utils import override_settings
from django.utils import timezone

from benchsite.cli.main import main as ab
from runs import data_version
from runs.imports.run_import import run_folder_import
from runs.lifecycle import attempt_finish
from runs.models import Attempt, AttemptStatus, Run, RunStatus, RunTally
from runs.pipeline.outcome import decide
from runs.pipeline.persist import AttemptResult
from runs.results import run_tallies, tally_store
from runs.results.selection import read_results
from runs.services import run_retry_infra
from runs.web import page_cache
from runs.workers.bookkeeping import attempts_hand_back, attempts_reap
from tasks_app.models import Suite, Task
from tasks_app.swebench.importer import swebench_import
from tests.support.pages_fixtures import make_attempt, make_model, make_run, make_suite, outcomes
from tests.support.partial_fixtures import MINI, PARTIAL, PARTIAL_IDS, SUITE, copy_reports

pytestmark = pytest.mark.django_db(transaction=True)

F, R, I = "TESTS_FAILED", None, "SANDBOX_ERROR"  # noqa: E741
FIELDS = ("rate", "resolved", "tasks", "pending", "attempted_rate", "missing", "mean_tokens")


@pytest.fixture(autouse=True)
def _fresh_tallies():
    run_tallies.clear()
    yield
    run_tallies.clear()


@pytest.fixture
def board():
    """Three models on four tasks; "live" has a running attempt (a worker's) and an infra
    failure, so every write path has something to change."""
    suite = make_suite("percache", tasks=4)
    outcomes(make_run(suite, make_model("steady")), [[R], [F], [R], [F]])
    outcomes(make_run(suite, make_model("other")), [[F], [F], [R], [R]])
    live = make_run(suite, make_model("live"), status=RunStatus.RUNNING)
    tasks = list(Task.objects.for_suite(suite).order_by("task_id"))
    make_attempt(live, tasks[0], R)
    make_attempt(live, tasks[1], I)
    make_attempt(live, tasks[2], F)
    make_attempt(
        live, tasks[3], status=AttemptStatus.RUNNING, worker="w1@h:1", started_at=timezone.now()
    )
    return suite, live


def picked(row: dict) -> tuple:
    values = [row[f] for f in FIELDS]
    return tuple(None if v in ("", None) else round(float(v), 9) for v in values)


def fresh(suite: Suite) -> dict[str, tuple]:
    """The figures from every attempt, read now (the per-run aggregates off)."""
    with override_settings(RESULTS_RUN_CACHE=False):
        return api_rows(suite)


def api_rows(suite: Suite) -> dict[str, tuple]:
    from django.test import Client

    rows = Client().get("/api/leaderboard", {"suite": suite.name}).json()["rows"]
    return {row["key"]: picked(row) for row in rows}


def everywhere(client, capsys, suite: Suite) -> dict[str, tuple]:
    """The figures of every row on the page, the API, the CSV and the CLI (asserted equal to a
    fresh read of every attempt), and each run's rate in the taxonomy's API."""
    want = fresh(suite)
    page = client.get(f"/suites/{suite.name}/leaderboard/")
    assert page.status_code == 200
    shown = {
        r.key: picked(
            {**{f: getattr(r.score, f, None) for f in FIELDS}, "mean_tokens": r.mean_tokens}
        )
        for r in page.context["board"].all_rows
    }
    assert shown == want, "page"
    assert api_rows(suite) == want, "API"
    text = client.get("/api/leaderboard.csv", {"suite": suite.name}).content.decode()
    assert {row["key"]: picked(row) for row in csv.DictReader(io.StringIO(text))} == want, "CSV"
    capsys.readouterr()
    assert ab(["leaderboard", suite.name, "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)["rows"]
    assert {row["key"]: picked(row) for row in cli} == want, "CLI"
    rates = {key.split("@")[1]: figures[0] for key, figures in want.items()}
    points = client.get("/api/taxonomy", {"suite": suite.name}).json()["points"]
    for point in points:
        rate = None if point["rate"] is None else round(float(point["rate"]), 9)
        assert rate == rates[point["run"][:8]], "taxonomy"
    return want


def row_of(figures: dict[str, tuple], model: str) -> tuple:
    return next(v for k, v in figures.items() if k.startswith(f"{model}@"))


def test_every_write_path_shows_on_every_surface_at_once(client, capsys, board):
    suite, live = board
    before = everywhere(client, capsys, suite)
    assert run_tallies.stats()["hits"] > 0, "the surfaces read the kept aggregates"

    def changed(what: str, model: str = "live") -> None:
        nonlocal before
        now = everywhere(client, capsys, suite)
        assert row_of(now, model) != row_of(before, model), what
        before = now

    running = Attempt.objects.get(run=live, status=AttemptStatus.RUNNING)
    attempt_finish(attempt=running, result=AttemptResult(verdict=decide([])))
    changed("an attempt finishing (pending -> resolved)")

    Attempt.objects.filter(run=live, failure_reason="TESTS_FAILED").update(failure_reason=None)
    changed("a regrade (a bulk update of the verdict)")

    retried = Attempt.objects.get(run=live, failure_reason="SANDBOX_ERROR")
    run_retry_infra(run=live)
    changed("a retry of the infrastructure failure (excluded -> pending)")

    old = timezone.now() - timedelta(seconds=600)
    # A worker claims it: still pending, so no figure moves, and none may be stale.
    Attempt.objects.filter(pk=retried.pk).update(
        status=AttemptStatus.RUNNING, worker="w1@h:1", started_at=old, heartbeat_at=old
    )
    before = everywhere(client, capsys, suite)
    Run.objects.filter(pk=live.pk).update(status=RunStatus.CANCELLED)
    assert attempts_hand_back(worker_node="w1@h") == []
    changed("a hand-back after the run ended (pending -> cancelled)")

    Run.objects.filter(pk=live.pk).update(status=RunStatus.RUNNING)
    Attempt.objects.filter(pk=retried.pk).update(
        status=AttemptStatus.RUNNING, started_at=old, heartbeat_at=old, requeue_count=9
    )
    changed("a bulk update back to running (cancelled -> pending)")
    assert attempts_reap(stale_after_sec=60, max_requeues=0).ended == [retried.pk]
    changed("the reaper ending a silent attempt (pending -> infrastructure failure)")

    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE runs_attempt SET tokens_out = tokens_out + 5000 WHERE run_id = %s", [live.pk]
        )
    changed("raw SQL on the usage")

    Attempt.objects.filter(run=live).order_by("id").first().delete()
    changed("a deleted attempt")

    steady = Run.objects.get(model_config__name="steady")
    steady.delete()
    now = everywhere(client, capsys, suite)
    assert not any(k.startswith("steady@") for k in now), "a deleted run"


def test_an_import_shows_on_every_surface(client, capsys, tmp_path, artifacts_root):
    swebench_import(source=MINI / "instances.jsonl", suite_name=SUITE)
    suite = Suite.objects.get(name=SUITE)
    outcomes(make_run(suite, make_model("own")), [[F], [R], [R]])
    before = everywhere(client, capsys, suite)
    run_folder_import(
        path=copy_reports(PARTIAL_IDS, tmp_path / "partial"), suite_name=SUITE, model_name=PARTIAL
    )
    after = everywhere(client, capsys, suite)
    assert len(after) == len(before) + 1 and row_of(after, "own") == row_of(before, "own")


def test_a_write_to_one_run_rereads_that_run_only(client, capsys, board):
    suite, live = board
    everywhere(client, capsys, suite)
    run_tallies.clear()
    tally_store.clear()
    read_results(suite=suite, usage=True)
    stats = run_tallies.stats()
    assert (stats["hits"], stats["misses"], stats["entries"]) == (0, 2 * 3, 2 * 3)
    read_results(suite=suite, usage=True)
    assert run_tallies.stats()["misses"] == 2 * 3, "nothing changed: nothing reread"
    Attempt.objects.filter(run=live).update(tokens_out=7)
    read_results(suite=suite, usage=True)
    assert run_tallies.stats()["misses"] == 2 * 3 + 2, "the written run's tallies and usage"


def test_a_rolled_back_write_never_gives_a_stamp_a_later_write_reuses(board):
    _, live = board
    stamp = lambda: Run.objects.annotate(s=run_tallies.stamp_sql()).get(pk=live.pk).s  # noqa: E731
    first = stamp()
    with pytest.raises(RuntimeError), transaction.atomic():
        Attempt.objects.filter(run=live).update(tokens_out=1)
        raise RuntimeError("rolled back")
    assert stamp() == first
    Attempt.objects.filter(run=live).update(tokens_out=2)
    assert stamp() not in (first, None)


def test_a_reader_inside_a_transaction_on_postgresql_reads_every_attempt(board):
    suite, live = board
    read_results(suite=suite)
    with transaction.atomic():
        Attempt.objects.filter(run=live).update(failure_reason=None, is_infra=False)
        # PostgreSQL stamps the run at commit: inside the transaction the kept tallies would
        # be stale, so they are not used there; SQLite stamps at once and keeps using them.
        assert run_tallies.enabled() == (connection.vendor != "postgresql")
        results = read_results(suite=suite)
        live_row = results.entry(f"{live.model_config.slug}@{str(live.public_id)[:8]}")
        assert results.score(live_row).resolved_attempts == 3


def test_it_keeps_no_more_than_its_byte_budget_and_still_reads_right(
    client, capsys, board, monkeypatch
):
    suite, live = board
    read_results(suite=suite, usage=True)
    full = run_tallies.stats()
    assert full["entries"] == 2 * 3 and full["bytes"] > 0
    # Room for about one entry: the least recently used ones go, the figures stay exact.
    monkeypatch.setattr(run_tallies, "MAX_BYTES", full["bytes"] // 5)
    run_tallies.clear()
    tally_store.clear()
    read_results(suite=suite, usage=True)
    small = run_tallies.stats()
    assert small["bytes"] <= full["bytes"] // 5 and 0 < small["entries"] < 2 * 3
    Attempt.objects.filter(run=live).update(tokens_out=9)
    everywhere(client, capsys, suite)


# --- the stored tier (runs/results/tally_store.py) ------------------------------------------


def new_process() -> None:
    """What a new web process, gunicorn worker or ``ab`` call starts with: nothing in memory
    (its own aggregates, its locmem page cache), the database as it is."""
    run_tallies.clear()
    caches[page_cache.CACHE_ALIAS].clear()


def stored_rows() -> dict[tuple[int, str], int]:
    return {(r.run_id, r.kind): r.stamp for r in RunTally.objects.all()}


def current_stamps() -> dict[int, int]:
    return dict(Run.objects.annotate(s=run_tallies.stamp_sql()).values_list("id", "s"))


def test_a_new_process_reads_the_stored_aggregates_and_shows_the_same_figures(
    client, capsys, board
):
    suite, _ = board
    before = everywhere(client, capsys, suite)
    stamps = current_stamps()
    assert stored_rows() == {(run, kind): stamps[run] for run in stamps for kind in KINDS}
    new_process()
    assert everywhere(client, capsys, suite) == before
    stats = run_tallies.stats()
    assert stats["misses"] == 0, "no attempt read again"
    assert stats["stored"] == len(stamps) * len(KINDS), "each run's two rows read once"


def test_storing_the_aggregates_leaves_the_page_cache_as_it_is(board):
    """The rows are written while a page is read: a write there must not count as new data."""
    suite, _ = board
    version = data_version.current()
    read_results(suite=suite, usage=True)
    assert len(stored_rows()) == 3 * len(KINDS)
    assert data_version.current() == version


KINDS = ("tallies", "usage")


def test_after_any_write_the_stored_row_is_not_used(client, capsys, board):
    suite, live = board
    before = everywhere(client, capsys, suite)
    victim = Attempt.objects.filter(run=live, failure_reason__isnull=True).first()

    def after(what: str, write, model: str = "live") -> None:
        nonlocal before
        new_process()
        write()
        new_process()
        now = everywhere(client, capsys, suite)  # equal to a fresh read of every attempt
        assert row_of(now, model) != row_of(before, model), what
        stats = run_tallies.stats()
        assert (stats["misses"], stats["stored"]) == (2, 2 * 2), f"{what}: one run reread"
        assert stored_rows() == {(r, k): s for r, s in current_stamps().items() for k in KINDS}
        before = now

    def save() -> None:
        victim.failure_reason_id = "TESTS_FAILED"
        victim.save()

    def bulk_create() -> None:
        copy = Attempt.objects.get(pk=victim.pk)
        copy.pk, copy.public_id, copy.sample_index = None, uuid.uuid4(), 1
        copy.tokens_out = 50_000  # a figure the new attempt moves (the mean tokens)
        Attempt.objects.bulk_create([copy])

    def raw_sql() -> None:
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE runs_attempt SET tokens_out = 99999 WHERE run_id = %s", [live.pk]
            )

    after("save()", save)
    after(
        "queryset.update()",
        lambda: Attempt.objects.filter(pk=victim.pk).update(failure_reason=None),
    )
    after("bulk_create", bulk_create)
    after("a deleted attempt", lambda: Attempt.objects.filter(sample_index=1).delete())
    after("raw SQL", raw_sql)

    steady = Run.objects.get(model_config__name="steady")
    steady.delete()
    new_process()
    assert not any(k.startswith("steady@") for k in everywhere(client, capsys, suite))
    assert not RunTally.objects.filter(run_id=steady.pk).exists(), "rows go with their run"


def test_a_corrupt_foreign_or_wrong_length_row_is_read_again_from_the_attempts(
    client, capsys, board
):
    suite, live = board
    before = everywhere(client, capsys, suite)
    steady = Run.objects.get(model_config__name="steady").pk
    other = Run.objects.get(model_config__name="other").pk
    rows = {(r.run_id, r.kind): r for r in RunTally.objects.all()}
    tallies = bytes(rows[live.pk, "tallies"].payload)
    # One resolved count more in the last task's row: decoded, that would be a wrong figure.
    at = len(tallies) - 8 * (len(run_tallies.COUNTS) - 1)
    bumped = (
        tallies[:at]
        + (int.from_bytes(tallies[at : at + 8], "little") + 1).to_bytes(8, "little")
        + tallies[at + 8 :]
    )
    spoiled = {
        (live.pk, "tallies"): bumped,
        (live.pk, "usage"): bytes(rows[live.pk, "usage"].payload)[:-8],  # wrong length
        (steady, "tallies"): bytes(rows[other, "tallies"].payload),  # another run's row
        (steady, "usage"): b"",
        (other, "usage"): bytes(rows[other, "usage"].payload) + b"\0" * 8,
    }
    for (run, kind), payload in spoiled.items():
        RunTally.objects.filter(run_id=run, kind=kind).update(payload=payload)
    new_process()
    assert everywhere(client, capsys, suite) == before
    stats = run_tallies.stats()
    assert (stats["misses"], stats["stored"]) == (len(spoiled), 6 - len(spoiled))
    # Read again and stored again: the next new process uses every row.
    new_process()
    assert everywhere(client, capsys, suite) == before
    assert run_tallies.stats()["misses"] == 0


def test_a_busy_writer_never_fails_the_request_and_nothing_is_stored(client, capsys, board):
    suite, _ = board
    tally_store.clear()
    new_process()
    setting = lock_setting()
    with writer_holding_the_table():
        everywhere(client, capsys, suite)  # the figures are right, every request succeeded
        assert not stored_rows(), "the write gave up instead of waiting"
    assert lock_setting() == setting, "the connection's own wait is set back"
    new_process()
    read_results(suite=suite, usage=True)
    assert len(stored_rows()) == 3 * len(KINDS), "once the writer is gone, rows are stored"


def test_with_the_run_cache_off_nothing_is_read_or_stored(board):
    suite, _ = board
    with override_settings(RESULTS_RUN_CACHE=False):
        read_results(suite=suite, usage=True)
    assert not stored_rows()
    read_results(suite=suite, usage=True)
    assert len(stored_rows()) == 3 * len(KINDS)
    new_process()
    with override_settings(RESULTS_RUN_CACHE=False):
        read_results(suite=suite, usage=True)
    assert run_tallies.stats()["stored"] == 0


def lock_setting() -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            "PRAGMA busy_timeout" if connection.vendor == "sqlite" else "SHOW lock_timeout"
        )
        return str(cursor.fetchone()[0])


@contextlib.contextmanager
def writer_holding_the_table():
    """Another connection in a write transaction that keeps others from writing the stored
    rows until it ends (SQLite: the database's write lock; PostgreSQL: a lock on the table)."""
    settings = connection.settings_dict
    if connection.vendor == "sqlite":
        name = settings["NAME"]
        other = sqlite3.connect(name, uri=str(name).startswith("file:"), timeout=0)
        other.isolation_level = None
        other.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            other.execute("ROLLBACK")
            other.close()
        return
    import psycopg

    with (
        psycopg.connect(
            dbname=settings["NAME"],
            user=settings["USER"],
            host=settings["HOST"],
            port=settings["PORT"] or None,
            password=settings["PASSWORD"] or None,
        ) as other,
        other.transaction(),
    ):
        other.execute("LOCK TABLE runs_runtally IN EXCLUSIVE MODE")
        yield
