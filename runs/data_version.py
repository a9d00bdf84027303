"""A stamp that changes with every committed write to the tables the results pages read.

The results pages cache their data-heavy HTML per stamp (``runs.web.page_cache``), so the stamp
must change on *any* write: the ORM's ``save()``, ``queryset.update()`` and ``bulk_create``
(which send no signals), raw SQL, another program on the same database. Database triggers
give that: every INSERT, UPDATE and DELETE (and TRUNCATE on PostgreSQL) on a watched table
adds one to a one-row counter, ``runs_pagecache_version``, inside the writing transaction,
so a reader sees the new stamp exactly when it sees the new rows, and a rolled-back write
changes nothing.

Watched: every table of the ``runs`` and ``tasks_app`` apps (attempts, stages, runs, model
configurations, failure reasons, suites, tasks, task revisions, gold validations), read from
the app registry, so a model added later is watched too; only the reaper's lease and the
stored per-run aggregates are not (``UNWATCHED_TABLES``). The triggers are (re)installed after
every ``migrate`` (``install``, connected to ``post_migrate`` in ``runs.apps``): SQLite drops a
table's triggers when a migration rebuilds the table, which it does for most field changes.

**Per run.** A write to an attempt also gives its run (both runs, for an attempt moved between
runs) a new random stamp in ``runs_run_results_stamp``, in the same transaction, so the per-run
aggregates the pages read (``runs.results.run_tallies``) are reread for that run only: a live
run invalidates its own tallies, not the other runs'. Random, not counted: a rolled-back write
(a test's transaction) leaves a stamp that a later, different write never gets again.

PostgreSQL: the trigger is a deferred constraint trigger that bumps once per transaction, at
commit. An immediate trigger would lock the counter row from the first write to the commit,
so two workers' transactions that also lock attempts or runs could deadlock on it; at commit
a transaction takes no other lock after the counter's. The per-run trigger takes the counter's
lock before any run's stamp (one function does both, the counter first), so two transactions
stamping the same runs in different orders queue on the counter instead of deadlocking.
SQLite serialises writers anyway, and its triggers run per row (a cheap update of one row).
"""

from __future__ import annotations

import hashlib
import random

from django.apps import apps
from django.db import connections

TABLE = "runs_pagecache_version"
WATCHED_APPS = ("runs", "tasks_app")
TRIGGER_PREFIX = "pagecache_bump"
_OPS = ("INSERT", "UPDATE", "DELETE")

CREATE_TABLE = f"CREATE TABLE {TABLE} (id integer PRIMARY KEY, stamp bigint NOT NULL)"
DROP_TABLE = f"DROP TABLE {TABLE}"

PG_FUNCTION = f"""
CREATE OR REPLACE FUNCTION {TRIGGER_PREFIX}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  -- Once per transaction (the setting is transaction-local), however many rows it wrote.
  IF current_setting('agentbench.pagecache_bumped', true) IS DISTINCT FROM 'on' THEN
    UPDATE {TABLE} SET stamp = stamp + 1 WHERE id = 1;
    PERFORM set_config('agentbench.pagecache_bumped', 'on', true);
  END IF;
  RETURN NULL;
END $$"""
PG_DROP_FUNCTION = f"DROP FUNCTION IF EXISTS {TRIGGER_PREFIX}() CASCADE"

# Each run's stamp: a new random number at every committed write to one of its attempts.
RUN_TABLE = "runs_run_results_stamp"
RUN_TABLE_OF = "runs_attempt"  # the rows whose writes stamp their run
CREATE_RUN_TABLE = f"CREATE TABLE {RUN_TABLE} (run_id bigint PRIMARY KEY, stamp bigint NOT NULL)"
DROP_RUN_TABLE = f"DROP TABLE {RUN_TABLE}"
PG_RANDOM = "floor(random() * 9e15)::bigint"
PG_RUN_FUNCTION = f"""
CREATE OR REPLACE FUNCTION {TRIGGER_PREFIX}_run() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  rid bigint;
  runs bigint[];
BEGIN
  -- The counter first (its lock before any run's: no deadlock between two transactions).
  IF current_setting('agentbench.pagecache_bumped', true) IS DISTINCT FROM 'on' THEN
    UPDATE {TABLE} SET stamp = stamp + 1 WHERE id = 1;
    PERFORM set_config('agentbench.pagecache_bumped', 'on', true);
  END IF;
  IF TG_OP = 'TRUNCATE' THEN
    UPDATE {RUN_TABLE} SET stamp = {PG_RANDOM};
    RETURN NULL;
  ELSIF TG_OP = 'INSERT' THEN
    runs := ARRAY[NEW.run_id];
  ELSIF TG_OP = 'DELETE' THEN
    runs := ARRAY[OLD.run_id];
  ELSE
    runs := ARRAY[OLD.run_id, NEW.run_id];
  END IF;
  FOREACH rid IN ARRAY runs LOOP
    -- Once per run and transaction, however many of its attempts the transaction wrote.
    IF current_setting('agentbench.run_stamped_' || rid, true) IS DISTINCT FROM 'on' THEN
      INSERT INTO {RUN_TABLE} (run_id, stamp) VALUES (rid, {PG_RANDOM})
        ON CONFLICT (run_id) DO UPDATE SET stamp = EXCLUDED.stamp;
      PERFORM set_config('agentbench.run_stamped_' || rid, 'on', true);
    END IF;
  END LOOP;
  RETURN NULL;
END $$"""
PG_DROP_RUN_FUNCTION = f"DROP FUNCTION IF EXISTS {TRIGGER_PREFIX}_run() CASCADE"


