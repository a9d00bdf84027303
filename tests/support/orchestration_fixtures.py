"""Fixtures for the run orchestration tests: a scripted model configuration and an in-memory
Celery broker (kombu's real memory transport) whose messages the tests read back."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from django.utils import timezone

from runs.models import Attempt, AttemptStatus, ModelConfig


@dataclass
class SentTask:
    name: str
    args: list
    soft_time_limit: float | None
    time_limit: float | None


class MemoryBroker:
    def __init__(self, app):
        self.app = app

    def drain(self) -> list[SentTask]:
        sent = []
        with self.app.connection_for_read() as conn:
            channel = conn.default_channel
            while (
                message := channel.basic_get(self.app.conf.task_default_queue, no_ack=True)
            ) is not None:
                args, _kwargs, _embed = message.decode()
                hard, soft = message.headers.get("timelimit") or (None, None)
                sent.append(SentTask(message.headers["task"], args, soft, hard))
        return sent

    def attempt_ids(self) -> list[int]:
        return [t.args[0] for t in self.drain() if t.name == "runs.attempt_run"]


@pytest.fixture
def broker():
    from benchsite.celery import app

    saved = app.conf.broker_url, app.conf.broker_transport_options
    app.conf.broker_url, app.conf.broker_transport_options = "memory://", {}
    app._pool = None
    app.amqp._producer_pool = None
    memory = MemoryBroker(app)
    memory.drain()
    yield memory
    memory.drain()
    app.conf.broker_url, app.conf.broker_transport_options = saved
    app._pool = None
    app.amqp._producer_pool = None


@pytest.fixture
def scripted(db) -> ModelConfig:
    return ModelConfig.objects.create(name="scripted", agent_variant="scripted")


def finish(
    attempt: Attempt,
    reason: str | None = None,
    text: str = "",
    *,
    kind: str = "",
    infra: bool | None = None,
) -> Attempt:
    """End an attempt the way the pipeline records an outcome, then run the bookkeeping."""
    from runs.taxonomy import Reason
    from runs.workers.bookkeeping import run_attempt_done

    now = timezone.now()
    Attempt.objects.filter(pk=attempt.pk).update(
        status=AttemptStatus.FINISHED,
        failure_reason_id=reason,
        is_infra=(Reason(reason).is_infrastructure if reason else False)
        if infra is None
        else infra,
        error_text=text,
        error_fingerprint=text[:200],
        error_kind=kind,
        started_at=attempt.started_at or now,
        finished_at=now,
    )
    attempt.refresh_from_db()
    run_attempt_done(attempt=attempt)
    return attempt
