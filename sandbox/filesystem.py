"""Host-side access to a sandbox's workspace that sandboxed code cannot redirect.

Both backends bind the workspace from a host directory, so files are read and written here,
on the host, without a round trip through the sandbox. The sandboxed code controls what is in
that directory, symlinks included, and the caller usually runs as root: every path component is
therefore opened relative to its parent's file descriptor with ``O_NOFOLLOW``, so neither ``..``
nor a symlink (even one swapped in between a check and the open) can lead outside.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sandbox.base import AGENT_UID, SandboxConfig
from sandbox.errors import SandboxPathError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO planted in the workspace must not hang the reader.
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_CHUNK = 1 << 20


def workspace_parts(config: SandboxConfig, path: str) -> list[str]:
    """Split a sandbox path into components below the workspace, refusing anything outside.

    ``path`` is absolute inside the sandbox (``/workspace/repo/a.py``) or relative to the
    workspace (``repo/a.py``).
    """
    if "\x00" in path:
        raise SandboxPathError(f"path contains a NUL byte: {path!r}")
    root = config.workspace_path.rstrip("/")
    if path.startswith("/"):
        if path != root and not path.startswith(root + "/"):
            raise SandboxPathError(f"path {path!r} is outside the workspace {root}")
        path = path[len(root) :]
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise SandboxPathError(f"path {path!r} contains '..'")
    return parts


def _chown_for_agent(fd: int) -> None:
    # Files the host writes as root must stay writable for the sandbox user.
    if os.geteuid() == 0:
        os.fchown(fd, AGENT_UID, AGENT_UID)


def _open_child_dir(parent_fd: int, name: str, *, create: bool, shown: str) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    except FileNotFoundError:
        if not create:
            raise
        os.mkdir(name, 0o755, dir_fd=parent_fd)
        fd = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
        _chown_for_agent(fd)
        return fd
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise SandboxPathError(f"{shown!r} is a symlink or not a directory") from exc
        raise


@contextmanager
def open_dir(workspace: Path, parts: list[str], *, create: bool = False) -> Iterator[int]:
    """A file descriptor on ``workspace/parts...``, reached without following symlinks."""
    fd = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for i, name in enumerate(parts):
            child = _open_child_dir(fd, name, create=create, shown="/".join(parts[: i + 1]))
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def read_file(workspace: Path, parts: list[str]) -> bytes:
    if not parts:
        raise SandboxPathError("read_file needs a file path, not the workspace itself")
    fd = open_file(workspace, parts)
    with os.fdopen(fd, "rb") as fh:
        return fh.read()


def open_file(root: Path, parts: list[str]) -> int:
    """A read-only descriptor on the regular file ``root/parts...``, every component reached
    without following a link (SandboxPathError for a link, a FIFO or a device)."""
    if not parts:
        raise SandboxPathError("a file path is needed, not the folder itself")
    with open_dir(root, parts[:-1]) as dir_fd:
        return open_regular(dir_fd, parts[-1], shown="/".join(parts))


@contextmanager
def open_parent(root: Path, parts: list[str]) -> Iterator[tuple[int, str]]:
    """(descriptor on the folder holding ``root/parts...``, the last name), the folder reached
    without following links: for an lstat, a readlink or an unlink of the entry itself."""
    if not parts:
        raise SandboxPathError("a path below the folder is needed")
    with open_dir(root, parts[:-1]) as dir_fd:
        yield dir_fd, parts[-1]


def open_regular(dir_fd: int, name: str, *, shown: str) -> int:
    """Open ``name`` in ``dir_fd`` for reading: only a regular file, never through a link."""
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SandboxPathError(f"{shown!r} is a symlink") from exc
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise SandboxPathError(f"{shown!r} is not a regular file")
    os.set_blocking(fd, True)
    return fd


def _replace_entry(dir_fd: int, name: str) -> None:
    """Remove a non-directory entry so a new file is created in its place, never through it."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        raise SandboxPathError(f"{name!r} is a directory")
    os.unlink(name, dir_fd=dir_fd)


def write_file(workspace: Path, parts: list[str], content: bytes, *, mode: int = 0o644) -> None:
    if not parts:
        raise SandboxPathError("write_file needs a file path, not the workspace itself")
    with open_dir(workspace, parts[:-1], create=True) as dir_fd:
        _write_at(dir_fd, parts[-1], content, mode=mode)


def _write_at(dir_fd: int, name: str, content: bytes, *, mode: int) -> None:
    _replace_entry(dir_fd, name)
    fd = os.open(name, _WRITE_FLAGS, mode, dir_fd=dir_fd)
    _chown_for_agent(fd)
    with os.fdopen(fd, "wb") as fh:
        fh.write(content)