def _watched_models():
    for label in WATCHED_APPS:
        yield from apps.get_app_config(label).get_models(include_auto_created=True)


# Written by the workers' own bookkeeping every few seconds and shown by no page: the reaper's
# lease (runs.models.Lease). A write there must not empty the pages' cache. Nor may the stored
# per-run aggregates (runs.models.RunTally), which a page writes as it reads them.
UNWATCHED_TABLES = {"runs_lease", "runs_runtally"}


def watched_tables() -> list[str]:
    """Every table of the watched apps' models, many-to-many tables included."""
    return sorted(
        {
            m._meta.db_table
            for m in _watched_models()
            if m._meta.managed and not m._meta.proxy and m._meta.db_table not in UNWATCHED_TABLES
        }
    )


# Written every second by a running attempt's heartbeat, and shown by no page: an UPDATE that
# changes only these keeps the stamp (and the pages' cache) as it is.
UNSHOWN_COLUMNS = {"runs_attempt": ("heartbeat_at",)}


def _columns(table: str) -> list[str]:
    model = next((m for m in _watched_models() if m._meta.db_table == table), None)
    return [f.column for f in model._meta.concrete_fields] if model else []


def _trigger_sql(vendor: str, table: str) -> list[tuple[str, str]]:
    """(trigger name, CREATE statement) for ``table``. The name ends with a hash of the
    statement, so a changed statement (a column added) replaces the old trigger."""
    unshown = UNSHOWN_COLUMNS.get(table, ())
    made: list[tuple[str, str]] = []
    if vendor == "sqlite":
        bump = f"UPDATE {TABLE} SET stamp = stamp + 1 WHERE id = 1;"
        for op in _OPS:
            when = ""
            if op == "UPDATE" and unshown:
                shown = [c for c in _columns(table) if c not in unshown]
                when = " WHEN " + " OR ".join(f'OLD."{c}" IS NOT NEW."{c}"' for c in shown)
            made.append(
                (op.lower(), f'AFTER {op} ON "{table}" FOR EACH ROW{when} BEGIN {bump} END')
            )
            if table == RUN_TABLE_OF:
                rows = {"INSERT": ("NEW",), "DELETE": ("OLD",), "UPDATE": ("OLD", "NEW")}[op]
                stamp = " ".join(
                    f"INSERT OR REPLACE INTO {RUN_TABLE} (run_id, stamp)"
                    f" VALUES ({row}.run_id, random());"
                    for row in rows
                )
                made.append(
                    (
                        f"run_{op.lower()}",
                        f'AFTER {op} ON "{table}" FOR EACH ROW{when} BEGIN {stamp} END',
                    )
                )
        named = [(_name(table, kind, body), body) for kind, body in made]
        return [(name, f'CREATE TRIGGER "{name}" {body}') for name, body in named]
    if vendor == "postgresql":
        run = f"EXECUTE FUNCTION {TRIGGER_PREFIX}()"
        deferred = "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW"
        when = ""
        if unshown:
            drop = "ARRAY[" + ", ".join(f"'{c}'" for c in unshown) + "]"
            when = f" WHEN ((to_jsonb(OLD) - {drop}) IS DISTINCT FROM (to_jsonb(NEW) - {drop}))"
        pg = [
            ("rows", f'AFTER INSERT OR DELETE ON "{table}" {deferred} {run}', "CONSTRAINT "),
            ("update", f'AFTER UPDATE ON "{table}" {deferred}{when} {run}', "CONSTRAINT "),
            ("truncate", f'AFTER TRUNCATE ON "{table}" FOR EACH STATEMENT {run}', ""),
        ]
        if table == RUN_TABLE_OF:
            fn = f"EXECUTE FUNCTION {TRIGGER_PREFIX}_run()"
            pg += [
                ("run_rows", f'AFTER INSERT OR DELETE ON "{table}" {deferred} {fn}', "CONSTRAINT "),
                ("run_update", f'AFTER UPDATE ON "{table}" {deferred}{when} {fn}', "CONSTRAINT "),
                ("run_truncate", f'AFTER TRUNCATE ON "{table}" FOR EACH STATEMENT {fn}', ""),
            ]
        named_pg = [(_name(table, kind, body), body, c) for kind, body, c in pg]
        return [(name, f'CREATE {c}TRIGGER "{name}" {body}') for name, body, c in named_pg]
    return []


