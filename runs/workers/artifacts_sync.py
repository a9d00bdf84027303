"""Make a worker's attempt artifacts readable by the web app through the artifacts storage.

The pipeline writes an attempt's files to the worker's local disk under ``ARTIFACTS_ROOT``.
With the default storage (a FileSystemStorage at ``ARTIFACTS_ROOT``) the web app reads that
same folder and there is nothing to do. With any other storage (S3 via
``ARTIFACTS_STORAGE_BACKEND``, or a FileSystemStorage elsewhere, e.g. a shared mount), the
worker uploads the folder after the attempt, under the same relative path.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.files.storage import FileSystemStorage, Storage, storages

from runs.artifact_storage import ArtifactStorage


def artifacts_storage_is_local() -> bool:
    storage = storages["artifacts"]
    return (
        isinstance(storage, FileSystemStorage)
        and Path(storage.location).resolve() == Path(settings.ARTIFACTS_ROOT).resolve()
    )


def local_attempt_dir(artifacts_dir: str) -> Path | None:
    """The attempt's folder on this machine; None when it is not under ARTIFACTS_ROOT."""
    if not artifacts_dir:
        return None
    root = Path(settings.ARTIFACTS_ROOT).resolve()
    folder = Path(artifacts_dir)
    folder = (folder if folder.is_absolute() else root / folder).resolve()
    if not folder.is_relative_to(root) or not folder.is_dir():
        return None
    return folder


def attempt_publish_artifacts(attempt) -> int:
    """Copy the attempt's local artifact files to the artifacts storage; returns how many.

    Existing names are overwritten (a retried attempt replaces its files), so running this
    twice is harmless.
    """
    if artifacts_storage_is_local():
        return 0
    folder = local_attempt_dir(attempt.artifacts_dir)
    if folder is None:
        return 0
    root = Path(settings.ARTIFACTS_ROOT).resolve()
    # The folder may hold a workspace (kept, or a try's leftover) with links sandboxed code
    # planted: it is walked and read without following any (ArtifactStorage), and only
    # regular files are uploaded, so the storage never receives a host file through a link.
    local = ArtifactStorage(location=str(root))
    storage = storages["artifacts"]
    copied = 0
    pending = [folder.relative_to(root).as_posix()]
    while pending:
        current = pending.pop()
        try:
            entries = local.entries(current)
        except FileNotFoundError:  # gone, or a link put in its place meanwhile
            continue
        for entry in entries:
            name = f"{current}/{entry.name}"
            if entry.kind == "dir":
                pending.append(name)
            elif entry.kind == "file":
                copied += _upload(local, storage, name)
    return copied


def _upload(local: ArtifactStorage, storage: Storage, name: str) -> int:
    try:
        handle = local.open(name)
    except FileNotFoundError:  # gone, or a link put in its place meanwhile
        return 0
    with handle:
        if storage.exists(name):
            storage.delete(name)
        storage.save(name, handle)
    return 1
