"""Environments built from a Dockerfile and its build context, keyed by the context's content.

A task may give a build context (a folder holding a ``Dockerfile``) instead of an image name:
``task.yaml``'s ``environment.dockerfile``, or a Harbor task's ``environment/`` folder. The
engine builds it once: the image is tagged by a hash of every file of the context (path, mode,
bytes, link target) and the Dockerfile text actually built (``extra`` lines appended to it
included), so a second build of an unchanged context finds its tag and is a no-op, and a
changed file is a new image. Concurrent builds of one context wait on one lock.

Under ``<cache root>/dockerfiles/<key>/``: ``build.log`` (the engine's whole output, kept for
the task page and ``ab``) and ``build.json`` (tag, image id, bytes, seconds, when). The images
count toward the one disk budget of the environment cache (``SWEBENCH_CACHE_MAX_GB``,
``eviction``): before a build ``make_room`` frees what least recently used levels it can, and
after it the least recently used Dockerfile images nobody leases go first; an image bigger
than the whole budget is removed again and the build fails ``over-budget``.

Every failure is a ``DockerfileBuildError`` with a named ``reason`` (``REASONS``) and, for a
failed build, the tail of its log; never a traceback. No Django here.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import stat
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from sandbox.environments import cache, docker_images, eviction
from sandbox.environments.dockerfile_store import (
    IMAGE_REPOSITORY,
    LABEL,
    RECORD_NAME,
    folder_for,
    lease_name,
    stored_images,
    tag_for,
)
from sandbox.environments.dockerfile_store import label_of as _label
from sandbox.environments.repos import cache_root, locked

__all__ = ["IMAGE_REPOSITORY", "folder_for", "lease_name", "tag_for"]
LOG_NAME = "build.log"
# A context is sent whole to the engine on every cold build: a bound on what the hash and the
# upload read (a Harbor task's environment is a Dockerfile and a few files).
MAX_CONTEXT_BYTES = 256 * 1024 * 1024
MAX_CONTEXT_FILES = 20_000
LOG_TAIL_LINES = 25
# The build containers' network (``docker build --network``): unset, the engine's default
# bridge (a Dockerfile's apt-get reaches the mirror, and the host's addresses too); "none"
# for no network at all. Builds run what a task's Dockerfile says, as root in the engine.
BUILD_NETWORK_ENV = "DOCKERFILE_BUILD_NETWORK"

ENGINE_UNAVAILABLE = "engine-unavailable"
BAD_CONTEXT = "bad-context"
BUILD_FAILED = "build-failed"
BUILD_TIMEOUT = "build-timeout"
OVER_BUDGET = "over-budget"
REASONS = (ENGINE_UNAVAILABLE, BAD_CONTEXT, BUILD_FAILED, BUILD_TIMEOUT, OVER_BUDGET)


class DockerfileBuildError(Exception):
    """A build that did not give an image; ``reason`` is one of ``REASONS``."""

    def __init__(self, reason: str, message: str, *, log_path: Path | None = None):
        self.reason = reason
        self.log_path = log_path
        super().__init__(f"[{reason}] {message}")


@dataclass(frozen=True)
class DockerfileImage:
    """A built (or found) image of one context."""

    key: str
    tag: str
    image_id: str
    bytes: int
    build_seconds: float  # the cold build's seconds (0 when it was never built here)
    built_at: float
    reused: bool  # True when the tag existed: this call built nothing
    log_path: str

    def record(self) -> dict:
        return asdict(self)


def context_key(context: Path, *, dockerfile_text: str) -> str:
    """The hash of everything the engine would be sent: each file's relative path, kind,
    executable bit and bytes (a link's target), and the Dockerfile text built."""
    context = Path(context)
    digest = hashlib.sha256()
    digest.update(b"dockerfile\0" + dockerfile_text.encode() + b"\0")
    total = 0
    for files, path in enumerate(sorted(_walk(context)), start=1):
        rel = path.relative_to(context).as_posix()
        info = path.lstat()
        if files > MAX_CONTEXT_FILES:
            raise DockerfileBuildError(
                BAD_CONTEXT, f"{context}: more than {MAX_CONTEXT_FILES} files in the build context"
            )
        if stat.S_ISLNK(info.st_mode):
            digest.update(b"L" + rel.encode() + b"\0" + os.readlink(path).encode() + b"\0")
        elif stat.S_ISDIR(info.st_mode):
            digest.update(b"D" + rel.encode() + b"\0")
        elif stat.S_ISREG(info.st_mode):
            total += info.st_size
            if total > MAX_CONTEXT_BYTES:
                raise DockerfileBuildError(
                    BAD_CONTEXT,
                    f"{context}: the build context is over {MAX_CONTEXT_BYTES // 2**20} MiB",
                )
            executable = b"x" if info.st_mode & 0o111 else b"-"
            digest.update(b"F" + executable + rel.encode() + b"\0")
            digest.update(str(info.st_size).encode() + b"\0")
            with open(path, "rb") as handle:
                for chunk in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(chunk)
        else:
            raise DockerfileBuildError(
                BAD_CONTEXT, f"{path}: not a file, folder or link (a device or a pipe)"
            )
    return digest.hexdigest()


def _walk(folder: Path) -> Iterator[Path]:
    for entry in os.scandir(folder):
        path = Path(entry.path)
        yield path
        if entry.is_dir(follow_symlinks=False):
            yield from _walk(path)


def dockerfile_text(context: Path, extra: str = "") -> str:
    """The context's Dockerfile, with ``extra`` lines appended (a layer the harness adds)."""
    path = Path(context) / "Dockerfile"
    if not path.is_file() or path.is_symlink():
        raise DockerfileBuildError(BAD_CONTEXT, f"{path}: no Dockerfile in the build context")
    text = path.read_text(encoding="utf-8", errors="replace")
    return text if not extra else text.rstrip("\n") + "\n" + extra.rstrip("\n") + "\n"


def build_log_tail(key: str, lines: int = LOG_TAIL_LINES) -> str:
    path = folder_for(key) / LOG_NAME
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def read_record(key: str) -> dict | None:
    try:
        return json.loads((folder_for(key) / RECORD_NAME).read_text())
    except (OSError, ValueError):
        return None


def build(
    context: Path,
    *,
    timeout_sec: float,
    extra: str = "",
    max_bytes: int | None = None,
    network: str | None = None,
) -> DockerfileImage:
    """Build ``context`` (its Dockerfile plus ``extra``) into an image, or find it built.

    ``max_bytes`` is the environment cache's budget (None: none); ``network`` the build
    containers' network (None: ``DOCKERFILE_BUILD_NETWORK``, else the engine's default;
    ``none`` gives the build no network at all). Raises ``DockerfileBuildError`` with a named
    reason."""
    if network is None:
        network = os.environ.get(BUILD_NETWORK_ENV, "").strip() or None
    context = Path(context)
    if not context.is_dir():
        raise DockerfileBuildError(BAD_CONTEXT, f"{context}: no such build context folder")
    text = dockerfile_text(context, extra)
    key = context_key(context, dockerfile_text=text)
    tag = tag_for(key)
    if not docker_images.engine_available():
        raise DockerfileBuildError(ENGINE_UNAVAILABLE, "the Docker engine does not answer")
    with locked(lease_name(key)):
        found = _found(key, tag)
        if found is not None:
            cache.touch(lease_name(key))
            _remember(context, found.record() | {"status": "found"})
            return found
        try:
            if max_bytes is not None:
                eviction.make_room(max_bytes=max_bytes, need=_estimate())
            built = _build(
                context, key=key, tag=tag, text=text, timeout_sec=timeout_sec, network=network
            )
            if max_bytes is not None:
                _keep_within(built, max_bytes)
        except DockerfileBuildError as exc:
            failed = {"key": key, "status": exc.reason, "message": str(exc)}
            _remember(context, failed | {"log_path": str(exc.log_path or "")})
            raise
        cache.touch(lease_name(key))
        _remember(context, built.record() | {"status": "built"})
        return built


def _remembered(context: Path) -> Path:
    name = hashlib.sha256(str(Path(context).resolve()).encode()).hexdigest()[:32]
    return cache_root() / "dockerfiles" / "by-context" / f"{name}.json"


def _remember(context: Path, record: dict) -> None:
    path = _remembered(context)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record | {"context": str(context), "at": time.time()}))
    tmp.replace(path)