def _stamps_runs(sql: str) -> bool:
    return RUN_TABLE in sql or f"{TRIGGER_PREFIX}_run()" in sql


def _name(table: str, kind: str, body: str) -> str:
    digest = hashlib.sha1(body.encode()).hexdigest()
    name = f"{TRIGGER_PREFIX}_{table}_{kind}_{digest[:8]}"
    return (
        name if len(name) <= 63 else f"{TRIGGER_PREFIX}_{kind}_{digest[:24]}"
    )  # PostgreSQL's limit


def installed_triggers(using: str = "default") -> set[tuple[str, str]]:
    """(table, trigger name) of the bump triggers present in the database."""
    connection = connections[using]
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute(
                "SELECT tbl_name, name FROM sqlite_master WHERE type = 'trigger' AND name LIKE %s",
                [f"{TRIGGER_PREFIX}%"],
            )
        elif connection.vendor == "postgresql":
            cursor.execute(
                "SELECT c.relname, t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid"
                " WHERE t.tgname LIKE %s",
                [f"{TRIGGER_PREFIX}%"],
            )
        else:
            return set()
        return {(table, name) for table, name in cursor.fetchall()}


def install(using: str = "default") -> int:
    """Create the counter row and the missing triggers, drop outdated ones; returns how many
    triggers it created or dropped. Idempotent; another database vendor gets none (``current``
    then answers None)."""
    connection = connections[using]
    vendor = connection.vendor
    if vendor not in ("sqlite", "postgresql"):
        return 0
    present = installed_triggers(using)
    existing = set(connection.introspection.table_names())
    if TABLE not in existing:
        return 0  # migrations not applied this far yet
    per_run = RUN_TABLE in existing
    expected = {
        (table, name): sql
        for table in watched_tables()
        if table in existing
        for name, sql in _trigger_sql(vendor, table)
        # The per-run stamps' triggers once their table exists (a migration before it: none).
        if per_run or not _stamps_runs(sql)
    }
    changed = 0
    with connection.cursor() as cursor:
        if vendor == "postgresql":
            cursor.execute(PG_FUNCTION)
            if per_run:
                cursor.execute(PG_RUN_FUNCTION)
        for table, name in present - set(expected):
            on = f' ON "{table}"' if vendor == "postgresql" else ""
            cursor.execute(f'DROP TRIGGER IF EXISTS "{name}"{on}')
            changed += 1
        for (table, name), sql in expected.items():
            if (table, name) not in present:
                cursor.execute(sql)
                changed += 1
    _ensure_row(using)
    if per_run:
        _ensure_run_rows(using)
    return changed


def _ensure_run_rows(using: str) -> None:
    """A stamp for every run written before the triggers were there (a run without one is
    read without the per-run cache until its next write)."""
    connection = connections[using]
    rand = "random()" if connection.vendor == "sqlite" else PG_RANDOM
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {RUN_TABLE} (run_id, stamp) SELECT id, {rand} FROM runs_run"
            f" WHERE id NOT IN (SELECT run_id FROM {RUN_TABLE})"
        )


def _ensure_row(using: str) -> None:
    """The counter row, starting from a random stamp: a database that was emptied and refilled
    (a test's flush) never gives a stamp already used for other data in a shared cache."""
    with connections[using].cursor() as cursor:
        cursor.execute(f"SELECT 1 FROM {TABLE} WHERE id = 1")
        if cursor.fetchone() is None:
            cursor.execute(
                f"INSERT INTO {TABLE} (id, stamp) VALUES (1, %s) ON CONFLICT (id) DO NOTHING",
                [random.getrandbits(48)],
            )


def current(using: str = "default") -> int | None:
    """The stamp now: one read of one row. None on a database vendor without the triggers:
    callers then do not cache."""
    connection = connections[using]
    if connection.vendor not in ("sqlite", "postgresql"):
        return None
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT stamp FROM {TABLE} WHERE id = 1")
        row = cursor.fetchone()
    if row is None:
        # The counter row was deleted (a hand-made reset): start again from a random stamp.
        _ensure_row(using)
        return current(using)
    return int(row[0])
