"""A disk quota per sandbox: one ext4 filesystem of a fixed size holds everything the sandbox
may write (the workspace, ``/tmp`` and the agent's home), so a command that writes without end
stops at ``ENOSPC`` and the host's disk use stays bounded by the quota.

The filesystem lives in a sparse image file under ``SANDBOX_DISK_ROOT`` (default
/var/lib/agentbench/sandbox-disks), loop-mounted at ``<root>/ab-<name>``: it takes host disk
only as it fills, up to its size, and holds at most ``files`` files when given (its inode
count: ``SANDBOX_MAX_FILES``), since a tree of many empty files costs the host per file when
it is read back (git, the patch, the attempt's page). At start the workspace's contents are
copied into it and the filesystem's ``ws`` folder is bound over the workspace directory, so
the host side (file methods, the pipeline's git) and both backends see the same tree; ``tmp``
and ``home`` replace the tmpfs mounts. At close the tree is copied back when asked
(``disk_copy_back``), then the filesystem is shut down without writing back what it still
caches (its image is deleted next: writing it out only to delete it costs ~0.1 s per 100 MB),
unmounted, and the image deleted.

It needs root, a loop device and ``mkfs.ext4``. Where any is missing the sandbox runs without
a quota (logged, and ``Sandbox.disk_quota`` says why): ``/tmp`` and the home stay tmpfs (they
count against the memory limit), the workspace is unbounded.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import struct
import subprocess
from pathlib import Path

from sandbox import mounts
from sandbox.base import AGENT_UID

log = logging.getLogger(__name__)

DEFAULT_ROOT = Path("/var/lib/agentbench/sandbox-disks")
# Below this much free space (or with no free inode) the quota counts as full.
FULL_BELOW_BYTES = 1024 * 1024
TOOL_TIMEOUT_SEC = 60
# ext4's shutdown ioctl (_IOR('X', 125, __u32)) and its flag that drops the journal's and the
# page cache's unwritten data instead of flushing them.
EXT4_IOC_SHUTDOWN = 0x8004587D
EXT4_GOING_FLAGS_NOLOGFLUSH = 0x2


def disk_root() -> Path:
    return Path(os.environ.get("SANDBOX_DISK_ROOT") or DEFAULT_ROOT)


def _run(args: list[str]) -> None:
    done = subprocess.run(args, capture_output=True, text=True, timeout=TOOL_TIMEOUT_SEC)
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        raise OSError(f"{args[0]} failed: {lines[-1] if lines else done.returncode}")


class SandboxDisk:
    """One sandbox's quota filesystem (see the module docstring)."""

    def __init__(
        self, name: str, size_mb: int, *, root: Path | None = None, files: int | None = None
    ):
        self.name = name
        self.size_mb = size_mb
        self.files = files
        self.root = root or disk_root()
        self.image = self.root / f"{name}.img"
        self.mountpoint = self.root / name
        self._bound: Path | None = None

    @property
    def workspace(self) -> Path:
        return self.mountpoint / "ws"

    @property
    def tmp(self) -> Path:
        return self.mountpoint / "tmp"

    @property
    def home(self) -> Path:
        return self.mountpoint / "home"

    def describe(self) -> str:
        try:
            inodes = f", {os.statvfs(self.mountpoint).f_files} inodes"
        except OSError:
            inodes = ""
        return f"ext4 image of {self.size_mb} MiB{inodes} ({self.image})"

    def inode_count(self) -> int:
        """``files``, but never more inodes than one per 4 KiB (mkfs's densest default):
        their tables take space from the quota's bytes. ext4 rounds it to its inode tables."""
        return min(self.files or 0, self.size_mb * 1024 * 1024 // 4096)

    def create(self, workspace: Path) -> None:
        """Make and mount the filesystem, copy ``workspace`` into it and bind it over
        ``workspace``. Raises OSError (nothing left behind) when this host cannot."""
        if os.geteuid() != 0:
            raise OSError("a disk quota needs root (a loop mount)")
        if shutil.which("mkfs.ext4") is None:
            raise OSError("mkfs.ext4 is not installed (apt-get install e2fsprogs)")
        self.remove(workspace=None)  # left by a crashed worker under the same name
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            self.root.chmod(0o755)  # bwrap, as the sandbox uid, passes through it
            with open(self.image, "wb") as image:
                image.truncate(self.size_mb * 1024 * 1024)
            # No journal (a throw-away filesystem), nothing reserved for root, inode tables
            # left to read as the sparse file's zeros (noinit_itable below).
            inodes = ["-N", str(self.inode_count())] if self.files else []
            _run(
                [
                    "mkfs.ext4",
                    "-q",
                    "-F",
                    "-m",
                    "0",
                    "-O",
                    "^has_journal",
                    *inodes,
                    "-E",
                    "lazy_itable_init=1,nodiscard",
                    str(self.image),
                ]
            )
            self.mountpoint.mkdir(mode=0o755, exist_ok=True)
            _run(
                [
                    "mount",
                    "-o",
                    "loop,nosuid,nodev,noinit_itable",
                    str(self.image),
                    str(self.mountpoint),
                ]
            )
            self.mountpoint.chmod(0o755)
            self.tmp.mkdir(mode=0o1777)
            self.tmp.chmod(0o1777)
            self.home.mkdir(mode=0o755)
            os.chown(self.tmp, AGENT_UID, AGENT_UID)
            os.chown(self.home, AGENT_UID, AGENT_UID)
            # cp -a keeps modes, owners, links and times; the backends hand it to the agent.
            _run(["cp", "-a", "--", f"{workspace}/.", f"{self.workspace}/"])
            os.chown(self.workspace, AGENT_UID, AGENT_UID)
            mounts.bind(self.workspace, workspace)
            self._bound = workspace
        except BaseException:
            self.remove(workspace=None)
            raise

    def full(self) -> bool:
        """Whether the quota is (nearly) used up: what a command's ENOSPC came from."""
        try:
            st = os.statvfs(self.mountpoint)
        except OSError:
            return False
        return st.f_bavail * st.f_frsize < FULL_BELOW_BYTES or bool(st.f_files and not st.f_favail)

    def remove(self, *, workspace: Path | None, copy_back: bool = False) -> None:
        """Unbind the workspace (copying the tree back into it first when ``copy_back``),
        drop the filesystem's unwritten data, unmount it and delete its image. Safe to
        repeat."""
        if self._bound is not None:
            mounts.unmount(self._bound)
            if copy_back and workspace is not None:
                _clear(workspace)
                _run(["cp", "-a", "--", f"{self.workspace}/.", f"{workspace}/"])
            self._bound = None
        self._discard()
        with contextlib.suppress(FileNotFoundError):
            mounts.unmount(self.mountpoint)
            self.mountpoint.rmdir()
        with contextlib.suppress(FileNotFoundError):
            self.image.unlink()

    def _discard(self) -> None:
        """Shut the filesystem down, dropping what it has not written to its image yet. Only
        ever ours: the filesystem mounted at the mountpoint must sit on a loop device whose
        backing file is this image (a shutdown of any other filesystem, the host's included,
        would be a disaster); anything else, or any error, leaves the plain unmount to do it."""
        try:
            fd = os.open(self.mountpoint, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            return
        try:
            dev = os.fstat(fd).st_dev
            sys_loop = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}/loop")
            if (sys_loop / "backing_file").read_text().strip() != str(self.image.resolve()):
                return
            fcntl.ioctl(fd, EXT4_IOC_SHUTDOWN, struct.pack("I", EXT4_GOING_FLAGS_NOLOGFLUSH))
        except OSError as exc:
            log.debug("sandbox disk %s: no shutdown before unmount (%s)", self.name, exc)
        finally:
            os.close(fd)


def remove_leftover(name: str, workspace: Path | None) -> None:
    """What a sandbox killed with its process (a worker's SIGKILL) left mounted: the quota
    filesystem bound over ``workspace``, its loop mount and its image. Safe to repeat, and a
    no-op where there was none."""
    if workspace is not None:
        with contextlib.suppress(OSError):
            mounts.unmount(workspace)
    with contextlib.suppress(OSError):
        SandboxDisk(name, 0).remove(workspace=None)


def _clear(directory: Path) -> None:
    for entry in directory.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def open_quota(
    name: str, workspace: Path, size_mb: int | None, files: int | None = None
) -> tuple[SandboxDisk | None, str]:
    """The sandbox's quota filesystem (``size_mb``, at most ``files`` files), set up over
    ``workspace``, and a description for the record; (None, why not) when none was asked for
    or this host cannot make one."""
    if not size_mb:
        return None, "none (not asked for)"
    disk = SandboxDisk(name, size_mb, files=files)
    try:
        disk.create(workspace)
    except OSError as exc:
        log.warning("sandbox %s runs without a disk quota: %s", name, exc)
        return None, f"none ({exc})"
    return disk, disk.describe()
