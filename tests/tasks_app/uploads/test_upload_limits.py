"""Upload limits against a real server: a body over API_UPLOAD_MAX_BYTES and a zip bomb are
refused with a 413 naming the file or member, the web process stays small while they
arrive (its peak resident size, VmHWM, read from /proc), and a refused upload leaves no
temporary file open in the worker or on disk in its TMPDIR, at any size over the limit.

The app runs under gunicorn (one sync worker) on a fresh SQLite database: Django's development
server reads any unread request body into memory itself, so it cannot show the app's own use.
"""

from __future__ import annotations

import contextlib
import io
import os
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.gunicorn_fixtures import Server, serve

pytestmark = pytest.mark.slow  # a gunicorn server per module, measured while it streams

LIMIT_MB = 300
MB = 1024 * 1024


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serve(tmp_path_factory.mktemp("upload-server")) as running:
        yield running


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
    """A multipart body with one file field of ``size`` bytes (or several: ``files`` of
    (field, filename, size)), generated while it is sent (so the test holds none of it) and
    with a known length (sent with Content-Length)."""

    BOUNDARY = "----ab-upload-test"

    def __init__(
        self,
        size: int = 0,
        field: str = "file",
        filename: str = "big.jsonl",
        *,
        files: list[tuple[str, str, int]] | None = None,
    ):
        b = self.BOUNDARY
        # Byte strings, and ints standing for that many b"x".
        self.segments: list[bytes | int] = [
            f'--{b}\r\nContent-Disposition: form-data; name="suite"\r\n\r\nbig\r\n'.encode()
        ]
        for name, file_name, length in files or [(field, filename, size)]:
            self.segments += [
                (
                    f'--{b}\r\nContent-Disposition: form-data; name="{name}"; '
                    f'filename="{file_name}"\r\nContent-Type: application/octet-stream\r\n\r\n'
                ).encode(),
                length,
                b"\r\n",
            ]
        self.segments.append(f"--{b}--\r\n".encode())
        self.sent = 0

    def __len__(self) -> int:
        return sum(s if isinstance(s, int) else len(s) for s in self.segments)

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
            for segment in self.segments:
                length = segment if isinstance(segment, int) else len(segment)
                if pos < length:
                    take = min(n - len(out), length - pos)
                    out += b"x" * take if isinstance(segment, int) else segment[pos : pos + take]
                    break
                pos -= length
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


LEAK_LIMIT = 8 * MB


@pytest.fixture(scope="module")
def small_limit_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server whose limit is 8 MiB, so uploads just over it are quick to send."""
    var = tmp_path_factory.mktemp("upload-leak-server")
    with serve(var, API_UPLOAD_MAX_BYTES=str(LEAK_LIMIT)) as running:
        yield running


def open_spool_files(server: Server) -> list[str]:
    """What the worker holds open under TMPDIR (a deleted file shows as "... (deleted)")."""
    fds = Path(f"/proc/{server.worker_pid()}/fd")
    targets = []
    for fd in fds.iterdir():
        with contextlib.suppress(FileNotFoundError):
            targets.append(os.readlink(fd))
    # gunicorn keeps its worker heartbeat file there too (wgunicorn-*): not an upload.
    return [
        t
        for t in targets
        if t.startswith(str(server.spool)) and not Path(t).name.startswith("wgunicorn-")
    ]


def open_files(server: Server) -> int:
    """How many files (not sockets or pipes: the client's socket may still be closing) the
    worker holds open."""
    fds = Path(f"/proc/{server.worker_pid()}/fd")
    count = 0
    for fd in fds.iterdir():
        with contextlib.suppress(FileNotFoundError):
            count += os.readlink(fd).startswith("/")
    return count


def spooled_files(server: Server) -> list[str]:
    return [p.name for p in server.spool.iterdir() if not p.name.startswith("wgunicorn-")]


@pytest.mark.parametrize(
    "files",
    [
        [("file", "just-over.jsonl", LEAK_LIMIT + 1)],
        # The largest body still let in by its length (limit + FORM_OVERHEAD_BYTES): stopped
        # while it streams in, where the issue saw the temporary file stay open.
        [("file", "under-the-length-check.jsonl", LEAK_LIMIT + MB - 4096)],
        [("file", "well-over.jsonl", 3 * LEAK_LIMIT)],  # refused by its length
        # Several files, together over the limit (and under the length check): the first two
        # are complete when the third passes it.
        [
            ("file", "one.jsonl", 3 * MB),
            ("extra", "two.jsonl", 3 * MB),
            ("more", "three.jsonl", 5 * MB // 2),
        ],
    ],
    ids=["just-over", "under-length-check", "well-over", "several-files"],
)
def test_a_refused_upload_leaves_no_temporary_file_open_or_on_disk(
    small_limit_server: Server, files: list[tuple[str, str, int]]
) -> None:
    server = small_limit_server
    # One accepted (and refused as a dataset) upload first: what the worker opens once.
    server.post(
        "/api/imports/swebench", files={"file": ("tiny.jsonl", b"{}\n")}, data={"suite": "s"}
    )
    files_before = open_files(server)
    open_before, spooled_before = set(open_spool_files(server)), set(spooled_files(server))
    for _ in range(3):
        body = MultipartBody(files=files)
        response = server.post(
            "/api/imports/swebench", data=body, headers={"Content-Type": body.content_type}
        )
        assert response.status_code == 413, response.text
        assert "API_UPLOAD_MAX_BYTES" in response.json()["detail"]
        # Right after the answer: a file left to the garbage collector would still be here.
        assert set(open_spool_files(server)) - open_before == set()
        assert set(spooled_files(server)) - spooled_before == set()
    assert open_files(server) <= files_before
