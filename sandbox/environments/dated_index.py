"""A package index as of a date: PyPI's simple pages holding only files uploaded before it.

Every install of an offline SWE-bench build (``build.py``) goes through this index, so pip
resolves what was current when the instance was made, not today's releases. PyPI's simple
API answers PEP 700's ``upload-time`` for every file; this serves, on the host's loopback,
``http://127.0.0.1:PORT/<cutoff>/simple/<project>/`` as a PEP 503 page listing the upstream
files whose upload time is before ``<cutoff>`` (links go to the upstream files themselves).

Why an index and not an installer option: the steps a build runs are the official
specification's own ``pip install`` commands, with whatever pip the date gives, and pip's
isolated build environments fetch their build requirements (setuptools, Cython, numpy) from
the same index. ``PIP_INDEX_URL`` reaches all of them, every pip since 8 reads a PEP 503 page,
and none of them has a date option: pip's ``--uploaded-prior-to`` only exists from 26.0 on, and
uv's ``--exclude-newer`` would replace pip by another resolver in the steps we mirror.

The upstream is ``SWEBENCH_PYPI_SIMPLE`` (default PyPI's), reached with the host's CA bundle.
"""

from __future__ import annotations

import html
import json
import os
import re
import ssl
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

DEFAULT_UPSTREAM = "https://pypi.org/simple"
HOST_CA = "/etc/ssl/certs/ca-certificates.crt"
JSON_ACCEPT = "application/vnd.pypi.simple.v1+json"
# Upstream project pages kept in memory per server (a build asks for a few hundred).
MAX_CACHED_PROJECTS = 2000
# Pages served kept per server: pip asks again for the same project and date (setuptools and
# wheel, for every isolated build), and a big project's page takes a parse of every file's time.
MAX_CACHED_PAGES = 500
UPSTREAM_TIMEOUT_SEC = 60
# The files of one release uploaded this long after its first still belong to it.
RELEASE_WINDOW = timedelta(days=7)


class UpstreamError(RuntimeError):
    """The upstream index could not be read (says which project and why)."""


def upstream() -> str:
    return (os.environ.get("SWEBENCH_PYPI_SIMPLE") or DEFAULT_UPSTREAM).rstrip("/")


