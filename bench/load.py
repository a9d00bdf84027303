"""Requests per second of the production server (gunicorn) next to the development server.

    python bench/load.py [--clients 8] [--seconds 30] [--writes-per-sec 0]

Seeds the demo data (``ab setup-demo``) into a temporary folder (SQLite, the embedded
default), starts ``ab serve --no-worker`` three times on free loopback ports: with ``--dev``
Django's development server, gunicorn as deployed (``ab serve``), and gunicorn with
``PAGE_CACHE=false``. They take turns in 5-second windows until each had ``--seconds`` seconds
of ``--clients`` client processes, each client requesting the leaderboard, compare and attempt
pages in turn over one keep-alive connection.
Prints requests/s and median/p95 latency per page and server, the ratio (target >= 4x) and
how much of it comes from gunicorn and how much from the page cache, and the load average
(the machine is shared: other processes' load lowers every figure). Bounded: loopback only, a
fixed number of clients, stops by itself.

The page cache (runs/web/page_cache.py) is off on the development server (``ab serve --dev``
turns it off unless PAGE_CACHE is set) and on in production. By default nothing writes
during the run, so after its first request per page and process gunicorn answers from the
cache: the best case. ``--writes-per-sec N`` updates an attempt N times a second meanwhile
(raw SQL, as a running attempt's progress would; the same for every server): after each
write, the next request per page and process renders in full, as the PAGE_CACHE=false server
does every time.
"""

from __future__ import annotations

import argparse
import http.client
import multiprocessing
import os
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from proc_stats import tree_cpu_seconds

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
MAX_SECONDS = 120  # a hard bound on --seconds
WINDOW_SECONDS = 5  # the servers take turns in windows this long
LABELS = {
    "dev": "development server (ab serve --dev; no page cache)",
    "prod": "gunicorn (ab serve; page cache on)",
    "nocache": "gunicorn (ab serve, PAGE_CACHE=false)",
}


def ab_env(var: Path, page_cache: str | None = None) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DATABASE_URL", "CELERY_", "PAGE_CACHE"))
    }
    if page_cache is not None:
        env["PAGE_CACHE"] = page_cache
    return env | {
        "REQUEST_LOG_LEVEL": os.environ.get("REQUEST_LOG_LEVEL", "INFO"),
        "AB_VAR_DIR": str(var),
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "benchsite.settings",
        # The attempt page without a login, as a public deployment would serve it.
        "ANONYMOUS_READ_ARTIFACTS": "1",
    }


def page_paths(env: dict[str, str]) -> dict[str, str]:
    """The three pages: the demo SWE-bench suite's leaderboard, a compare of its two
    best-covered models, and one of its attempts with a patch."""
    code = """
from django.db.models import Count
from runs.models import Attempt
from tasks_app.models import Suite
suite = Suite.objects.annotate(n=Count("runs__attempts")).order_by("-n").first()
top = (Attempt.objects.filter(suite=suite).exclude(final_patch="")
       .values("model_config__slug").annotate(n=Count("id")).order_by("-n"))
slugs = [row["model_config__slug"] for row in top[:2]]
attempt = Attempt.objects.filter(suite=suite).exclude(final_patch="").order_by("id").first()
print("PAGES", suite.name, ",".join(slugs), attempt.public_id)
"""
    out = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "shell", "-c", code],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    line = next(x for x in out.stdout.splitlines() if x.startswith("PAGES "))
    _, suite, models, attempt = line.split()
    return {
        "leaderboard": f"/suites/{suite}/leaderboard/",
        "compare": f"/suites/{suite}/compare/?models={models}",
        "attempt": f"/attempts/{attempt}/",
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def client(port: int, paths: dict[str, str], until: float, queue) -> None:
    """One client: the pages in turn over one keep-alive connection until ``until``."""
    timings: dict[str, list[float]] = {name: [] for name in paths}
    errors = 0
    conn = http.client.HTTPConnection(HOST, port, timeout=30)
    while time.time() < until:
        for name, path in paths.items():
            started = time.perf_counter()
            try:
                conn.request("GET", path)
                response = conn.getresponse()
                response.read()
                ok = response.status == 200
            except (OSError, http.client.HTTPException):
                conn.close()
                conn = http.client.HTTPConnection(HOST, port, timeout=30)
                ok = False
            if ok:
                timings[name].append(time.perf_counter() - started)
            else:
                errors += 1
    conn.close()
    queue.put((timings, errors))


class Server:
    """One ``ab serve --no-worker`` (``--dev`` for Django's development server), warmed up.
    ``page_cache``: PAGE_CACHE for the server; None leaves ``ab serve``'s default."""

    def __init__(
        self, var: Path, paths: dict[str, str], *, dev: bool, page_cache: str | None = None
    ):
        self.name = "dev" if dev else "prod" if page_cache is None else "nocache"
        self.port = free_port()
        args = ["serve", "--no-worker", "--addr", f"{HOST}:{self.port}"]
        log = open(var / f"serve-{self.name}.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "benchsite.cli.main", *args, *(["--dev"] if dev else [])],
            env=ab_env(var, page_cache),
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=log,
        )
        for line in self.proc.stdout:  # type: ignore[union-attr]
            if b"AgentBench is up" in line:
                break
        else:
            raise SystemExit(f"the {self.name} server did not start; see {log.name}")
        # Warm-up requests per page (templates, first queries), not counted.
        conn = http.client.HTTPConnection(HOST, self.port, timeout=60)
        for _ in range(3):
            for path in paths.values():
                conn.request("GET", path)
                response = conn.getresponse()
                response.read()
                if response.status != 200:
                    raise SystemExit(f"GET {path} answered {response.status}")
        conn.close()
        self.per_page: dict[str, list[float]] = {name: [] for name in paths}
        self.errors = 0
        self.cpu = 0.0
        self.seconds = 0.0
        self.loads: list[float] = []

    def window(self, paths: dict[str, str], *, clients: int, seconds: float) -> None:
        """``clients`` client processes for ``seconds``; adds to this server's figures."""
        queue: multiprocessing.Queue = multiprocessing.Queue()
        until = time.time() + seconds
        procs = [
            multiprocessing.Process(target=client, args=(self.port, paths, until, queue))
            for _ in range(clients)
        ]
        self.loads.append(os.getloadavg()[0])
        cpu_before = tree_cpu_seconds(self.proc.pid)
        for proc in procs:
            proc.start()
        results = [queue.get(timeout=seconds + 120) for _ in procs]
        self.cpu += tree_cpu_seconds(self.proc.pid) - cpu_before
        self.seconds += seconds
        for proc in procs:
            proc.join()
        for timings, errors in results:
            self.errors += errors
            for name, times in timings.items():
                self.per_page[name].extend(times)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=120)


