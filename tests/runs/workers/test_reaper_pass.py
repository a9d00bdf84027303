"""The reaper's pass as every ``ab worker`` runs it: one holder of the lease at a time, and the
leftovers pass that removes what finished attempts and dead workers left on this machine."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import uuid
from pathlib import Path

import pytest
from django.utils import timezone

from runs import data_version
from runs.models import Attempt, AttemptStatus, Lease, ModelConfig, Run
from runs.workers.leftovers import (
    OWNER_FILE,
    attempt_sandbox_name,
    leftovers_remove,
    worker_dir_create,
)
from runs.workers.reaper import REAP_LEASE, lease_acquire, lease_release, reaper_pass

pytestmark = pytest.mark.django_db


def test_one_holder_at_a_time_until_its_lease_expires_or_is_released(db):
    assert lease_acquire("job", "w1:1", ttl_sec=30)
    assert lease_acquire("job", "w1:1", ttl_sec=30)  # renewed by its holder
    assert not lease_acquire("job", "w2:2", ttl_sec=30)
    Lease.objects.filter(name="job").update(expires_at=timezone.now() - dt.timedelta(seconds=1))
    assert lease_acquire("job", "w2:2", ttl_sec=30)  # the holder died: taken over
    assert not lease_acquire("job", "w1:1", ttl_sec=30)
    lease_release("job", "w1:1")  # not its lease: nothing changes
    assert not lease_acquire("job", "w1:1", ttl_sec=30)
    lease_release("job", "w2:2")
    assert lease_acquire("job", "w1:1", ttl_sec=30)
    assert Lease.objects.count() == 1


def test_renewing_the_lease_leaves_the_pages_cache_alone(db):
    lease_acquire("job", "w1:1", ttl_sec=30)
    before = data_version.current()
    for _ in range(3):
        lease_acquire("job", "w1:1", ttl_sec=30)
    assert data_version.current() == before


def test_a_pass_reaps_only_while_it_holds_the_lease(db, custom_dev, settings, tmp_path):
    settings.ARTIFACTS_ROOT = tmp_path
    config = ModelConfig.objects.create(name="scripted", agent_variant="scripted")
    run = Run.objects.create(suite=custom_dev, model_config=config, samples=1)
    stale = timezone.now() - dt.timedelta(hours=1)
    attempt = Attempt.objects.create(
        run=run,
        task=custom_dev.tasks.first(),
        suite=custom_dev,
        model_config=config,
        status=AttemptStatus.RUNNING,
        started_at=stale,
        heartbeat_at=stale,
        worker="gone@h:1",
        requeue_count=1,
    )
    assert lease_acquire(REAP_LEASE, "other:1", ttl_sec=30)
    reaper_pass(holder="me:2", ttl_sec=30)
    attempt.refresh_from_db()
    assert attempt.status == AttemptStatus.RUNNING  # another process holds the reap
    lease_release(REAP_LEASE, "other:1")
    reaper_pass(holder="me:2", ttl_sec=30)
    attempt.refresh_from_db()
    assert attempt.status == AttemptStatus.FINISHED
    assert attempt.error_text.startswith("[worker-lost]")


def test_the_leftovers_pass_removes_the_sandbox_files_of_final_attempts_only(
    db, custom_dev, settings, tmp_path
):
    from sandbox.accounts import ACCOUNTS_ROOT

    settings.ARTIFACTS_ROOT = tmp_path
    config = ModelConfig.objects.create(name="scripted", agent_variant="scripted")
    run = Run.objects.create(suite=custom_dev, model_config=config, samples=2)
    task = custom_dev.tasks.first()
    now = timezone.now()
    done, running = (
        Attempt.objects.create(
            run=run,
            task=task,
            suite=custom_dev,
            model_config=config,
            sample_index=i,
            status=status,
            finished_at=now if status == AttemptStatus.FINISHED else None,
        )
        for i, status in enumerate((AttemptStatus.FINISHED, AttemptStatus.RUNNING))
    )
    unknown = uuid.uuid4()  # an attempt of another database on this machine
    folders = {
        key: ACCOUNTS_ROOT / attempt_sandbox_name(public_id)
        for key, public_id in (
            ("done", done.public_id),
            ("running", running.public_id),
            ("unknown", unknown),
        )
    }
    try:
        for folder in folders.values():
            folder.mkdir(parents=True)
            (folder / "passwd").write_text("agent:x:64000:64000::/home/agent:/bin/sh\n")
        report = leftovers_remove()
        assert report.sandbox_files == [attempt_sandbox_name(done.public_id)]
        assert not folders["done"].exists()
        assert folders["running"].exists() and folders["unknown"].exists()
    finally:
        for folder in folders.values():
            subprocess.run(["rm", "-rf", str(folder)], check=False)


def test_the_leftovers_pass_removes_the_folders_of_dead_workers_only(db, settings, tmp_path):
    settings.ARTIFACTS_ROOT = tmp_path / "artifacts"
    os.environ["TMPDIR"], saved = str(tmp_path), os.environ.get("TMPDIR")
    import tempfile

    tempfile.tempdir = None  # read TMPDIR again
    try:
        mine = worker_dir_create()
        # A worker that was killed: its folder names a process that is gone.
        victim = subprocess.Popen(["sleep", "60"])
        started = Path(f"/proc/{victim.pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
        victim.kill()
        victim.wait()
        dead = tmp_path / f"ab-worker-{victim.pid}-x"
        dead.mkdir()
        (dead / OWNER_FILE).write_text(f"{victim.pid} {started}\n")
        (dead / "tmp" / "pymp-x").mkdir(parents=True)
        foreign = tmp_path / "ab-worker-notours"  # no owner file: not ours to judge
        foreign.mkdir()
        report = leftovers_remove()
        assert report.worker_dirs == [dead.name]
        assert not dead.exists()
        assert mine.exists() and (mine / OWNER_FILE).exists() and foreign.exists()
    finally:
        if saved is None:
            del os.environ["TMPDIR"]
        else:
            os.environ["TMPDIR"] = saved
        tempfile.tempdir = None


def test_a_handed_back_try_is_archived_without_an_outcome_it_never_had(
    client, alice, custom_dev, broker, settings, tmp_path
):
    from runs.workers.bookkeeping import attempts_hand_back

    settings.ARTIFACTS_ROOT = tmp_path
    config = ModelConfig.objects.create(name="scripted", agent_variant="scripted")
    run = Run.objects.create(suite=custom_dev, model_config=config, samples=1)
    attempt = Attempt.objects.create(
        run=run,
        task=custom_dev.tasks.first(),
        suite=custom_dev,
        model_config=config,
        status=AttemptStatus.RUNNING,
        started_at=timezone.now(),
        worker="w1@h:42",
    )
    assert attempts_hand_back(worker_node="w1@h") == [attempt.id]
    outcome = attempt.stages.get(name="try 1: outcome")
    assert "previous status running, reason none (stopped before an outcome)" in outcome.command
    client.force_login(alice)
    page = client.get(attempt.get_absolute_url()).content.decode()
    assert "reason none (stopped before an outcome)" in page
    assert "reason success" not in page and "$ worker w1@h:42 stopped" not in page