def parse_time(text: str) -> datetime:
    """An ISO time (``2021-10-13T11:35:29Z``, ``...+02:00``, fractions) as aware UTC."""
    value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def format_time(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _context() -> ssl.SSLContext:
    cafile = HOST_CA if Path(HOST_CA).exists() else None
    return ssl.create_default_context(cafile=cafile)


def fetch_project(name: str, base: str | None = None) -> dict[str, Any] | None:
    """The upstream PEP 691 page of ``name`` (None when the index has no such project)."""
    url = f"{base or upstream()}/{normalize(name)}/"
    request = urllib.request.Request(url, headers={"Accept": JSON_ACCEPT})
    try:
        with urllib.request.urlopen(
            request, timeout=UPSTREAM_TIMEOUT_SEC, context=_context()
        ) as answer:
            data: dict[str, Any] = json.load(answer)
            return data
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise UpstreamError(f"{url}: HTTP {exc.code}") from exc
    except (OSError, ValueError) as exc:
        raise UpstreamError(f"{url}: {exc}") from exc


def files_before(project: dict[str, Any], cutoff: datetime) -> list[dict[str, Any]]:
    """The files of a PEP 691 project page uploaded strictly before ``cutoff``. A file with no
    upload time (no index we know serves one) is left out: its date cannot be told."""
    kept = []
    for entry in project.get("files", []):
        when = entry.get("upload-time")
        if when and parse_time(when) < cutoff:
            kept.append(entry)
    return kept


def simple_page(name: str, files: list[dict[str, Any]]) -> str:
    """A PEP 503 page (what pip 8+ reads) of ``files``, with requires-python, yanked and
    PEP 658 metadata attributes."""
    links = []
    for entry in files:
        href = entry["url"]
        hashes = entry.get("hashes") or {}
        if "sha256" in hashes:
            href += f"#sha256={hashes['sha256']}"
        attrs = [f'href="{html.escape(href)}"']
        if entry.get("requires-python"):
            attrs.append(f'data-requires-python="{html.escape(entry["requires-python"])}"')
        yanked = entry.get("yanked")
        if yanked:
            reason = yanked if isinstance(yanked, str) else ""
            attrs.append(f'data-yanked="{html.escape(reason)}"')
        metadata = entry.get("core-metadata", entry.get("dist-info-metadata"))
        if metadata:
            value = "true"
            if isinstance(metadata, dict) and "sha256" in metadata:
                value = f"sha256={metadata['sha256']}"
            attrs.append(f'data-core-metadata="{value}" data-dist-info-metadata="{value}"')
        links.append(f"<a {' '.join(attrs)}>{html.escape(entry['filename'])}</a><br/>")
    return (
        "<!DOCTYPE html>\n<html><head>"
        '<meta name="pypi:repository-version" content="1.0">'
        f"<title>Links for {html.escape(name)}</title></head><body>\n"
        + "\n".join(links)
        + "\n</body></html>\n"
    )


class DatedIndex:
    """The index server (a thread in this process). Use ``with DatedIndex() as index:``;
    ``index.url(cutoff)`` is the ``PIP_INDEX_URL`` of installs as of ``cutoff``."""

    def __init__(self, base: str | None = None):
        self.base = base or upstream()
        self._projects: dict[str, dict[str, Any] | None] = {}
        self._pages: dict[tuple[str, datetime], str] = {}
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.requests = 0

    def __enter__(self) -> DatedIndex:
        index = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                index._serve(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # pip's own log says what it fetched

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def port(self) -> int:
        assert self._server is not None, "the index is not serving"
        return int(self._server.server_address[1])

    def url(self, cutoff: str) -> str:
        return f"http://127.0.0.1:{self.port}/{cutoff}/simple/"

    def project(self, name: str) -> dict[str, Any] | None:
        key = normalize(name)
        with self._lock:
            if key in self._projects:
                return self._projects[key]
        data = fetch_project(key, self.base)
        with self._lock:
            if len(self._projects) >= MAX_CACHED_PROJECTS:
                self._projects.pop(next(iter(self._projects)))
            self._projects[key] = data
        return data

    def _serve(self, request: BaseHTTPRequestHandler) -> None:
        self.requests += 1
        parts = [p for p in request.path.split("?")[0].split("/") if p]
        if len(parts) == 2 and parts[1] == "simple":
            return _answer(request, 200, "<!DOCTYPE html><html><body></body></html>")
        if len(parts) != 3 or parts[1] != "simple":
            return _answer(request, 404, "not found")
        try:
            cutoff = parse_time(parts[0])
        except ValueError:
            return _answer(request, 404, f"not a date: {parts[0]}")
        page_key = (normalize(parts[2]), cutoff)
        with self._lock:
            page = self._pages.get(page_key)
        if page is None:
            try:
                data = self.project(parts[2])
            except UpstreamError as exc:
                return _answer(request, 502, str(exc))
            if data is None:
                return _answer(request, 404, f"no project {parts[2]}")
            page = simple_page(parts[2], files_before(data, cutoff))
            with self._lock:
                if len(self._pages) >= MAX_CACHED_PAGES:
                    self._pages.pop(next(iter(self._pages)))
                self._pages[page_key] = page
        _answer(request, 200, page)


def _answer(request: BaseHTTPRequestHandler, code: int, body: str) -> None:
    payload = body.encode()
    request.send_response(code)
    request.send_header("Content-Type", "text/html; charset=utf-8")
    request.send_header("Content-Length", str(len(payload)))
    request.send_header("Cache-Control", "max-age=600")
    request.end_headers()
    request.wfile.write(payload)


@contextmanager
def serving(base: str | None = None) -> Iterator[DatedIndex]:
    with DatedIndex(base) as index:
        yield index


# --- when a release was uploaded (for the pins a specification names exactly) ---------------


def release_uploaded(name: str, version: str, *, cache: Path | None = None) -> datetime | None:
    """When ``name==version`` was published: the upload of its last file within
    ``RELEASE_WINDOW`` of its first (a release's wheels follow its first file by minutes to
    hours; a wheel added months later for a new Python is not part of it). None when the index
    has no such release. Answers are kept in ``cache`` (a JSON file): they never change."""
    from packaging.utils import canonicalize_version

    key = f"{normalize(name)}=={canonicalize_version(version)}"
    known = _read_cache(cache)
    if key in known:
        return parse_time(known[key]) if known[key] else None
    data = fetch_project(name)
    times = sorted(
        parse_time(entry["upload-time"])
        for entry in (data or {}).get("files", [])
        if entry.get("upload-time")
        and _file_version(entry.get("filename", "")) == canonicalize_version(version)
    )
    found = max((t for t in times if t - times[0] <= RELEASE_WINDOW), default=None)
    if data is not None and cache is not None:
        known[key] = format_time(found) if found else ""
        _write_cache(cache, known)
    return found


def _file_version(filename: str) -> str | None:
    from packaging.utils import (
        InvalidSdistFilename,
        InvalidWheelFilename,
        canonicalize_version,
        parse_sdist_filename,
        parse_wheel_filename,
    )

    try:
        if filename.endswith(".whl"):
            return canonicalize_version(parse_wheel_filename(filename)[1])
        return canonicalize_version(parse_sdist_filename(filename)[1])
    except (InvalidWheelFilename, InvalidSdistFilename, ValueError):
        match = re.match(
            r"^[A-Za-z0-9_.]+?-(\d[^-]*?)(\.tar\.gz|\.zip|\.tar\.bz2|\.egg|\.exe)", filename
        )
        return canonicalize_version(match.group(1)) if match else None


def _read_cache(cache: Path | None) -> dict[str, str]:
    if cache is None:
        return {}
    try:
        data = json.loads(cache.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _write_cache(cache: Path, data: dict[str, str]) -> None:
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_name(f".{cache.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    tmp.rename(cache)
