"""The artifacts storage on a local folder, read without ever following a link.

An attempt's folder holds what sandboxed code wrote (its workspace, while the attempt runs or
when it is kept), links included, and the web app reads it as a user who may read any host
file. Django's ``FileSystemStorage`` follows links, so ``leak -> /etc/shadow`` planted in a
workspace would be served as the host's file. ``ArtifactStorage`` reaches every name one
component at a time from its location with ``O_NOFOLLOW`` (``sandbox.filesystem``, the same
helpers the sandbox's own file methods use): a link anywhere in a name is refused as if the
file were absent (``LinkRefused``, a ``FileNotFoundError``), FIFOs and devices too; listings
(``entries``) give a link as a link with its target's text and never enter a folder through
one. ``runs.artifacts.storage()`` reads a plain ``FileSystemStorage`` configured by name
through this class, so no local configuration reads through links.

It imports nothing from Django's apps, so settings can name it before the apps load.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path, PurePosixPath

from django.core.exceptions import SuspiciousFileOperation
from django.core.files import File
from django.core.files.storage import FileSystemStorage

from sandbox.errors import SandboxPathError
from sandbox.filesystem import open_dir, open_file, open_parent


class LinkRefused(FileNotFoundError):
    """A name that is, or passes through, a link (or is no regular file): read as absent."""


@dataclass(frozen=True)
class Entry:
    """One entry of a folder, as it is on disk: links are never followed."""

    name: str
    kind: str  # "file", "dir", "link" or "other" (a FIFO, socket or device)
    size: int  # a link's: the length of its target's text
    target: str = ""  # a link's target, as stored (text written by sandboxed code)


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "link"
    if stat.S_ISDIR(mode):
        return "dir"
    return "file" if stat.S_ISREG(mode) else "other"


class ArtifactStorage(FileSystemStorage):
    """``FileSystemStorage`` whose reads, listings and deletes never follow a link below its
    location (the location itself may be one, an operator's choice)."""

    def _parts(self, name: str) -> list[str]:
        parts = [p for p in PurePosixPath(str(name).replace("\\", "/")).parts if p != "/"]
        if str(name).startswith(("/", "\\")) or ".." in parts or "\x00" in str(name):
            raise SuspiciousFileOperation(f"the artifact name {name!r} leaves the storage")
        return [p for p in parts if p != "."]

    @contextmanager
    def _nofollow(self, name: str) -> Iterator[None]:
        try:
            yield
        except SandboxPathError as exc:
            raise LinkRefused(f"{name}: {exc}") from None
        except NotADirectoryError as exc:
            raise LinkRefused(f"{name}: a part of it is not a folder") from exc

    def _lstat(self, name: str) -> os.stat_result:
        parts = self._parts(name)
        with self._nofollow(name):
            if not parts:
                return os.stat(self.location)
            with open_parent(Path(self.location), parts) as (dir_fd, last):
                return os.stat(last, dir_fd=dir_fd, follow_symlinks=False)

    # --- reads ------------------------------------------------------------------------------

    def _open(self, name: str, mode: str = "rb") -> File:
        if set(mode) & set("wax+"):
            self._check_no_link_above(name)
            # FileSystemStorage's private methods are missing from django-stubs.
            return super()._open(name, mode)  # type: ignore[misc]
        with self._nofollow(name):
            fd = open_file(Path(self.location), self._parts(name))
        handle = File(os.fdopen(fd, mode), name)
        handle.size = os.fstat(fd).st_size
        return handle

    def exists(self, name: str) -> bool:
        """Whether the entry is there (a link counts: it is there, as a link)."""
        try:
            self._lstat(name)
        except (FileNotFoundError, SuspiciousFileOperation):
            return False
        return True

    def size(self, name: str) -> int:
        return self._lstat(name).st_size

    def link_target(self, name: str) -> str | None:
        """The text of the link ``name``; None when it is no link."""
        parts = self._parts(name)
        with self._nofollow(name), open_parent(Path(self.location), parts) as (dir_fd, last):
            try:
                return os.readlink(last, dir_fd=dir_fd)
            except OSError:
                return None

    def entries(self, path: str) -> list[Entry]:
        """The folder's entries, sorted by name; links as links (with their target's text)."""
        found = []
        with self._nofollow(path), open_dir(Path(self.location), self._parts(path)) as dir_fd:
            for entry in os.scandir(dir_fd):
                try:
                    st = entry.stat(follow_symlinks=False)
                except FileNotFoundError:  # removed meanwhile
                    continue
                kind = _kind(st.st_mode)
                target = os.readlink(entry.name, dir_fd=dir_fd) if kind == "link" else ""
                found.append(Entry(entry.name, kind, st.st_size, target))
        return sorted(found, key=lambda e: e.name)

    def listdir(self, path: str) -> tuple[list[str], list[str]]:
        """(folders, everything else): a link to a folder is listed as a file, never a folder."""
        entries = self.entries(path)
        return (
            [e.name for e in entries if e.kind == "dir"],
            [e.name for e in entries if e.kind != "dir"],
        )

    # _datetime_from_timestamp: FileSystemStorage's, missing from django-stubs.
    def get_modified_time(self, name: str) -> datetime:
        return self._datetime_from_timestamp(self._lstat(name).st_mtime)  # type: ignore[attr-defined]

    def get_accessed_time(self, name: str) -> datetime:
        return self._datetime_from_timestamp(self._lstat(name).st_atime)  # type: ignore[attr-defined]

    def get_created_time(self, name: str) -> datetime:
        return self._datetime_from_timestamp(self._lstat(name).st_ctime)  # type: ignore[attr-defined]

    # --- writes -----------------------------------------------------------------------------

    def _save(self, name, content):
        # Our own code writes into folders it made, but never through a link someone else put.
        self._check_no_link_above(name)
        return super()._save(name, content)  # type: ignore[misc]  # missing from django-stubs

    def delete(self, name: str) -> None:
        """Remove the entry itself (a link, never what it points to; an empty folder)."""
        if not name:
            raise ValueError("The name must be given to delete().")
        parts = self._parts(name)
        with self._nofollow(name), open_parent(Path(self.location), parts) as (dir_fd, last):
            try:
                st = os.stat(last, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                return
            if stat.S_ISDIR(st.st_mode):
                os.rmdir(last, dir_fd=dir_fd)
            else:
                os.unlink(last, dir_fd=dir_fd)

    def _check_no_link_above(self, name: str) -> None:
        """Refuse a name whose existing folders include a link (what is missing is made)."""
        # A missing folder stops the walk with ENOENT after every existing one was opened
        # with O_NOFOLLOW (a link, even a dangling one, is ELOOP instead).
        with (
            self._nofollow(name),
            contextlib.suppress(FileNotFoundError),
            open_dir(Path(self.location), self._parts(name)[:-1]),
        ):
            pass
