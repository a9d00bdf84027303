"""``ab worker`` and ``ab reaper``: the processes that run attempts and take back lost ones.

``ab worker`` supervises a Celery worker and the reaper (``runs.workers.reaper``: every worker
offers to run it, a lease gives each pass to one process, so a worker started alone still
recovers an attempt whose Celery process was killed). SIGINT or SIGTERM stops it warmly,
letting running attempts finish for up to ``WORKER_SHUTDOWN_GRACE_SEC``; past that (or on a
second signal) the Celery processes are killed and their attempts handed back to the queue at
once, from a clean workspace. No Celery process outlives ``ab worker``, and nothing of it stays
in the temporary directory: its ready file and its Celery processes' temporary files
(multiprocessing's ``pymp-*``) live in one folder of its own, removed when it stops (or, when it
was killed, by the next reaper pass on this machine, once none of its processes holds the
folder's lock). Killed itself (``kill -9`` of its process group), it takes its Celery
processes with it: they get SIGKILL on its death, so none runs on unsupervised.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
import threading

from django.conf import settings

from benchsite.processes import Child, Supervisor

log = logging.getLogger(__name__)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("worker", help="start a Celery worker that runs attempts")
    p.add_argument("--concurrency", type=int, default=None, help="attempts run in parallel")
    p.add_argument(
        "--beat",
        action="store_true",
        help="kept for old scripts: every worker runs the reaper (one pass at a time per "
        "deployment, under a lease)",
    )
    p.add_argument("--loglevel", default="INFO")
    p.add_argument(
        "--hostname", default=None, help="worker name, e.g. w1@%%h (default ab-<pid>@<host>)"
    )
    p.set_defaults(handler=cmd_worker)

    p = sub.add_parser(
        "reaper", help="requeue or end attempts whose worker went silent (a loop; --once)"
    )
    p.add_argument(
        "--once", action="store_true", help="one pass, then exit (whoever holds the lease)"
    )
    p.add_argument("--interval", type=float, default=None, help="seconds between passes")
    p.set_defaults(handler=cmd_reaper)


# --- Celery worker processes ------------------------------------------------------------


def worker_nodename(hostname: str | None) -> str:
    """The worker's Celery node name, expanded: attempts record it (``worker`` is
    ``<node>:<pid>``), which is how a stopped worker's attempts are found and handed back.
    The default is unique per ``ab worker`` process, so two on one host never share it."""
    from celery.utils.nodenames import host_format

    # The ignore: celery-types types host_format's **extra as dicts; celery takes any value.
    return host_format(
        hostname or f"ab-{os.getpid()}@%h",
        hostname=socket.gethostname(),  # type: ignore[arg-type]
    )


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
    """A supervised Celery worker and the reaper, of this ``ab`` process."""

    def __init__(
        self,
        supervisor: Supervisor,
        *,
        hostname: str | None = None,
        concurrency: int | None = None,
        loglevel: str = "WARNING",
        env: dict[str, str] | None = None,
    ):
        from runs.workers.worker_dir import WORKER_DIR_ENV, worker_dir_create

        self.supervisor = supervisor
        self.node = worker_nodename(hostname)
        self.concurrency = concurrency or settings.CELERY_WORKER_CONCURRENCY
        self.folder = worker_dir_create()
        self.ready_file = self.folder / "ready"
        tmp = self.folder / "tmp"
        tmp.mkdir(mode=0o700)
        # Celery's processes keep their temporary files (multiprocessing's pymp-* folders) in
        # this worker's folder: a killed Celery process cannot remove its own.
        # ``env``: settings of this worker only (validate-suite --worker: its backend).
        # Each Celery process holds the folder's lock (runs.workers.worker_dir), so no
        # leftovers pass removes it while one of them lives.
        env = (
            os.environ
            | (env or {})
            | {
                "AB_WORKER_READY_FILE": str(self.ready_file),
                "TMPDIR": str(tmp),
                WORKER_DIR_ENV: str(self.folder),
            }
        )
        argv = worker_argv(node=self.node, concurrency=concurrency, loglevel=loglevel)
        # SIGKILL, not a warm stop, when this process dies without stopping it (kill -9 of its
        # group): with no supervisor left to hand its attempts back, they are the reaper's to
        # requeue, which it does once their heartbeat stops.
        self.celery: Child = supervisor.start("worker", argv, env=env, death_signal=signal.SIGKILL)
        self.reaper: Child = supervisor.start("reaper", reaper_argv())

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
        from runs.workers.worker_dir import worker_dir_remove

        grace = settings.WORKER_SHUTDOWN_GRACE_SEC if grace is None else grace

        def announce() -> None:
            running = self.running_attempts()
            if running:
                print(
                    f"worker {self.node}: waiting up to {grace:.0f}s for {running} running "
                    "attempt(s) to finish (signal again to hand them back now)",
                    flush=True,
                )

        try:
            self.reaper.terminate()
            self.supervisor.stop(self.celery, grace=grace, on_wait=announce)
            # Every process of the worker is gone now: what it left running goes back.
            handed = attempts_hand_back(worker_node=self.node)
            if handed:
                print(f"worker {self.node}: handed back {len(handed)} attempt(s)", flush=True)
            self.supervisor.stop(self.reaper, grace=10)
        finally:
            worker_dir_remove(self.folder)
        return handed


def cmd_worker(args: argparse.Namespace) -> int:
    supervisor = Supervisor()
    supervisor.install_signal_handlers()
    worker = LocalWorker(
        supervisor, hostname=args.hostname, concurrency=args.concurrency, loglevel=args.loglevel
    )
    print(
        f"worker {worker.node}: concurrency {worker.concurrency}, with the reaper "
        "(Ctrl+C or SIGTERM stops it)",
        flush=True,
    )
    gone = supervisor.wait()
    if gone is not None:
        print(f"ab worker: {gone.name} exited with status {gone.proc.returncode}", file=sys.stderr)
    worker.shutdown()
    return 0 if gone is None else 1


# --- The reaper -------------------------------------------------------------------------


def cmd_reaper(args: argparse.Namespace) -> int:
    """Run the reaper's pass every ATTEMPT_REAPER_INTERVAL_SEC until SIGINT/SIGTERM (or once).
    ``ab worker`` runs this too; the lease makes one of them do each pass."""
    from runs.workers.reaper import reaper_loop

    interval = args.interval or float(settings.ATTEMPT_REAPER_INTERVAL_SEC)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    reaper_loop(stop, interval=interval, once=args.once)
    return 0
