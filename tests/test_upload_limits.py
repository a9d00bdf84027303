"""Upload limits against a real server: a body over API_UPLOAD_MAX_BYTES and a zip bomb are
refused with a 413 naming the file or member, and the web process stays small while they
arrive (its peak resident size, VmHWM, read from /proc).

The app runs under gunicorn (one sync worker) on a fresh SQLite database: Django's development
server reads any unread request body into memory itself, so it cannot show the app's own use.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

REPO = Path(__file__).resolve().parent.parent
LIMIT_MB = 300
MB = 1024 * 1024


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


class Server:
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


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    var = tmp_path_factory.mktemp("upload-server")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DATABASE_URL", "PYTEST", "DJANGO_SETTINGS"))
    } | {
        "AB_VAR_DIR": str(var),
        "DATABASE_URL": f"sqlite:///{var / 'db.sqlite3'}",
        "API_UPLOADS_ROOT": str(var / "uploads"),
        "DJANGO_SETTINGS_MODULE": "benchsite.settings",
        "PYTHONPATH": str(REPO),
        "API_WRITE_RATE": "1000/min",
        # Where Django spools large uploads (tempfile honours TMPDIR): watched by the tests.
        "TMPDIR": str(var / "spool"),
    }
    (var / "spool").mkdir()
    manage = [sys.executable, str(REPO / "manage.py")]
    subprocess.run([*manage, "migrate", "-v", "0"], env=env, check=True, cwd=REPO)
    script = (
        "from django.contrib.auth.models import User\n"
        "from benchsite.accounts.services import api_token_create\n"
        "u = User.objects.create_user('alice', password='x', is_staff=True)\n"
        "print(api_token_create(user=u, name='uploads')[1])\n"
    )
    token = subprocess.run(
        [*manage, "shell", "-c", script], env=env, check=True, cwd=REPO,
        capture_output=True, text=True,
    ).stdout.strip().splitlines()[-1]  # fmt: skip
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "benchsite.wsgi:application",
         "--bind", f"127.0.0.1:{port}", "--workers", "1", "--timeout", "120"],
        env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                requests.get(url + "/api/suites", timeout=5)
                break
            except requests.ConnectionError:
                assert time.monotonic() < deadline, "gunicorn did not answer"
                time.sleep(0.2)
        yield Server(url, token, proc, var / "uploads", var / "spool")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def zip_bomb(inner_name: str, unpacked_mb: int) -> bytes:
    """About 1 MB of zip holding ``unpacked_mb`` MB of zeros in one member."""
    buffer = io.BytesIO()
    with (
        zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive,
        archive.open(inner_name, "w", force_zip64=True) as member,
    ):
        zeros = bytes(MB)
        for _ in range(unpacked_mb):
            member.write(zeros)
    return buffer.getvalue()


class MultipartBody(io.RawIOBase):
    """A multipart body with one file field of ``size`` bytes, generated while it is sent (so
    the test holds none of it) and with a known length (sent with Content-Length)."""

    BOUNDARY = "----ab-upload-test"

    def __init__(self, size: int, field: str = "file", filename: str = "big.jsonl"):
        self.head = (
            f'--{self.BOUNDARY}\r\nContent-Disposition: form-data; name="suite"\r\n\r\n'
            f'big\r\n--{self.BOUNDARY}\r\nContent-Disposition: form-data; name="{field}"; '
            f'filename="{filename}"\r\nContent-Type: application/octet-stream\r\n\r\n'
        ).encode()
        self.tail = f"\r\n--{self.BOUNDARY}--\r\n".encode()
        self.size = size
        self.sent = 0

    def __len__(self) -> int:
        return len(self.head) + self.size + len(self.tail)

    def readable(self) -> bool:
        return True

    def tell(self) -> int:  # requests computes the length as len() - tell()
        return self.sent

    def read(self, n: int = -1) -> bytes:
        total = len(self)
        n = total - self.sent if n is None or n < 0 else min(n, total - self.sent)
        out = bytearray()
        while len(out) < n:
            pos = self.sent + len(out)
            if pos < len(self.head):
                out += self.head[pos : pos + n - len(out)]
            elif pos < len(self.head) + self.size:
                out += b"x" * min(n - len(out), len(self.head) + self.size - pos)
            else:
                tail_pos = pos - len(self.head) - self.size
                out += self.tail[tail_pos : tail_pos + n - len(out)]
        self.sent += len(out)
        return bytes(out)

    @property
    def content_type(self) -> str:
        return f"multipart/form-data; boundary={self.BOUNDARY}"


@pytest.mark.parametrize(
    ("size", "spooled_at_most"),
    [
        (250 * MB, 0),  # refused by its length: nothing of it is written anywhere
        (200 * MB + 512 * 1024, 200 * MB),  # counted while it streams in: stopped at the limit
    ],
    ids=["over-by-length", "counted-while-streaming"],
)
def test_it_refuses_an_oversized_upload_while_it_streams_in(
    server: Server, size: int, spooled_at_most: int
) -> None:
    body = MultipartBody(size)
    with server.largest_spool() as spooled:
        response = server.post(
            "/api/imports/swebench", data=body, headers={"Content-Type": body.content_type}
        )
    assert spooled[0] <= spooled_at_most
    assert response.status_code == 413, response.text
    assert "API_UPLOAD_MAX_BYTES" in response.json()["detail"]
    assert response.json()["errors"][0]["field"] == "file"
    assert peak_rss_mb(server.worker_pid()) < LIMIT_MB


@pytest.mark.parametrize(
    ("path", "fields"),
    [
        ("/api/imports/results", {"suite": "none", "model": "bomb"}),
        ("/api/imports/tasks", {}),
    ],
)
def test_it_refuses_a_zip_bomb_naming_the_member(server: Server, path: str, fields) -> None:
    bomb = zip_bomb("huge/report.json", 1024)
    assert len(bomb) < 2 * MB
    response = server.post(path, data=fields, files={"file": ("bomb.zip", bomb)})
    assert response.status_code == 413, response.text
    assert "huge/report.json" in response.json()["detail"]
    assert peak_rss_mb(server.worker_pid()) < LIMIT_MB
    leftover = list(server.uploads.glob("tasks/*")) if server.uploads.exists() else []
    assert leftover == []


def test_a_task_archive_that_imports_nothing_is_not_kept(server: Server) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("notes/readme.txt", "no task here\n" * 1000)
    response = server.post("/api/imports/tasks", files={"file": ("none.zip", buffer.getvalue())})
    assert response.status_code == 200, response.text
    assert response.json()["total"] == 0
    assert list(server.uploads.glob("tasks/*")) == []
