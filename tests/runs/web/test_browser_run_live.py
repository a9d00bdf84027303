"""The run page in a real browser follows a run to the end without a reload: a real web
server and a real Celery worker (separate processes) on one embedded database."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.support.browser_fixtures import open_page, shot
from tests.support.worker_stack import REPO_ROOT, create_stack

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture
def stack(tmp_path, django_db_blocker):
    with django_db_blocker.unblock():
        stack = create_stack("sqlite+sqla", tmp_path)
        try:
            yield stack
        finally:
            stack.close()


@pytest.fixture
def server(stack):
    """``ab serve --no-worker`` on a free port, on the stack's database."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    log = open(stack.var_dir / "web.log", "ab")  # noqa: SIM115 (kept by Popen)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "benchsite.cli.main",
            "serve",
            "--no-worker",
            "--addr",
            f"127.0.0.1:{port}",
        ],
        cwd=REPO_ROOT,
        env=stack.env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            urllib.request.urlopen(url + "/", timeout=5)
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise AssertionError((stack.var_dir / "web.log").read_text()) from None
            time.sleep(0.3)
    yield url
    proc.terminate()
    proc.wait(timeout=30)


def test_the_run_page_reaches_finished_with_its_table_updated(browser, stack, server):
    out = stack.ab(
        "run-suite",
        "custom-dev",
        "--variant",
        "scripted",
        "--samples",
        "2",
        "--task",
        "toy_fail_pytest",
        "--task",
        "toy_baseline_passes",
    )
    run_id = out.stdout.split("run ", 1)[1].split(":", 1)[0]
    for page in open_page(browser, server):
        page.goto(f"{server}/runs/{run_id}/")
        page.wait_for_selector("#run-progress[data-final='0']")
        assert page.locator("#run-attempts tbody tr[data-status='queued']").count() == 4
        assert "0 of 4 attempts final" in page.locator("#run-progress").text_content()
        # Anything the page's scripts keep would vanish on a reload.
        page.evaluate("window.__noReload = 1")

        stack.start_worker("live")
        page.wait_for_selector("#run-progress[data-final='1']", timeout=300_000)
        assert page.evaluate("window.__noReload") == 1
        assert page.locator("#run-status").text_content() == "Finished"
        assert "4 of 4 attempts final (100%)" in page.locator("#run-progress").text_content()
        rows = page.locator("#run-attempts tbody tr")
        assert rows.count() == 4
        assert page.locator("#run-attempts tbody tr[data-status='finished']").count() == 4
        table = page.locator("#run-attempts").text_content()
        assert "BASELINE_NOT_FAILING" in table and "resolved" in table
        outcomes = page.locator("#run-outcomes").text_content()
        assert "BASELINE_NOT_FAILING" in outcomes and "resolved" in outcomes
        shot(page, "run-live-finished")