def last_build(context: Path | str) -> dict | None:
    """The last build of ``context`` here (found, built, or its failure's reason and
    message) with the tail of its log, or None when it was never built."""
    try:
        record = json.loads(_remembered(Path(context)).read_text())
    except (OSError, ValueError):
        return None
    record["log_tail"] = build_log_tail(record.get("key", ""), 40) if record.get("key") else ""
    return record


def _found(key: str, tag: str) -> DockerfileImage | None:
    if _label(tag) != key:
        return None
    record = read_record(key) or {}
    return DockerfileImage(
        key=key,
        tag=tag,
        image_id=_image_id(tag),
        bytes=docker_images.image_size(tag) or 0,
        build_seconds=float(record.get("build_seconds") or 0.0),
        built_at=float(record.get("built_at") or 0.0),
        reused=True,
        log_path=str(folder_for(key) / LOG_NAME),
    )


def _build(
    context: Path, *, key: str, tag: str, text: str, timeout_sec: float, network: str | None
) -> DockerfileImage:
    folder = folder_for(key)
    folder.mkdir(parents=True, exist_ok=True)
    log_path = folder / LOG_NAME
    command = [
        "docker",
        "build",
        "--rm",
        "--force-rm",
        "-f",
        "-",
        "-t",
        tag,
        "--label",
        f"{LABEL}={key}",
    ]
    if network:
        command += ["--network", network]
    command.append(str(context))
    started = time.monotonic()
    with open(log_path, "w", encoding="utf-8") as log:
        log.write(f"$ {' '.join(command)}\n")
        log.flush()
        process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its group is killed whole on a timeout
            env={**os.environ, "DOCKER_BUILDKIT": "0"},  # the log is the classic builder's text
        )
        try:
            process.communicate(text.encode(), timeout=timeout_sec)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            log.write(f"\n[build-timeout] killed after {timeout_sec:g} s\n")
            raise DockerfileBuildError(
                BUILD_TIMEOUT,
                f"the build of {context} did not end within {timeout_sec:g} s "
                f"(the task's build timeout); log: {log_path}",
                log_path=log_path,
            ) from None
    seconds = time.monotonic() - started
    if process.returncode != 0:
        raise DockerfileBuildError(
            BUILD_FAILED,
            f"the build of {context} failed (exit {process.returncode}); log: {log_path}; "
            f"its end:\n{build_log_tail(key)}",
            log_path=log_path,
        )
    built = DockerfileImage(
        key=key,
        tag=tag,
        image_id=_image_id(tag),
        bytes=docker_images.image_size(tag) or 0,
        build_seconds=round(seconds, 2),
        built_at=time.time(),
        reused=False,
        log_path=str(log_path),
    )
    (folder / RECORD_NAME).write_text(json.dumps(built.record() | {"context": str(context)}))
    return built


def _image_id(tag: str) -> str:
    done = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{ .Id }}", tag], capture_output=True, text=True
    )
    return done.stdout.strip()


# --- the disk budget ------------------------------------------------------------------------


def _estimate() -> int:
    sizes = sorted(image.bytes for image in stored_images())
    return sizes[len(sizes) // 2] if sizes else 0


def _keep_within(built: DockerfileImage, max_bytes: int) -> None:
    """Refuse an image over the whole budget; else make room for it among every kind the
    cache holds (``eviction.make_room``: least recently used first), never evicting it."""
    if built.bytes > max_bytes:
        docker_images.remove_image(built.tag)
        raise DockerfileBuildError(
            OVER_BUDGET,
            f"the image of this context takes {eviction.human(built.bytes)}, over the whole "
            f"environment cache budget ({eviction.BUDGET_ENV}={max_bytes / eviction.GB:g}); "
            "removed again",
            log_path=Path(built.log_path),
        )
    with cache.lease(lease_name(built.key)):
        eviction.make_room(max_bytes=max_bytes)


@contextmanager
def in_use(key: str) -> Iterator[None]:
    """Hold the image of ``key`` for an attempt: eviction leaves it alone meanwhile."""
    with cache.lease(lease_name(key)):
        yield
