"""No queued work is lost when the broker loses its messages, on every broker we support.

The reaper sends again the message of each queued attempt that waited past the stale threshold
while the broker's queue is empty. On Redis the empty queue has no key at all (Redis deletes an
empty list, and a restarted Redis without persistence has no key), which kombu reports as "no
such queue": that must read as empty, or the re-send never happens.

Each broker here is a real one of the test's own: a private redis-server (restarted for real
with no persistence), kombu's SQL transport on a SQLite file (the embedded default) and on a
PostgreSQL database.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import gc
import re
import time
import uuid
from collections.abc import Iterator

import pytest
from django.utils import timezone

from runs.models import FINAL_STATES, Attempt, AttemptStatus, Run, RunStatus
from runs.workers.bookkeeping import attempts_reap, broker_queue_size
from tests.support.worker_stack import PG_ADMIN_URL, PrivateRedis, _psql, create_stack, wait_until

pytestmark = [pytest.mark.services]

BROKERS = ("redis", "sqla+sqlite", "sqla+postgresql")


@pytest.fixture
def private_redis(tmp_path) -> Iterator[PrivateRedis]:
    server = PrivateRedis(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.kill()


@contextlib.contextmanager
def broker_at(url: str) -> Iterator[None]:
    """Point this process's Celery app at ``url`` (as CELERY_BROKER_URL would)."""
    from benchsite.celery import app

    saved = app.conf.broker_url
    app.conf.broker_url = url
    app._pool = None
    app.amqp._producer_pool = None
    try:
        yield
    finally:
        # Close the connections (and kombu's SQL sessions) this test opened.
        for pool in (app.amqp._producer_pool, app._pool):
            if pool is not None:
                pool.force_close_all()
        app.conf.broker_url = saved
        app._pool = None
        app.amqp._producer_pool = None


@pytest.fixture(params=BROKERS)
def broker_url(request, tmp_path) -> Iterator[str]:
    if request.param == "redis":
        yield request.getfixturevalue("private_redis").url
    elif request.param == "sqla+sqlite":
        yield f"sqla+sqlite:///{tmp_path / 'broker.sqlite3'}"
    else:
        name = f"ab_broker_{uuid.uuid4().hex[:10]}"
        _psql(f'CREATE DATABASE "{name}"')
        base = PG_ADMIN_URL.split("://", 1)[1].rsplit("/", 1)[0]
        try:
            yield f"sqla+postgresql+psycopg://{base}/{name}"
        finally:
            from kombu.transport.sqlalchemy import Channel

            # kombu keeps one engine per URL for the process, and each channel a session it
            # never closes: let those go, close the engine, then drop the database.
            gc.collect()
            for key in [k for k in Channel._engines if name in k]:
                Channel._engines.pop(key)[0].dispose()
            _psql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def waiting_messages() -> list[int]:
    """The attempt ids of the messages waiting in the queue (taken off it)."""
    from benchsite.celery import app

    ids = []
    with app.connection_for_read() as conn:
        channel = conn.default_channel
        while (message := channel.basic_get(app.conf.task_default_queue, no_ack=True)) is not None:
            args, _kwargs, _embed = message.decode()
            ids.append(args[0])
    return ids


@pytest.mark.django_db
def test_the_reaper_resends_lost_queued_attempts_on_every_broker(
    broker_url, custom_dev, django_user_model
):
    from runs.models import ModelConfig

    config = ModelConfig.objects.create(name="scripted", agent_variant="scripted")
    run = Run.objects.create(suite=custom_dev, model_config=config, samples=1)
    task = custom_dev.tasks.order_by("task_id").first()
    long_ago = timezone.now() - dt.timedelta(minutes=5)
    lost = [
        Attempt.objects.create(
            run=run, task=task, suite=custom_dev, model_config=config, sample_index=i
        ).id
        for i in range(3)
    ]
    Attempt.objects.filter(id__in=lost).update(queued_at=long_ago)  # queued_at is auto_now_add
    with broker_at(broker_url):
        # The queue was never used (Redis: no key at all): empty, not "unknown".
        assert broker_queue_size() == 0
        report = attempts_reap()
        assert report.resent == lost
        assert broker_queue_size() == 3
        # Sent once: their waiting time restarted, and the queue is not empty now.
        assert attempts_reap().resent == []
        assert sorted(waiting_messages()) == lost
        assert broker_queue_size() == 0
    fresh = Attempt.objects.filter(id__in=lost).values_list("queued_at", flat=True)
    assert all(q > long_ago for q in fresh)


