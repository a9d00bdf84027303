"""Bind mounts in the host's mount namespace through mount(2), without a subprocess."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import os
from pathlib import Path

MS_BIND = 0x1000
MNT_DETACH = 0x2

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.mount.argtypes = [
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_ulong,
    ctypes.c_void_p,
]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def bind(source: Path, target: Path) -> None:
    _check(
        _libc.mount(bytes(source), bytes(target), None, MS_BIND, None),
        f"bind {source} on {target}",
    )


def unmount(target: Path) -> None:
    """Detach whatever is mounted on ``target`` (the directory stays). Safe to repeat.

    (``os.path.ismount`` cannot tell: a bind mount from the same filesystem looks like a
    plain directory to it. umount2 says EINVAL once nothing is mounted there any more.)"""
    for _ in range(16):  # mounts may be stacked
        if _libc.umount2(bytes(target), MNT_DETACH) == 0:
            continue
        code = ctypes.get_errno()
        if code in (errno.EINVAL, errno.ENOENT):
            break
        raise OSError(code, f"unmount {target}: {os.strerror(code)}")


def unbind(target: Path) -> None:
    """Detach whatever is mounted on ``target`` and remove the directory. Safe to repeat."""
    unmount(target)
    with contextlib.suppress(FileNotFoundError):
        target.rmdir()
