"""A run's artifact folder is its own: runs created in the same second, and workers of one
run racing for its first attempt, end with exactly one folder per run."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from runs.models import Run
from runs.pipeline import artifacts
from tests.pages_fixtures import make_model, make_run, make_suite

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def root(settings, tmp_path):
    settings.ARTIFACTS_ROOT = tmp_path / "artifacts"
    return settings.ARTIFACTS_ROOT


def race(monkeypatch, runs: list[Run]) -> list:
    """``run_dir`` of each run in its own thread, all held together just before each stores
    its folder's name: every check or claim has happened, none has been stored yet."""
    barrier = threading.Barrier(len(runs), timeout=30)
    real = artifacts.relative

    def held(path):
        barrier.wait()
        return real(path)

    monkeypatch.setattr(artifacts, "relative", held)
    out: list = [None] * len(runs)

    def one(i: int, run: Run) -> None:
        try:
            out[i] = artifacts.run_dir(run)
        finally:
            connection.close()

    threads = [threading.Thread(target=one, args=(i, r)) for i, r in enumerate(runs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
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
