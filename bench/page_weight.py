"""What a page costs a browser on a cold load: bytes over the wire and time until it is drawn.

Serves a checkout (this one, or ``--repo`` to compare another) with ``ab serve --no-worker`` on
a fresh demo database (``ab setup-demo``), opens each page in Chromium with an empty cache and
prints the bytes received (compressed, as sent), the largest responses, the time to
DOMContentLoaded and the time until the page's charts are drawn.

    python bench/page_weight.py [--repo /path/to/checkout] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PAGES = [
    ("taxonomy", "/suites/swebench-lite-dev/taxonomy/", "#taxonomy-chart svg.main-svg"),
    ("leaderboard", "/suites/swebench-lite-dev/leaderboard/", "#leaderboard"),
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve(repo: Path, var: Path) -> tuple[subprocess.Popen, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "CELERY_"))}
    env |= {"AB_VAR_DIR": str(var), "PYTHONPATH": str(repo)}
    subprocess.run(
        [sys.executable, "-m", "benchsite.cli.main", "setup-demo"],
        cwd=repo,
        env=env,
        check=True,
        capture_output=True,
        timeout=600,
    )
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "benchsite.cli.main",
            "serve",
            "--no-worker",
            "--addr",
            f"127.0.0.1:{port}",
        ],
        cwd=repo,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(url + "/", timeout=2)
            return server, url
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                server.kill()
                raise SystemExit("the server did not start") from None
            time.sleep(0.3)


def measure(browser, url: str, ready: str) -> dict:
    context = browser.new_context()  # a new context: empty cache
    page = context.new_page()
    client = context.new_cdp_session(page)
    client.send("Network.enable")
    sizes: dict[str, int] = {}
    client.on(
        "Network.loadingFinished",
        lambda e: sizes.__setitem__(e["requestId"], int(e["encodedDataLength"])),
    )
    urls: dict[str, str] = {}
    client.on(
        "Network.requestWillBeSent", lambda e: urls.__setitem__(e["requestId"], e["request"]["url"])
    )
    started = time.perf_counter()
    page.goto(url, wait_until="domcontentloaded")
    dom = time.perf_counter() - started
    page.wait_for_selector(ready, timeout=120_000)
    drawn = time.perf_counter() - started
    page.wait_for_load_state("networkidle")
    context.close()
    largest = sorted(((n, urls.get(r, "?")) for r, n in sizes.items()), reverse=True)[:2]
    return {"bytes": sum(sizes.values()), "dom": dom, "drawn": drawn, "largest": largest}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=REPO, help="the checkout to serve")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    var = Path(tempfile.mkdtemp(prefix="ab-bench-weight-"))
    server, base = serve(args.repo.resolve(), var)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path="/usr/bin/chromium", args=["--headless", "--no-sandbox"]
            )
            load = os.getloadavg()[0]
            print(f"{args.repo.resolve()}; load average {load:.1f}; {args.runs} cold loads each")
            print(f"{'page':12} {'received':>10} {'DOM ready':>10} {'drawn':>8}  largest responses")
            for name, path, ready in PAGES:
                results = [measure(browser, base + path, ready) for _ in range(args.runs)]
                received = statistics.median(r["bytes"] for r in results) / 1e6
                dom = statistics.median(r["dom"] for r in results)
                drawn = statistics.median(r["drawn"] for r in results)
                largest = ", ".join(
                    f"{u.rsplit('/', 1)[-1] or u} {n / 1e6:.2f} MB"
                    for n, u in results[0]["largest"]
                )
                print(f"{name:12} {received:8.2f} MB {dom:8.2f} s {drawn:6.2f} s  {largest}")
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=30)
        shutil.rmtree(var, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
