"""A real WSGI server for the tests that need one: gunicorn (one sync worker) on a fresh SQLite
database, with alice's API token. Django's development server reads any unread request body
into memory itself, so upload tests cannot use it."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A running server: its URL, alice's token, the gunicorn master, the uploads folder and
    the TMPDIR its worker spools uploads to."""

    def __init__(self, url: str, token: str, proc: subprocess.Popen, uploads: Path, spool: Path):
        self.url = url
        self.token = token
        self.proc = proc
        self.uploads = uploads
        self.spool = spool

    @contextlib.contextmanager
    def largest_spool(self) -> Iterator[list[int]]:
        """The most bytes the server's spooled upload files held at once, while in the block."""
        largest = [0]
        done = threading.Event()

        def watch() -> None:
            while not done.is_set():
                total = 0
                for path in self.spool.iterdir():
                    with contextlib.suppress(FileNotFoundError):
                        total += path.stat().st_size
                largest[0] = max(largest[0], total)
                time.sleep(0.01)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            yield largest
        finally:
            done.set()
            watcher.join(5)

    def worker_pid(self) -> int:
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text()
        return int(children.split()[0])

    def post(self, path: str, headers: dict | None = None, **kwargs) -> requests.Response:
        headers = {"Authorization": f"Bearer {self.token}", **(headers or {})}
        return requests.post(self.url + path, headers=headers, timeout=120, **kwargs)

    def get(self, path: str, **kwargs) -> requests.Response:
        headers = {"Authorization": f"Bearer {self.token}"}
        return requests.get(self.url + path, headers=headers, timeout=120, **kwargs)


@contextlib.contextmanager
def serve(var: Path, **settings: str) -> Iterator[Server]:
    """gunicorn (one sync worker) on a fresh SQLite database in ``var``, with a token of
    alice's (staff, as in tests/conftest.py: imports are staff's work); ``settings`` are more
    environment variables."""
    env = (
        {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("DATABASE_URL", "PYTEST", "DJANGO_SETTINGS"))
        }
        | {
            "AB_VAR_DIR": str(var),
            "DATABASE_URL": f"sqlite:///{var / 'db.sqlite3'}",
            "API_UPLOADS_ROOT": str(var / "uploads"),
            "DJANGO_SETTINGS_MODULE": "benchsite.settings",
            "PYTHONPATH": str(REPO),
            "API_WRITE_RATE": "1000/min",
            # Where Django spools large uploads (tempfile honours TMPDIR): watched by the tests.
            "TMPDIR": str(var / "spool"),
        }
        | settings
    )
    (var / "spool").mkdir()
    manage = [sys.executable, str(REPO / "manage.py")]
    subprocess.run([*manage, "migrate", "-v", "0"], env=env, check=True, cwd=REPO)
    script = (
        "from django.contrib.auth.models import User\n"
        "from benchsite.accounts.services import api_token_create\n"
        "u = User.objects.create_user('alice', password='x', is_staff=True, is_superuser=True)\n"
        "print(api_token_create(user=u, name='uploads')[1])\n"
    )
    token = (
        subprocess.run(
            [*manage, "shell", "-c", script],
            env=env,
            check=True,
            cwd=REPO,
            capture_output=True,
            text=True,
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "benchsite.wsgi:application",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "1",
            "--timeout",
            "120",
        ],
        env=env,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                requests.get(url + "/api/suites", timeout=10)
                break
            except (requests.ConnectionError, requests.Timeout):  # still starting (a busy host)
                assert time.monotonic() < deadline, "gunicorn did not answer"
                time.sleep(0.2)
        yield Server(url, token, proc, var / "uploads", var / "spool")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