def test_a_broker_that_does_not_answer_is_not_taken_for_an_empty_one(db):
    with broker_at("redis://127.0.0.1:9/0"):  # the discard port: nothing listens
        assert broker_queue_size() is None


# --- A real Redis restarted mid-run ----------------------------------------------------------

# The production defaults (benchsite/settings.py), not the tests' fast ones: the figure printed
# is the recovery an operator gets.
DEFAULT_RECOVERY_ENV = {
    "ATTEMPT_HEARTBEAT_SEC": "5",
    "ATTEMPT_STALE_AFTER_SEC": "40",
    "ATTEMPT_REAPER_INTERVAL_SEC": "10",
}
RECOVERY_TARGET_SEC = 60
SAMPLES = 8


@pytest.mark.slow
def test_a_redis_restart_without_persistence_mid_run_loses_no_attempt(
    tmp_path, private_redis, django_db_blocker
):
    with django_db_blocker.unblock():
        stack = create_stack(
            "postgres+redis", tmp_path, DEFAULT_RECOVERY_ENV, broker_url=private_redis.url
        )
        stack.connect()
        try:
            _restart_mid_run(stack, private_redis)
        finally:
            stack.close()


def _restart_mid_run(stack, redis_server: PrivateRedis) -> None:
    out = stack.ab(
        "run-suite",
        "custom-dev",
        "--variant",
        "scripted",
        "--task",
        "toy_fail_pytest",
        "--samples",
        str(SAMPLES),
    )
    public_id = out.stdout.split("run ", 1)[1].split(":", 1)[0]
    run = Run.objects.using(stack.alias).get(public_id=public_id)
    attempts = Attempt.objects.using(stack.alias).filter(run_id=run.id)
    stack.start_worker("w1", beat=True)  # a worker and the reaper
    wait_until(
        lambda: attempts.filter(status__in=FINAL_STATES).count() >= 1,
        timeout=240,
        what="the first attempt to finish",
    )
    queued_before = attempts.filter(status=AttemptStatus.QUEUED).count()
    assert queued_before >= 2, "the run ended before the broker could lose anything"
    assert any(
        k.startswith(b"ab-test-") for k in redis_server.stored_keys()
    )  # the messages are there

    redis_server.kill()
    redis_server.start()
    back = time.monotonic()
    back_at = timezone.now()
    assert redis_server.stored_keys() == []  # every queued message is gone

    def resent() -> bool:
        # attempts_enqueue stamps queued_at when it sends: a message sent again after the restart.
        return attempts.filter(queued_at__gte=back_at).exists()

    wait_until(resent, timeout=300, what="the reaper to send the lost messages again")
    first_resent = time.monotonic() - back
    wait_until(
        lambda: not attempts.exclude(status__in=FINAL_STATES).exists(),
        timeout=600,
        what="every attempt to reach a final state",
    )
    all_final = time.monotonic() - back
    run = Run.objects.using(stack.alias).get(pk=run.pk)
    wait_until(
        lambda: Run.objects.using(stack.alias).get(pk=run.pk).finished_at,
        timeout=60,
        what="the run's bookkeeping",
    )
    run = Run.objects.using(stack.alias).get(pk=run.pk)
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    print(
        f"\nredis restart with {queued_before} queued attempt(s) lost: re-sent "
        f"{first_resent:.1f}s after the broker was back (target {RECOVERY_TARGET_SEC}s), "
        f"all {SAMPLES} final {all_final:.1f}s after it; load average {load}"
    )
    assert run.status == RunStatus.FINISHED
    outcomes = list(attempts.values_list("status", "failure_reason_id"))
    assert outcomes == [(AttemptStatus.FINISHED, None)] * SAMPLES, outcomes
    # The reaper, not a hand, sent them (its report names the attempts it re-sent).
    assert re.search(r"resent=\[\d", stack.worker_log("w1")), stack.worker_log("w1")[-3000:]
