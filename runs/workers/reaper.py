"""The reaper's loop, run by every ``ab worker`` (and by ``ab reaper``), one pass at a time.

Each pass takes back what lost workers left (``bookkeeping.attempts_reap``: stale attempts,
lost messages, runs to settle) and removes what finished attempts left on this machine
(``leftovers.leftovers_remove``). Every ``ab worker`` runs this loop, so a worker started
alone still recovers an attempt whose Celery process was killed; a lease in the database
(``runs.models.Lease``) gives each pass to one process: the reap to one process of the
deployment, the leftovers to one process per machine and artifacts folder. A holder that dies
keeps its lease only until it expires (``LEASE_PASSES`` intervals), then another takes over.
Every step of a pass is a compare-and-set anyway: two passes at once would be harmless, only
wasted.
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import threading
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, close_old_connections
from django.db.models import Q
from django.utils import timezone

from runs.models import Lease

log = logging.getLogger(__name__)

REAP_LEASE = "reaper"
LEASE_PASSES = 3  # a lease outlives this many missed passes of its holder
MIN_LEASE_SEC = 30


def lease_acquire(name: str, holder: str, *, ttl_sec: float) -> bool:
    """Take or renew the lease ``name`` for ``holder``; False while another holds it."""
    now = timezone.now()
    free = Q(holder=holder) | Q(expires_at__isnull=True) | Q(expires_at__lt=now)
    taken = (
        Lease.objects.filter(name=name)
        .filter(free)
        .update(holder=holder[:200], expires_at=now + timedelta(seconds=ttl_sec))
    )
    if taken:
        return True
    if Lease.objects.filter(name=name).exists():
        return False
    try:  # the first pass ever: the row does not exist yet
        Lease.objects.create(
            name=name, holder=holder[:200], expires_at=now + timedelta(seconds=ttl_sec)
        )
    except IntegrityError:  # another process created it first: it holds it
        return False
    return True


def lease_release(name: str, holder: str) -> None:
    """Give the lease up at once (a stopping holder), so the next pass elsewhere takes it."""
    Lease.objects.filter(name=name, holder=holder).update(expires_at=None)


def leftovers_lease_name() -> str:
    """One leftovers pass per machine and artifacts folder (what that pass can reach)."""
    root = hashlib.sha1(str(settings.ARTIFACTS_ROOT).encode()).hexdigest()[:12]
    return f"leftovers:{socket.gethostname()}:{root}"[:200]


def reaper_holder() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def reaper_pass(*, holder: str, ttl_sec: float, force: bool = False) -> None:
    """One pass: the reap if this process holds (or takes) the deployment's lease, the
    leftovers if it holds this machine's. ``force`` runs both whoever holds them."""
    from runs.workers.bookkeeping import attempts_reap
    from runs.workers.leftovers import leftovers_remove

    close_old_connections()
    try:
        if force or lease_acquire(REAP_LEASE, holder, ttl_sec=ttl_sec):
            report = attempts_reap()
            if report.requeued or report.ended or report.resent or report.settled:
                log.warning("reaper: %s", report)
    except Exception:  # the database may be down for a moment: try again next pass
        log.exception("reaper pass failed")
    try:
        # Containers (this machine's engine), sandbox files and workspaces (its ARTIFACTS_ROOT)
        # that finished attempts left behind.
        if force or lease_acquire(leftovers_lease_name(), holder, ttl_sec=ttl_sec):
            leftovers = leftovers_remove()
            if leftovers.found_any:
                log.warning("reaper removed leftovers of finished attempts: %s", leftovers)
    except Exception:
        log.exception("leftovers pass failed")


def reaper_loop(stop: threading.Event, *, interval: float, once: bool = False) -> None:
    """Run ``reaper_pass`` every ``interval`` seconds until ``stop`` is set (or once, without
    asking for the leases: an operator's ``ab reaper --once`` always does its pass)."""
    holder = reaper_holder()
    ttl = max(MIN_LEASE_SEC, LEASE_PASSES * interval)
    try:
        while not stop.is_set():
            reaper_pass(holder=holder, ttl_sec=ttl, force=once)
            if once:
                break
            stop.wait(interval)
    finally:
        if not once:
            try:
                close_old_connections()
                lease_release(REAP_LEASE, holder)
                lease_release(leftovers_lease_name(), holder)
            except Exception:  # expiry frees them anyway
                log.warning("could not release the reaper's leases", exc_info=True)