def copy_in(host_dir: Path, workspace: Path, parts: list[str]) -> None:
    """Copy the contents of the (trusted) host directory into the workspace directory."""
    if not host_dir.is_dir():
        raise FileNotFoundError(f"copy_in: {host_dir} is not a directory")
    with open_dir(workspace, parts, create=True) as dest_fd:
        _copy_tree_in(host_dir, dest_fd)


def _copy_tree_in(src: Path, dest_fd: int) -> None:
    for entry in os.scandir(src):
        if entry.is_symlink():
            _replace_entry(dest_fd, entry.name)
            os.symlink(os.readlink(entry.path), entry.name, dir_fd=dest_fd)
            if os.geteuid() == 0:
                os.chown(entry.name, AGENT_UID, AGENT_UID, dir_fd=dest_fd, follow_symlinks=False)
        elif entry.is_dir():
            child = _open_child_dir(dest_fd, entry.name, create=True, shown=entry.path)
            try:
                _copy_tree_in(Path(entry.path), child)
            finally:
                os.close(child)
        elif entry.is_file():
            mode = stat.S_IMODE(entry.stat().st_mode)
            _write_at(dest_fd, entry.name, Path(entry.path).read_bytes(), mode=mode)


def copy_out(workspace: Path, parts: list[str], host_dir: Path) -> None:
    """Copy the contents of a workspace directory to the host. Symlinks are copied as links,
    never followed; FIFOs, sockets and devices are skipped."""
    host_dir.mkdir(parents=True, exist_ok=True)
    with open_dir(workspace, parts) as src_fd:
        _copy_tree_out(src_fd, host_dir, shown="/".join(parts) or ".")


def _copy_tree_out(src_fd: int, dest: Path, *, shown: str) -> None:
    for entry in os.scandir(src_fd):
        target = dest / entry.name
        where = f"{shown}/{entry.name}"
        if entry.is_symlink():
            if target.is_symlink() or target.exists():
                target.unlink()
            target.symlink_to(os.readlink(entry.name, dir_fd=src_fd))
        elif entry.is_dir(follow_symlinks=False):
            if target.is_symlink():  # left by an earlier copy: never write through it
                target.unlink()
            target.mkdir(exist_ok=True)
            child = _open_child_dir(src_fd, entry.name, create=False, shown=where)
            try:
                _copy_tree_out(child, target, shown=where)
            finally:
                os.close(child)
        elif entry.is_file(follow_symlinks=False):
            fd = open_regular(src_fd, entry.name, shown=where)
            with os.fdopen(fd, "rb") as fh:
                mode = stat.S_IMODE(os.fstat(fh.fileno()).st_mode)
                if target.is_symlink():
                    target.unlink()
                with open(target, "wb") as out:
                    while chunk := fh.read(_CHUNK):
                        out.write(chunk)
                target.chmod(mode & 0o777)


def chown_tree_for_agent(workspace: Path) -> None:
    """Give the workspace to the sandbox user so commands inside can write it.

    Runs before the sandbox's first command, but the tree may hold links (a cloned repository
    can): ``os.fwalk`` descends by descriptor, never through a link, and each entry is changed
    relative to its folder's descriptor without following it, so a link swapped in for a
    folder cannot make it hand out anything outside.
    """
    if os.geteuid() != 0:
        return
    os.chown(workspace, AGENT_UID, AGENT_UID)
    for _, dirnames, filenames, dir_fd in os.fwalk(workspace, follow_symlinks=False):
        for name in dirnames + filenames:
            os.chown(name, AGENT_UID, AGENT_UID, dir_fd=dir_fd, follow_symlinks=False)


class HostWorkspaceFiles:
    """The Sandbox file methods for backends whose workspace is a host directory (Docker's bind
    mount, bubblewrap's bind): every access goes through the checked helpers above."""

    config: SandboxConfig

    def read_file(self, path: str) -> bytes:
        return read_file(self.config.workspace, workspace_parts(self.config, path))

    def write_file(self, path: str, content: bytes | str) -> None:
        data = content.encode() if isinstance(content, str) else content
        write_file(self.config.workspace, workspace_parts(self.config, path), data)

    def copy_in(self, host_dir: Path, sandbox_dir: str) -> None:
        copy_in(host_dir, self.config.workspace, workspace_parts(self.config, sandbox_dir))

    def copy_out(self, sandbox_dir: str, host_dir: Path) -> None:
        copy_out(self.config.workspace, workspace_parts(self.config, sandbox_dir), host_dir)
