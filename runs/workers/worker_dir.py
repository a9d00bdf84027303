"""The folder of one ``ab worker``: its ready file and its Celery processes' ``TMPDIR``
(multiprocessing's ``pymp-*`` folders, the pipeline's ``ab-git-*`` work folders). No Django.

A folder is in use while any process of its worker lives, not only while the ``ab worker``
that made it does: a Celery process that outlived it (before it died with it) still had its
attempt's temporary files there, and the leftovers pass that judged the folder by the ``ab
worker``'s pid alone deleted them under it (the attempt ended UNKNOWN, a FileNotFoundError in
its own folder). So every process that uses the folder holds a shared ``flock`` on its lock
file: ``ab worker`` from the start (``worker_dir_create``), Celery's main process and each
pool process (``worker_dir_join``, from ``runs.workers.tasks``'s signals; forked children
inherit it too). The kernel drops a process's locks when it dies, however it dies, so a folder
whose lock can be taken exclusively has no live user: ``worker_dir_remove_dead``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
from pathlib import Path

WORKER_DIR_PREFIX = "ab-worker-"
OWNER_FILE = "owner"
LOCK_FILE = "lock"
# The folder's path in its Celery processes' environment (they join its lock).
WORKER_DIR_ENV = "AB_WORKER_DIR"

# Lock files this process holds open (their locks last as long as the descriptors).
_held: dict[Path, int] = {}


def _start_time(pid: int) -> str | None:
    """A process's start time (clock ticks since boot): with the pid, names it uniquely."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def worker_dir_create() -> Path:
    """A folder of this process's own under the temporary directory, locked (shared) by this
    process until ``worker_dir_remove`` or its death, and naming its owner (pid and start
    time, for the record). The lock file gets its name only once locked, so no pass ever sees
    an unlocked lock file of a live worker."""
    folder = Path(tempfile.mkdtemp(prefix=f"{WORKER_DIR_PREFIX}{os.getpid()}-"))
    fresh = folder / f"{LOCK_FILE}.new"
    fd = os.open(fresh, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_SH)
    os.rename(fresh, folder / LOCK_FILE)
    _held[folder] = fd
    (folder / OWNER_FILE).write_text(f"{os.getpid()} {_start_time(os.getpid())}\n")
    return folder


def worker_dir_join(folder: Path | str | None = None) -> Path | None:
    """Hold the shared lock of ``folder`` (default: ``$AB_WORKER_DIR``) for the rest of this
    process's life. None when there is no such folder (a worker not started by ``ab``)."""
    folder = folder or os.environ.get(WORKER_DIR_ENV)
    if not folder:
        return None
    folder = Path(folder)
    if folder in _held:
        return folder
    try:
        fd = os.open(folder / LOCK_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    fcntl.flock(fd, fcntl.LOCK_SH)
    _held[folder] = fd
    return folder


def worker_dir_remove(folder: Path) -> None:
    """Remove this process's folder and let go of its lock."""
    shutil.rmtree(folder, ignore_errors=True)
    fd = _held.pop(folder, None)
    if fd is not None:
        os.close(fd)


def worker_dir_remove_dead(folder: Path) -> bool:
    """Remove ``folder`` when no process uses it any more (its lock can be taken
    exclusively; it is held while removing); True when removed. A folder without a lock file
    (made before locks were kept, or by another program) is judged by its owner file's
    process, and kept when it has none."""
    try:
        fd = os.open(folder / LOCK_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        if _owner_alive(folder):
            return False
        shutil.rmtree(folder, ignore_errors=True)
        return True
    except OSError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # a process of that worker still lives
        shutil.rmtree(folder, ignore_errors=True)
        return True
    finally:
        os.close(fd)


def _owner_alive(folder: Path) -> bool:
    try:
        pid_text, started = (folder / OWNER_FILE).read_text().split()
        pid = int(pid_text)
    except (OSError, ValueError):
        # Not written yet (a worker starting this instant), or made by another program: kept.
        return True
    return _start_time(pid) == started


def worker_dirs() -> list[Path]:
    """The worker folders under this machine's temporary directory (links are not ours)."""
    with contextlib.suppress(OSError):
        return [
            folder
            for folder in Path(tempfile.gettempdir()).glob(f"{WORKER_DIR_PREFIX}*")
            if folder.is_dir() and not folder.is_symlink()
        ]
    return []