def write(db: Path, per_sec: float, stop: threading.Event) -> None:
    """Progress of a running attempt, ``per_sec`` times a second until ``stop``."""
    connection = sqlite3.connect(db, timeout=30, isolation_level=None)
    while not stop.wait(1 / per_sec):
        connection.execute(
            "UPDATE runs_attempt SET steps = steps + 1"
            " WHERE id = (SELECT min(id) FROM runs_attempt)"
        )
    connection.close()


def report(name: str, per_page: dict[str, list[float]], errors: int, seconds: float) -> float:
    total = sum(len(v) for v in per_page.values())
    for page, times in per_page.items():
        times.sort()
        p95 = times[int(len(times) * 0.95) - 1] if times else float("nan")
        print(
            f"  {name:7} {page:12} {len(times) / seconds:8.1f} req/s   "
            f"median {statistics.median(times) * 1000 if times else float('nan'):7.1f} ms   "
            f"p95 {p95 * 1000:7.1f} ms"
        )
    rate = total / seconds
    print(f"  {name:7} {'all pages':12} {rate:8.1f} req/s   ({errors} errors)")
    return rate


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--writes-per-sec", type=float, default=0.0)
    args = parser.parse_args()
    seconds = min(args.seconds, MAX_SECONDS)
    with tempfile.TemporaryDirectory(prefix="ab-load-") as tmp:
        var = Path(tmp) / "var"
        subprocess.run(
            [sys.executable, "-m", "benchsite.cli.main", "setup-demo"],
            env=ab_env(var),
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        paths = page_paths(ab_env(var))
        print(f"{args.clients} clients x {seconds:.0f} s per server on {HOST}, SQLite; pages:")
        for name, path in paths.items():
            print(f"  {name:12} {path}")
        # Both servers run at once and take turns in short windows, so a load that other
        # processes put on the machine weighs on both alike.
        servers = [
            Server(var, paths, dev=True),
            Server(var, paths, dev=False),
            Server(var, paths, dev=False, page_cache="false"),
        ]
        rounds = max(1, round(seconds / WINDOW_SECONDS))
        stop = threading.Event()
        if args.writes_per_sec > 0:
            writer = threading.Thread(
                target=write, args=(var / "db.sqlite3", args.writes_per_sec, stop), daemon=True
            )
            writer.start()
            print(f"an attempt updated {args.writes_per_sec:g} times a second meanwhile")
        try:
            for _ in range(rounds):
                for server in servers:
                    server.window(paths, clients=args.clients, seconds=seconds / rounds)
        finally:
            stop.set()
            for server in servers:
                server.stop()
        rates = {}
        for server in servers:
            label = LABELS[server.name]
            loads = f"{min(server.loads):.2f}-{max(server.loads):.2f}"
            print(f"{label}: {rounds} windows of {seconds / rounds:.0f} s; load average {loads}")
            rates[server.name] = report(server.name, server.per_page, server.errors, seconds)
            served = sum(len(v) for v in server.per_page.values())
            print(
                f"  {server.name:7} server CPU {server.cpu / seconds:5.2f} cores, "
                f"{server.cpu * 1000 / max(served, 1):.1f} ms CPU per request"
            )
        ratio = rates["prod"] / rates["dev"]
        print(f"production / development: {ratio:.2f}x requests/s (target >= 4x)")
        print(
            f"  of which gunicorn (no page cache vs dev): {rates['nocache'] / rates['dev']:.2f}x,"
            f" the page cache (prod vs no page cache): {rates['prod'] / rates['nocache']:.2f}x"
        )
        print(f"cores: {os.cpu_count()}; load average now {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
