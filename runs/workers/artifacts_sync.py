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
from django.core.files import File
from django.core.files.storage import FileSystemStorage, storages


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
    storage = storages["artifacts"]
    copied = 0
    for path in sorted(folder.rglob("*")):
        if not path.is_file() or path.is_symlink():
            continue
        name = path.relative_to(root).as_posix()
        if storage.exists(name):
            storage.delete(name)
        with path.open("rb") as fh:
            storage.save(name, File(fh, name=path.name))
        copied += 1
    return copied
