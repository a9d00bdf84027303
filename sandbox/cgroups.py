"""Per-sandbox control groups for the bubblewrap backend: a PID, memory and CPU limit shared by
every command of one sandbox, the way Docker limits a container.

Works with cgroup v2 (one unified hierarchy, the Debian 12 default) and with cgroup v1 (one
hierarchy per controller, as on this project's CI machines). The groups live under
``<hierarchy>/agentbench/<name>``, beside Docker's own ``docker/`` parent. Writing to cgroups
needs root; without it ``detect()`` says why and the backend falls back to rlimits.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

CONTROLLERS = ("pids", "memory", "cpu")
PARENT = "agentbench"
CPU_PERIOD_US = 100_000


@dataclass(frozen=True, slots=True)
class Limits:
    pids: int
    memory_bytes: int
    cpus: float


def _mounts() -> list[tuple[str, str, set[str]]]:
    """(fstype, mountpoint, options) of every cgroup mount."""
    found = []
    with open("/proc/self/mounts") as fh:
        for line in fh:
            _dev, mountpoint, fstype, options, *_ = line.split()
            if fstype in ("cgroup", "cgroup2"):
                found.append((fstype, mountpoint, set(options.split(","))))
    return found


def _hierarchies() -> tuple[int, dict[str, Path]] | str:
    """(version, controller -> hierarchy root) or the reason no usable hierarchy exists."""
    mounts = _mounts()
    for fstype, mountpoint, _opts in mounts:
        if fstype != "cgroup2":
            continue
        try:
            available = set(Path(mountpoint, "cgroup.controllers").read_text().split())
        except OSError:
            continue
        if set(CONTROLLERS) <= available:
            return 2, {c: Path(mountpoint) for c in CONTROLLERS}
    v1 = {}
    for fstype, mountpoint, opts in mounts:
        if fstype == "cgroup":
            for controller in CONTROLLERS:
                if controller in opts:
                    v1[controller] = Path(mountpoint)
    if set(v1) == set(CONTROLLERS):
        return 1, v1
    return "no cgroup hierarchy offers the pids, memory and cpu controllers"


def detect() -> str | None:
    """None when per-sandbox cgroups can be created here, else the reason."""
    found = _hierarchies()
    if isinstance(found, str):
        return found
    _version, roots = found
    for root in set(roots.values()):
        if not os.access(root, os.W_OK):
            return f"{root} is not writable (cgroups need root and a writable /sys/fs/cgroup)"
    return None


class SandboxCgroup:
    """One sandbox's group (a directory per hierarchy in v1, one directory in v2)."""

    def __init__(self, name: str, limits: Limits):
        found = _hierarchies()
        if isinstance(found, str):
            raise OSError(found)
        self.version, roots = found
        self.name = name
        self.dirs: dict[str, Path] = {c: roots[c] / PARENT / name for c in CONTROLLERS}
        self.limits = limits

    @property
    def unique_dirs(self) -> list[Path]:
        return list(dict.fromkeys(self.dirs.values()))

    def create(self) -> None:
        if self.version == 2:
            self._enable_v2_controllers()
        for d in self.unique_dirs:
            if d.exists():  # left by a crashed worker under the same deterministic name
                self._empty(d)
            else:
                d.mkdir(parents=True)
        self._apply_limits()

    def _enable_v2_controllers(self) -> None:
        root = self.dirs["pids"].parent.parent
        wanted = " ".join(f"+{c}" for c in CONTROLLERS)
        for level in (root, root / PARENT):
            level.mkdir(exist_ok=True)
            enabled = set((level / "cgroup.subtree_control").read_text().split())
            if not set(CONTROLLERS) <= enabled:
                (level / "cgroup.subtree_control").write_text(wanted)

    def _apply_limits(self) -> None:
        lim = self.limits
        quota = max(int(lim.cpus * CPU_PERIOD_US), 1000)
        if self.version == 2:
            d = self.dirs["pids"]
            (d / "pids.max").write_text(str(lim.pids))
            (d / "memory.max").write_text(str(lim.memory_bytes))
            with contextlib.suppress(FileNotFoundError):  # absent without swap accounting
                (d / "memory.swap.max").write_text("0")
            (d / "cpu.max").write_text(f"{quota} {CPU_PERIOD_US}")
            return
        (self.dirs["pids"] / "pids.max").write_text(str(lim.pids))
        mem = self.dirs["memory"]
        (mem / "memory.limit_in_bytes").write_text(str(lim.memory_bytes))
        # memory+swap equal to memory: no extra swap, like Docker's memswap_limit == mem_limit.
        with contextlib.suppress(FileNotFoundError):
            (mem / "memory.memsw.limit_in_bytes").write_text(str(lim.memory_bytes))
        cpu = self.dirs["cpu"]
        (cpu / "cpu.cfs_period_us").write_text(str(CPU_PERIOD_US))
        (cpu / "cpu.cfs_quota_us").write_text(str(quota))

    def add(self, pid: int) -> None:
        for d in self.unique_dirs:
            (d / "cgroup.procs").write_text(str(pid))

    def oom_kills(self) -> int:
        """How many processes the kernel OOM-killed in this group so far."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        return read_oom_kills(self.dirs["memory"] / name)

    def _pids(self, d: Path) -> list[int]:
        try:
            return [int(p) for p in (d / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def _empty(self, d: Path) -> None:
        kill_file = d / "cgroup.kill"
        if kill_file.exists():
            kill_file.write_text("1")
        else:
            for pid in self._pids(d):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

    def remove(self) -> None:
        """Kill whatever is left in the group and delete it. Safe to call twice."""
        for d in self.unique_dirs:
            if not d.exists():
                continue
            self._empty(d)
            # The kernel needs a moment to reap killed processes before rmdir succeeds.
            for _ in range(100):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    self._empty(d)
                    time.sleep(0.01)


def _memory_cgroup_dir(pid: int) -> Path | None:
    """The directory of the memory cgroup ``pid`` belongs to (the unified one in v2)."""
    found = _hierarchies()
    if isinstance(found, str):
        return None
    version, roots = found
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _id, controllers, path = line.split(":", 2)
        if (version == 2 and controllers == "") or (
            version == 1 and "memory" in controllers.split(",")
        ):
            candidate = roots["memory"] / path.lstrip("/")
            return candidate if candidate.is_dir() else None
    return None


def oom_counter_file(pid: int) -> Path | None:
    """The file holding the ``oom_kill`` count of the memory cgroup ``pid`` belongs to (how the
    Docker backend learns, synchronously, that the kernel OOM-killed a command), if readable."""
    directory = _memory_cgroup_dir(pid)
    if directory is None:
        return None
    candidate = directory / ("memory.events" if _version() == 2 else "memory.oom_control")
    return candidate if candidate.exists() else None


def procs_file(pid: int) -> Path | None:
    """The ``cgroup.procs`` listing every process of ``pid``'s cgroup (a container's), if
    readable here."""
    directory = _memory_cgroup_dir(pid)
    if directory is None or not (directory / "cgroup.procs").exists():
        return None
    return directory / "cgroup.procs"


def read_pids(procs: Path) -> list[int]:
    try:
        return [int(p) for p in procs.read_text().split()]
    except OSError:
        return []


def _version() -> int | None:
    found = _hierarchies()
    return None if isinstance(found, str) else found[0]


def read_oom_kills(counter: Path) -> int:
    try:
        text = counter.read_text()
    except OSError:
        return 0
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill":
            return int(value)
    return 0
