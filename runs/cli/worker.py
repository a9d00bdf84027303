"""``ab worker`` and ``ab reaper``: the processes that run attempts and take back lost ones.

``ab worker`` supervises a Celery worker (and with ``--beat`` the reaper): SIGINT or SIGTERM
stops it warmly, letting running attempts finish for up to ``WORKER_SHUTDOWN_GRACE_SEC``;
past that (or on a second signal) the Celery processes are killed and their attempts handed
back to the queue at once, from a clean workspace. No Celery process outlives ``ab worker``.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
import tempfile
import threading
from pathlib import Path

from django.conf import settings

from benchsite.processes import Child, Supervisor

log = logging.getLogger(__name__)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("worker", help="start a Celery worker that runs attempts")
    p.add_argument("--concurrency", type=int, default=None, help="attempts run in parallel")
    p.add_argument("--beat", action="store_true", help="also run the reaper (once a deployment)")
    p.add_argument("--loglevel", default="INFO")
    p.add_argument(
        "--hostname", default=None, help="worker name, e.g. w1@%%h (default ab-<pid>@<host>)"
    )
    p.set_defaults(handler=cmd_worker)

    p = sub.add_parser(
        "reaper", help="requeue or end attempts whose worker went silent (a loop; --once)"
    )
    p.add_argument("--once", action="store_true", help="one pass, then exit")
    p.add_argument("--interval", type=float, default=None, help="seconds between passes")
    p.set_defaults(handler=cmd_reaper)


# --- Celery worker processes ------------------------------------------------------------


def worker_nodename(hostname: str | None) -> str:
    """The worker's Celery node name, expanded: attempts record it (``worker`` is
    ``<node>:<pid>``), which is how a stopped worker's attempts are found and handed back.
    The default is unique per ``ab worker`` process, so two on one host never share it."""
    from celery.utils.nodenames import host_format

    return host_format(hostname or f"ab-{os.getpid()}@%h", hostname=socket.gethostname())


def worker_argv(*, node: str, concurrency: int | None = None, loglevel: str = "INFO") -> list[str]:
    """The command line of a Celery worker process."""
    return [
        sys.executable,
        # Root is how this machine (and a container) runs it: no warning block per start.
        "-W",
        "ignore:You're running the worker with superuser privileges",
        "-m",
        "celery",
        "-A",
        "benchsite",
        "--quiet",  # no banner: `ab serve` prints its own lines last
        "worker",
        "--hostname",
        node,
        "--loglevel",
        loglevel,
        "--concurrency",
        str(concurrency or settings.CELERY_WORKER_CONCURRENCY),
        "--prefetch-multiplier",
        "1",
        "-O",
        "fair",
    ]


def reaper_argv() -> list[str]:
    return [sys.executable, "-m", "benchsite.cli.main", "reaper"]


class LocalWorker:
    """A supervised Celery worker (and optionally the reaper) of this ``ab`` process."""

    def __init__(
        self,
        supervisor: Supervisor,
        *,
        hostname: str | None = None,
        concurrency: int | None = None,
        loglevel: str = "WARNING",
        reaper: bool = False,
    ):
        self.supervisor = supervisor
        self.node = worker_nodename(hostname)
        self.concurrency = concurrency or settings.CELERY_WORKER_CONCURRENCY
        ready_dir = Path(tempfile.mkdtemp(prefix="ab-worker-"))
        self.ready_file = ready_dir / "ready"
        env = os.environ | {"AB_WORKER_READY_FILE": str(self.ready_file)}
        argv = worker_argv(node=self.node, concurrency=concurrency, loglevel=loglevel)
        self.celery: Child = supervisor.start("worker", argv, env=env)
        self.reaper: Child | None = supervisor.start("reaper", reaper_argv()) if reaper else None

    def ready(self) -> bool:
        """Celery's worker_ready signal has fired (runs.workers.tasks writes the file)."""
        return self.ready_file.exists()

    def running_attempts(self) -> int:
        from runs.models import Attempt, AttemptStatus

        return Attempt.objects.filter(
            status=AttemptStatus.RUNNING, worker__startswith=f"{self.node}:"
        ).count()

    def shutdown(self, *, grace: float | None = None) -> list[int]:
        """Warm shutdown: running attempts finish within ``grace`` seconds; the rest are
        handed back. Returns the ids of the attempts handed back."""
        from runs.workers.bookkeeping import attempts_hand_back

        grace = settings.WORKER_SHUTDOWN_GRACE_SEC if grace is None else grace

        def announce() -> None:
            running = self.running_attempts()
            if running:
                print(
                    f"worker {self.node}: waiting up to {grace:.0f}s for {running} running "
                    "attempt(s) to finish (signal again to hand them back now)",
                    flush=True,
                )

        if self.reaper is not None:
            self.reaper.terminate()
        self.supervisor.stop(self.celery, grace=grace, on_wait=announce)
        # Every process of the worker is gone now: what it left running goes back to the queue.
        handed = attempts_hand_back(worker_node=self.node)
        if handed:
            print(f"worker {self.node}: handed back {len(handed)} attempt(s)", flush=True)
        if self.reaper is not None:
            self.supervisor.stop(self.reaper, grace=10)
        self.ready_file.unlink(missing_ok=True)
        self.ready_file.parent.rmdir()
        return handed


def cmd_worker(args: argparse.Namespace) -> int:
    supervisor = Supervisor()
    supervisor.install_signal_handlers()
    worker = LocalWorker(
        supervisor,
        hostname=args.hostname,
        concurrency=args.concurrency,
        loglevel=args.loglevel,
        reaper=args.beat,
    )
    print(
        f"worker {worker.node}: concurrency {worker.concurrency}"
        + (", with the reaper" if args.beat else "")
        + " (Ctrl+C or SIGTERM stops it)",
        flush=True,
    )
    gone = supervisor.wait()
    if gone is not None:
        print(f"ab worker: {gone.name} exited with status {gone.proc.returncode}", file=sys.stderr)
    worker.shutdown()
    return 0 if gone is None else 1


# --- The reaper -------------------------------------------------------------------------


def cmd_reaper(args: argparse.Namespace) -> int:
    """Run ``attempts_reap`` every ATTEMPT_REAPER_INTERVAL_SEC until SIGINT/SIGTERM."""
    from django.db import close_old_connections

    from runs.workers.bookkeeping import attempts_reap
    from runs.workers.leftovers import leftovers_remove

    interval = args.interval or float(settings.ATTEMPT_REAPER_INTERVAL_SEC)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.is_set():
        close_old_connections()
        try:
            report = attempts_reap()
        except Exception:  # the database may be down for a moment: try again next pass
            log.exception("reaper pass failed")
        else:
            if report.requeued or report.ended or report.resent or report.settled:
                log.warning("reaper: %s", report)
        try:
            # Containers (this machine's engine), workspaces (its ARTIFACTS_ROOT) and model
            # gateway sockets that finished attempts left behind.
            leftovers = leftovers_remove()
        except Exception:
            log.exception("leftovers pass failed")
        else:
            if (
                leftovers.containers
                or leftovers.workspaces
                or leftovers.export_containers
                or leftovers.gateway_sockets
            ):
                log.warning("reaper removed leftovers of finished attempts: %s", leftovers)
        if args.once:
            break
        stop.wait(interval)
    return 0
