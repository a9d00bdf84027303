"""Requests per second of the production server (gunicorn) next to the development server.

    python bench/load.py [--clients 8] [--seconds 30]

Seeds the demo data (``ab setup-demo``) into a temporary folder (SQLite, the embedded
default), then for each server in turn starts ``ab serve --no-worker`` (``--dev`` for
Django's development server) on a free loopback port and runs ``--clients`` client processes
for ``--seconds`` seconds, each requesting the leaderboard, compare and attempt pages in turn
over one keep-alive connection. Prints requests/s and median/p95 latency per page and server,
the ratio (target >= 4x), and the load average (the machine is shared: other processes' load
lowers both figures). Bounded: loopback only, a fixed number of clients, stops by itself.
"""

from __future__ import annotations

import argparse
import http.client
import multiprocessing
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from proc_stats import tree_cpu_seconds

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
MAX_SECONDS = 120  # a hard bound on --seconds


def ab_env(var: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "CELERY_"))}
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
        env=env, cwd=ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
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


def measure(var: Path, paths: dict[str, str], *, dev: bool, clients: int, seconds: float):
    port = free_port()
    args = ["serve", "--no-worker", "--addr", f"{HOST}:{port}"] + (["--dev"] if dev else [])
    log = open(var / f"serve-{'dev' if dev else 'prod'}.log", "wb")  # noqa: SIM115
    server = subprocess.Popen(
        [sys.executable, "-m", "benchsite.cli", *args],
        env=ab_env(var), cwd=ROOT, stdout=subprocess.PIPE, stderr=log,
    )  # fmt: skip
    try:
        for line in server.stdout:  # type: ignore[union-attr]
            if b"AgentBench is up" in line:
                break
        else:
            raise SystemExit(f"the server did not start; see {log.name}")
        # One warm-up round per page (templates, first queries), not counted.
        conn = http.client.HTTPConnection(HOST, port, timeout=60)
        for path in paths.values():
            conn.request("GET", path)
            response = conn.getresponse()
            response.read()
            if response.status != 200:
                raise SystemExit(f"GET {path} answered {response.status}")
        conn.close()
        queue: multiprocessing.Queue = multiprocessing.Queue()
        until = time.time() + seconds
        procs = [
            multiprocessing.Process(target=client, args=(port, paths, until, queue))
            for _ in range(clients)
        ]
        load_before = os.getloadavg()[0]
        cpu_before = tree_cpu_seconds(server.pid)
        for proc in procs:
            proc.start()
        results = [queue.get(timeout=seconds + 120) for _ in procs]
        cpu = tree_cpu_seconds(server.pid) - cpu_before
        for proc in procs:
            proc.join()
        load_after = os.getloadavg()[0]
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=120)
    per_page = {name: [t for timings, _ in results for t in timings[name]] for name in paths}
    errors = sum(e for _, e in results)
    return per_page, errors, load_before, load_after, cpu


def report(name: str, per_page: dict[str, list[float]], errors: int, seconds: float) -> float:
    total = sum(len(v) for v in per_page.values())
    for page, times in per_page.items():
        times.sort()
        p95 = times[int(len(times) * 0.95) - 1] if times else float("nan")
        print(
            f"  {name:5} {page:12} {len(times) / seconds:8.1f} req/s   "
            f"median {statistics.median(times) * 1000 if times else float('nan'):7.1f} ms   "
            f"p95 {p95 * 1000:7.1f} ms"
        )
    rate = total / seconds
    print(f"  {name:5} {'all pages':12} {rate:8.1f} req/s   ({errors} errors)")
    return rate


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--prod-only", action="store_true", help="skip the development server")
    args = parser.parse_args()
    seconds = min(args.seconds, MAX_SECONDS)
    with tempfile.TemporaryDirectory(prefix="ab-load-") as tmp:
        var = Path(tmp) / "var"
        subprocess.run(
            [sys.executable, "-m", "benchsite.cli", "setup-demo"],
            env=ab_env(var), cwd=ROOT, check=True, capture_output=True,
        )  # fmt: skip
        paths = page_paths(ab_env(var))
        print(f"{args.clients} clients x {seconds:.0f} s per server on {HOST}, SQLite; pages:")
        for name, path in paths.items():
            print(f"  {name:12} {path}")
        rates = {}
        for name, dev in (("dev", True), ("prod", False))[0 if not args.prod_only else 1 :]:
            per_page, errors, before, after, cpu = measure(
                var, paths, dev=dev, clients=args.clients, seconds=seconds
            )
            label = "development server (--dev)" if dev else "gunicorn (ab serve)"
            print(f"{label}: load average {before:.2f} before, {after:.2f} after")
            rates[name] = report(name, per_page, errors, seconds)
            served = sum(len(v) for v in per_page.values())
            print(
                f"  {name:5} server CPU {cpu / seconds:5.2f} cores, "
                f"{cpu * 1000 / max(served, 1):.1f} ms CPU per request"
            )
        ratio = rates["prod"] / rates["dev"] if rates.get("dev") else float("nan")
        print(f"production / development: {ratio:.2f}x requests/s (target >= 4x)")
        print(f"cores: {os.cpu_count()}; load average now {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
