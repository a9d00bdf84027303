"""Files out of Docker images without running them: a directory (a SWE-bench instance's
testbed) and the user database the sandbox's account files start from. Each creates a
container that never starts, streams its archive, and removes it."""

from __future__ import annotations

import io
import os
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors

from sandbox.docker_engine import EXPORT_LABEL, MANAGED_LABEL
from sandbox.docker_engine import engine_client as _client
from sandbox.docker_engine import first_line as _first_line
from sandbox.errors import SandboxError, SandboxUnavailable


def _export_labels() -> dict[str, str]:
    """An export container's labels: the export label's value is the creating process's pid,
    so whoever looks can tell a live process's export (seconds long) from one a killed process
    left (the tests of parallel workers remove only the latter)."""
    return {MANAGED_LABEL: "1", EXPORT_LABEL: str(os.getpid())}


# image id -> (passwd, group): read once per image and process (a container create, ~0.1 s).
_IMAGE_ACCOUNTS: dict[str, tuple[str, str]] = {}


def image_accounts(client: docker.DockerClient, image_id: str) -> tuple[str, str]:
    """The image's /etc/passwd and /etc/group (empty when missing), read without running it."""
    if image_id in _IMAGE_ACCOUNTS:
        return _IMAGE_ACCOUNTS[image_id]
    texts = []
    container = client.containers.create(
        image_id,
        command=["true"],
        labels=_export_labels(),
        network_disabled=True,
    )
    try:
        for path in ("/etc/passwd", "/etc/group"):
            try:
                chunks, _stat = container.get_archive(path)
            except docker.errors.NotFound:
                texts.append("")
                continue
            try:
                with tarfile.open(fileobj=_ChunkReader(chunks), mode="r|") as archive:
                    member = next(iter(archive), None)
                    extracted = archive.extractfile(member) if member is not None else None
                    texts.append(extracted.read().decode(errors="replace") if extracted else "")
            finally:
                # The engine removes no container whose archive it is still sending.
                for _chunk in chunks:
                    pass
    finally:
        _remove_export_container(container)
    _IMAGE_ACCOUNTS[image_id] = (texts[0], texts[1])
    return _IMAGE_ACCOUNTS[image_id]


def export_image_dir(image: str, path: str, dest: Path, *, max_bytes: int | None = None) -> None:
    """Copy the contents of directory ``path`` of ``image`` into ``dest`` without running the
    image (create a container, stream its archive, remove the container). Over ``max_bytes``
    of files (the sandbox's disk quota, say) it stops with SandboxError ``[disk-quota]``."""
    try:
        client = _client()
        client.ping()
    except Exception as exc:
        raise SandboxUnavailable(f"the Docker engine does not answer: {_first_line(exc)}") from exc
    container = None
    try:
        try:
            container = client.containers.create(
                image,
                command=["true"],
                labels=_export_labels(),
                network_disabled=True,
            )
            chunks, _stat = container.get_archive(path)
        except docker.errors.DockerException as exc:
            raise SandboxError(f"cannot export {path} from {image}: {_first_line(exc)}") from exc
        dest.mkdir(parents=True, exist_ok=True)
        left = [max_bytes]

        def capped(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
            kept = _strip_top_dir(member, dest)
            if kept is not None and left[0] is not None:
                left[0] -= member.size
                if left[0] < 0:
                    raise SandboxError(
                        f"[disk-quota] {path} of {image} is over {max_bytes} bytes "
                        f"(at {member.name!r})"
                    )
            return kept

        try:
            with tarfile.open(fileobj=_ChunkReader(chunks), mode="r|") as archive:
                archive.extractall(dest, filter=capped)
        finally:
            # Read the rest (written nowhere), on success too: tarfile stops at the archive's
            # end blocks and leaves the engine's padding unread, and the engine removes no
            # container whose archive it is still sending (the removal failed silently and
            # left one Created container per export).
            for _chunk in chunks:
                pass
    finally:
        if container is not None:
            _remove_export_container(container)
        client.close()


def _remove_export_container(container: Any) -> None:
    """Remove an export's container; a busy engine (a removal timing out under load) gets two
    more tries, since a container left here is never run and nothing else would remove it."""
    for attempt in range(3):
        try:
            container.remove(force=True)
            return
        except docker.errors.NotFound:
            return
        except Exception:  # requests errors surface raw
            if attempt == 2:
                return
            time.sleep(1 + attempt)


def _strip_top_dir(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
    """The archive holds ``<basename>/...``: extract its contents, not the directory, and
    apply tarfile's ``data`` filter (no absolute paths, no links leaving ``dest``)."""
    _head, _, rest = member.name.partition("/")
    if not rest:
        return None
    changes: dict[str, Any] = {"name": rest}
    if member.islnk():  # hard links name another member, which moved too
        changes["linkname"] = member.linkname.partition("/")[2]
    return tarfile.data_filter(member.replace(**changes, deep=False), dest)


class _ChunkReader(io.RawIOBase):
    """A file object over the engine's chunk iterator, so the archive streams to disk."""

    def __init__(self, chunks: Iterator[bytes]):
        self._chunks = iter(chunks)
        self._pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            try:
                self._pending = next(self._chunks)
            except StopIteration:
                return 0
        size = min(len(buffer), len(self._pending))
        buffer[:size] = self._pending[:size]
        self._pending = self._pending[size:]
        return size


def remove_stale_export_containers(*, older_than_sec: float = 600) -> int:
    """Remove export containers (``image_accounts``, ``export_image_dir``) created more than
    ``older_than_sec`` ago: an export lasts seconds, so such a container was left by a process
    killed mid-export (a worker's SIGKILL), which nothing else would remove. Returns how many."""
    client = _client()
    try:
        stale = [
            c
            for c in client.api.containers(all=True, filters={"label": EXPORT_LABEL})
            if time.time() - float(c.get("Created", 0)) > older_than_sec
        ]
        removed = 0
        for c in stale:
            try:
                client.api.remove_container(c["Id"], force=True)
                removed += 1
            except docker.errors.NotFound:
                continue
        return removed
    finally:
        client.close()
