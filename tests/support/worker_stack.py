"""Real Celery worker processes against a real database and broker, for tests and bench/.

Two stacks:

* ``postgres+redis``: a fresh PostgreSQL database and a Redis queue of its own per stack (on
  the servers `.ci/test` starts);
* ``sqlite+sqla``: the embedded default, a SQLite file and kombu's SQL transport on another
  SQLite file, in a temporary ``AB_VAR_DIR``.

Workers are ``celery -A benchsite worker`` subprocesses, each in its own process group so a
test can SIGKILL a whole worker (main process and pool children) at once. This process reads
the same database through an extra Django connection alias (``Stack.alias``).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import dj_database_url

from tests.support.ab_cli import ab

REPO_ROOT = Path(__file__).resolve().parents[2]
PG_ADMIN_URL = os.environ.get("AB_TEST_PG_URL", "postgres://postgres@127.0.0.1:5432/postgres")
REDIS_URL = os.environ.get("AB_TEST_REDIS_URL", "redis://127.0.0.1:6379/12")
KINDS = ("postgres+redis", "sqlite+sqla")

# Short heartbeats and stale thresholds, so the reaper acts within seconds in tests.
FAST_WORKER_ENV = {
    "ATTEMPT_HEARTBEAT_SEC": "1",
    "ATTEMPT_STALE_AFTER_SEC": "6",
    "ATTEMPT_REAPER_INTERVAL_SEC": "2",
    "CELERY_POLLING_INTERVAL_SEC": "0.1",
    "LOG_LEVEL": "WARNING",
}


@dataclass
class Stack:
    kind: str
    var_dir: Path
    env: dict[str, str]
    database_url: str
    alias: str = field(default_factory=lambda: f"stack_{uuid.uuid4().hex[:8]}")
    workers: list[subprocess.Popen] = field(default_factory=list)
    pg_database: str = ""
    started: float = field(default_factory=time.time)

    # --- processes ----------------------------------------------------------------------

    def ab(
        self, *args: str, timeout: float = 300, check: bool = True
    ) -> subprocess.CompletedProcess:
        """``ab`` in a process of its own on this stack's services (tests/support/ab_cli.py)."""
        return ab(*args, env_exact=self.env, timeout=timeout, check=check)

    def start_worker(
        self, name: str, *, concurrency: int = 1, beat: bool = False, env: dict | None = None
    ) -> subprocess.Popen:
        argv = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "benchsite",
            "worker",
            "--hostname",
            f"{name}@%h",
            "--concurrency",
            str(concurrency),
            "--prefetch-multiplier",
            "1",
            "-O",
            "fair",
            "--without-gossip",
            "--without-mingle",
            "--loglevel",
            "INFO",
        ]
        log = open(self.var_dir / f"worker-{name}.log", "ab")  # noqa: SIM115 (kept by Popen)
        if beat:  # the reaper, as `ab worker --beat` runs it: a process of its own
            reaper = subprocess.Popen(
                [sys.executable, "-m", "benchsite.cli.main", "reaper"],
                cwd=REPO_ROOT,
                env=self.env | (env or {}),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
            self.workers.append(reaper)
        proc = subprocess.Popen(
            argv,
            cwd=REPO_ROOT,
            env=self.env | (env or {}),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        proc.name = name  # type: ignore[attr-defined]
        self.workers.append(proc)
        return proc

    def kill_worker(self, proc: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        proc.wait(timeout=30)

    def stop_workers(self) -> None:
        for proc in self.workers:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                    proc.wait(timeout=30)
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    self.kill_worker(proc)
        self.workers.clear()

    def worker_log(self, name: str) -> str:
        path = self.var_dir / f"worker-{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    # --- the broker ---------------------------------------------------------------------

    def purge_broker(self) -> None:
        """Drop every waiting message, as a broker that lost its queue would."""
        subprocess.run(
            [sys.executable, "-m", "celery", "-A", "benchsite", "purge", "-f"],
            cwd=REPO_ROOT,
            env=self.env,
            check=True,
            capture_output=True,
            timeout=60,
        )

    def unacked_messages(self) -> int:
        """Unacknowledged messages of this stack's queue held by the broker (Redis: kombu's
        ``unacked`` hash); 0 on the SQL transport, which keeps none after a worker dies."""
        if not self.env.get("CELERY_BROKER_URL", "").startswith("redis://"):
            return 0
        import redis

        client = redis.Redis.from_url(self.env["CELERY_BROKER_URL"])
        queue = self.env["CELERY_QUEUE"]
        return sum(1 for _, raw in client.hscan_iter("unacked") if json.loads(raw)[2] == queue)

    # --- the database, from this process ------------------------------------------------

    def connect(self) -> str:
        """Register this stack's database as a Django connection alias in this process."""
        from django.db import connections

        config = dj_database_url.parse(self.database_url)
        if config["ENGINE"] == "django.db.backends.sqlite3":
            config["OPTIONS"] = {"timeout": 30, "transaction_mode": "IMMEDIATE"}
        connections.settings[self.alias] = config
        connections.configure_settings(connections.settings)
        return self.alias

    def disconnect(self) -> None:
        from django.db import connections

        if self.alias in connections.settings:
            connections[self.alias].close()
            del connections.settings[self.alias]

    def close(self) -> None:
        self.stop_workers()
        self.disconnect()
        self.remove_export_containers()
        if self.pg_database:
            _psql(f'DROP DATABASE IF EXISTS "{self.pg_database}" WITH (FORCE)')

    def remove_export_containers(self) -> None:
        """A worker killed mid-export leaves its export container (created, never started);
        the reaper removes one only when it is 10 minutes old, after this test. Remove those
        this stack's workers made: made since it started by a process now dead (a live one's
        is an export under way, of another test running in parallel)."""
        import docker

        from sandbox.docker_engine import EXPORT_LABEL

        try:
            client = docker.from_env()
        except docker.errors.DockerException:
            return
        try:
            for c in client.api.containers(all=True, filters={"label": EXPORT_LABEL}):
                creator = (c.get("Labels") or {}).get(EXPORT_LABEL, "")
                if float(c.get("Created", 0)) >= int(self.started) and not _alive(creator):
                    with contextlib.suppress(docker.errors.NotFound):
                        client.api.remove_container(c["Id"], force=True)
        finally:
            client.close()


def _alive(pid: str) -> bool:
    """Whether ``pid`` (an export container's label) names a running process."""
    if not pid.isdigit():
        return False
    return Path(f"/proc/{pid}").exists()


def _die_with_parent() -> None:
    """A worker gets SIGTERM when the test process dies (a killed pytest left orphans)."""
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def create_stack(
    kind: str, tmp_path: Path, extra_env: dict | None = None, *, broker_url: str = ""
) -> Stack:
    """Create the database (migrated, custom-dev imported) and return the stack's settings.
    ``broker_url`` replaces the stack's broker (e.g. a private Redis a test restarts)."""
    var_dir = tmp_path / f"var-{kind.replace('+', '-')}"
    var_dir.mkdir(parents=True, exist_ok=True)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DATABASE_URL", "CELERY_", "PYTEST", "DJANGO_SETTINGS"))
    }
    env |= {
        "AB_VAR_DIR": str(var_dir),
        "ARTIFACTS_ROOT": str(var_dir / "artifacts"),
        "DJANGO_SETTINGS_MODULE": "benchsite.settings",
        "PYTHONPATH": str(REPO_ROOT),
    }
    # Its own queue: other test sessions may share the Redis server, and their attempt ids
    # (small integers in fresh databases) would mean other attempts in this database.
    env |= {"CELERY_QUEUE": f"ab-test-{uuid.uuid4().hex[:10]}"}
    env |= FAST_WORKER_ENV | (extra_env or {})
    pg_database = ""
    if kind == "postgres+redis":
        pg_database = f"ab_test_{uuid.uuid4().hex[:10]}"
        _psql(f'CREATE DATABASE "{pg_database}"')
        database_url = PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{pg_database}"
        env |= {"DATABASE_URL": database_url, "CELERY_BROKER_URL": REDIS_URL}
    elif kind == "sqlite+sqla":
        database_url = f"sqlite:///{var_dir / 'db.sqlite3'}"
    else:
        raise ValueError(f"unknown stack kind {kind!r}")
    if broker_url:
        env["CELERY_BROKER_URL"] = broker_url
    stack = Stack(kind=kind, var_dir=var_dir, env=env, database_url=database_url)
    stack.pg_database = pg_database
    stack.ab("import-tasks", str(REPO_ROOT / "tasks"))
    return stack


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PrivateRedis:
    """A redis-server of a test's own on a free port, without persistence: restarting it
    loses every key, as a crashed Redis with no RDB or AOF file does. Never the shared one."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        argv = [
            "redis-server",
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.directory),
        ]
        log = open(self.directory / "redis.log", "ab")  # noqa: SIM115 (kept by Popen)
        self.proc = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent
        )
        wait_until(self.ping, timeout=30, what=f"redis-server on port {self.port}", poll=0.05)

    def ping(self) -> bool:
        import redis

        try:
            return bool(redis.Redis(port=self.port, socket_timeout=1).ping())
        except redis.exceptions.ConnectionError:
            return False

    def kill(self) -> None:
        """SIGKILL: a crash. With no persistence every queue and unacked message is gone."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        self.proc = None

    def stored_keys(self) -> list[bytes]:
        import redis

        return list(redis.Redis(port=self.port, socket_timeout=5).keys("*"))


def _psql(sql: str) -> None:
    subprocess.run(
        ["psql", PG_ADMIN_URL, "-v", "ON_ERROR_STOP=1", "-q", "-c", sql],
        check=True,
        capture_output=True,
        timeout=60,
    )


def wait_until(predicate: Callable[[], object], *, timeout: float, what: str, poll=0.25):
    """Poll until ``predicate()`` is truthy; return its value, or fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(poll)
