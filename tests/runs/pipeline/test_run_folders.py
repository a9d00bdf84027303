"""A run's artifact folder is its own: runs created in the same second, and workers of one
run racing for its first attempt, end with exactly one folder per run."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from runs.models import Run
from runs.pipeline import artifacts
from tests.support.pages_fixtures import make_model, make_run, make_suite

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def root(settings, tmp_path):
    settings.ARTIFACTS_ROOT = tmp_path / "artifacts"
    return settings.ARTIFACTS_ROOT


def race(monkeypatch, runs: list[Run]) -> list:
    """``run_dir`` of each run in its own thread, all held together just before each stores
    its folder's name: every check or claim has happened, none has been stored yet."""
    barrier = threading.Barrier(len(runs), timeout=60)
    # Past the barrier the threads store one at a time: the test database is SQLite in
    # memory with a shared cache, whose table locks fail at once instead of waiting (a file
    # database or PostgreSQL would wait). The race under test is over by then: every check
    # or claim of a folder happened before the barrier.
    turn = threading.Lock()
    real_relative, real_folder_of = artifacts.relative, artifacts.folder_of

    def held(path):
        barrier.wait()
        turn.acquire()
        return real_relative(path)

    def stored(artifacts_dir):
        if turn.locked():  # only the thread holding it gets here
            turn.release()
        return real_folder_of(artifacts_dir)

    monkeypatch.setattr(artifacts, "relative", held)
    monkeypatch.setattr(artifacts, "folder_of", stored)
    out: list = [None] * len(runs)

    def one(i: int, run: Run) -> None:
        try:
            out[i] = artifacts.run_dir(run)
        except BaseException as exc:  # reported by the test, not lost in the thread
            out[i] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=one, args=(i, r)) for i, r in enumerate(runs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    errors = [o for o in out if isinstance(o, BaseException)]
    assert not errors, errors
    return out


def test_two_runs_created_in_the_same_second_never_share_a_folder(root, monkeypatch):
    suite, model = make_suite("same-second", tasks=1), make_model("twin")
    first, second = make_run(suite, model), make_run(suite, model)
    Run.objects.filter(pk=second.pk).update(created_at=first.created_at)
    second.refresh_from_db()
    assert artifacts.run_folder_name(first) == artifacts.run_folder_name(second)

    a, b = race(monkeypatch, [first, second])

    assert a != b and a.is_dir() and b.is_dir()
    stored = set(Run.objects.values_list("artifacts_dir", flat=True))
    assert len(stored) == 2
    assert sorted(p.name for p in root.iterdir()) == sorted(p.name for p in (a, b))


def test_workers_of_one_run_agree_on_its_folder_and_leave_no_other(root, monkeypatch):
    run = make_run(make_suite("one-run", tasks=1), make_model("solo"))
    copies = [Run.objects.get(pk=run.pk) for _ in range(2)]

    a, b = race(monkeypatch, copies)

    assert a == b
    assert [p.name for p in root.iterdir()] == [a.name]
