"""The bubblewrap backend: every exec is a fresh set of namespaces over a read-only root.

Layout inside: the runner rootfs (the same debootstrap tree the Docker image is imported from)
read-only at ``/``, the workspace read-write at ``config.workspace_path``, tmpfs ``/tmp`` and
``/home/agent``, a private ``/proc`` and ``/dev``, all namespaces unshared, no further user
namespaces. An exec with ``network=True`` keeps its own network namespace too: slirp4netns
gives it a user-mode network whose connections the host firewall keeps off every address of
the host (sandbox/slirp.py, sandbox/host_fence.py). One with ``network="blackhole"`` gets a
default route into a black hole in its own namespace instead (sandbox/blackhole.py).

A model gateway (``config.gateway``, sandbox/gateway_mount.py) adds a tmpfs ``/run`` with the
gateway's socket folder and forwarder bound read-only in it, and runs each command under the
forwarder, in the command's own namespaces.

Privileges: run as root, the host runs bwrap as the sandbox uid (``AGENT_UID``, 64000: no
host account has it, see sandbox/accounts.py), so a breakout lands on a uid that owns nothing,
never root. Workspaces
often sit below directories that uid cannot enter (pytest's ``tmp_path``), so root bind-mounts
each workspace once at ``/run/agentbench/ws/<name>`` for the sandbox's lifetime.

Limits: a per-sandbox cgroup (pids, memory without extra swap, CPU quota) when cgroups are
writable, else rlimits set by ``prlimit`` (RLIMIT_NPROC, RLIMIT_AS, RLIMIT_CPU). bwrap is forked
by a small spawner process that sits in the cgroup (see sandbox/spawner.py), so every process
of every exec is born inside the limits. The command runs under a PID namespace whose init dies
with bwrap (``--die-with-parent``): killing bwrap kills the whole process tree, background jobs
included, and nothing outlives an exec.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import selectors
import shutil
import signal
import threading
import time
from pathlib import Path

from sandbox import accounts, blackhole, cgroups, disk, filesystem, host_fence, mounts, slirp
from sandbox.base import (
    AGENT_UID,
    BLACKHOLE,
    KILLED_EXIT_CODE,
    READONLY_MOUNT_ROOT,
    ExecNetwork,
    ExecResult,
    Sandbox,
    SandboxConfig,
)
from sandbox.errors import SandboxClosed, SandboxError, SandboxUnavailable
from sandbox.output import CappedOutput, build_result, pump
from sandbox.spawner import Spawner, SpawnerError

log = logging.getLogger(__name__)

DEFAULT_ROOTFS = Path("/var/lib/agentbench/rootfs/py-runner")
EXPOSE_ROOT = Path("/run/agentbench/ws")
PATH_ENV = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# What a shell reports for a command it cannot run; used for a missing working directory.
CANNOT_EXECUTE = 126
# How long to keep draining pipes after the command was killed.
DRAIN_AFTER_KILL_SEC = 2.0
PROBE_TIMEOUT_SEC = 60
# Root filesystems a probe sandbox already ran on in this process (saves a probe per start).
_WORKING_ROOTFS: set[Path] = set()


def default_rootfs() -> Path:
    return Path(os.environ.get("SANDBOX_BWRAP_ROOTFS") or DEFAULT_ROOTFS)


def unavailable_reason(rootfs: Path | None = None) -> str | None:
    """None when bubblewrap can run sandboxes here, else why not (one line, no traceback)."""
    rootfs = rootfs or default_rootfs()
    if shutil.which("bwrap") is None:
        return "bubblewrap is not installed (apt-get install bubblewrap)"
    runner = rootfs == default_rootfs() or not rootfs.is_dir()
    if runner and not (rootfs / "usr/bin/python3").exists():
        return (
            f"no runner rootfs at {rootfs} (set SANDBOX_BWRAP_ROOTFS or build it with "
            "docker/py-runner/build-offline.sh)"
        )
    # Any other tree (an instance built here, an image's export) needs a shell, not Python.
    if not any(os.path.lexists(rootfs / shell) for shell in ("bin/sh", "usr/bin/sh")):
        return f"no root filesystem with a shell at {rootfs}"
    if rootfs in _WORKING_ROOTFS:
        return None
    probe = BwrapSandbox(
        SandboxConfig(name="probe", workspace=rootfs / "workspace"), rootfs=rootfs, probe=True
    )
    try:
        with probe:
            # Generous: on a loaded machine (CI's parallel workers) starting a sandbox can take
            # seconds, and a probe that times out would end an attempt as "no sandbox".
            result = probe.exec(["true"], timeout=PROBE_TIMEOUT_SEC)
    except (OSError, SandboxError) as exc:
        return f"bubblewrap cannot create a sandbox here: {exc}"
    if result.exit_code != 0:
        detail = result.stderr.strip().splitlines()[-1:] or [f"exit {result.exit_code}"]
        return f"bubblewrap cannot create a sandbox here: {detail[0]}"
    _WORKING_ROOTFS.add(rootfs)
    return None


_LOOPBACK_SETUP_FAILED = "bwrap: loopback: Failed RTM_NEWADDR"


def _release(block_w: int) -> None:
    """Let the command start (a byte on bwrap's block fd). A bwrap that already ended has
    closed the other end: nothing to start, and its exit status says why (the exec reads it),
    rather than a BrokenPipeError out of the exec."""
    with contextlib.suppress(BrokenPipeError):
        os.write(block_w, b"1")


class BwrapSandbox(filesystem.HostWorkspaceFiles, Sandbox):
    backend = "bwrap"

    def __init__(
        self,
        config: SandboxConfig,
        *,
        rootfs: Path | None = None,
        probe: bool = False,
        use_cgroups: bool | None = None,
    ):
        super().__init__(config)
        # None: cgroups when they are writable here, else rlimits. False forces rlimits.
        self._use_cgroups = use_cgroups
        self.rootfs = rootfs or default_rootfs()
        # A probe checks that bwrap works at all: no cgroup, no workspace handling.
        self._probe = probe
        self._cgroup: cgroups.SandboxCgroup | None = None
        self._spawner: Spawner | None = None
        self._running: dict[int, int] = {}  # bwrap pid -> pidfd, for close()
        self._lock = threading.Lock()
        # Drop to the agent's host uid when we can; a non-root caller runs bwrap as itself.
        self._host_uid = AGENT_UID if os.geteuid() == 0 else None
        self._exposed: Path | None = None
        self._workspace_source = config.workspace
        self._accounts: accounts.AccountFiles | None = None
        self._disk: disk.SandboxDisk | None = None
        # Set by close(): a command killed from now on was killed by us.
        self._closing = False

    @property
    def limits_mode(self) -> str:
        """``cgroup-v1``/``cgroup-v2`` (limits shared by the sandbox) or ``rlimit``."""
        return f"cgroup-v{self._cgroup.version}" if self._cgroup else "rlimit"

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        if not self._probe:
            reason = unavailable_reason(self.rootfs)
            if reason:
                raise SandboxUnavailable(reason)
            self.config.workspace.mkdir(parents=True, exist_ok=True)
            filesystem.chown_tree_for_agent(self.config.workspace)
            if self._host_uid is not None:
                accounts.check_no_host_account()
                self._accounts = self._write_accounts()
                self._disk, self.disk_quota = disk.open_quota(
                    f"ab-{self.config.name}",
                    self.config.workspace,
                    self.config.disk_mb,
                    self.config.disk_files,
                )
                self._expose_workspace()
            elif self.config.disk_mb:
                self.disk_quota = "none (a disk quota needs root)"
            if self._use_cgroups is not False and cgroups.detect() is None:
                self._cgroup = self._create_cgroup()
        spawner = Spawner(user=self._host_uid, label=f"ab-{self.config.name}")
        try:
            spawner.start()
            if self._cgroup is not None:
                # Before the first request: everything it forks is born in the group.
                self._cgroup.add(spawner.pid)
        except OSError as exc:
            spawner.close()
            raise SandboxError(f"cannot start the bwrap spawner: {exc}") from exc
        self._spawner = spawner

    def _create_cgroup(self) -> cgroups.SandboxCgroup | None:
        """The sandbox's cgroup, or None (rlimits) when this machine refuses one: a writable
        /sys/fs/cgroup can still forbid it, e.g. inside a container's cgroup namespace."""
        group = cgroups.SandboxCgroup(
            f"ab-{self.config.name}",
            cgroups.Limits(
                pids=self.config.pids_limit,
                memory_bytes=self.config.memory_mb * 1024 * 1024,
                cpus=self.config.cpus,
            ),
        )
        try:
            group.create()
        except OSError as exc:
            with contextlib.suppress(OSError):
                group.remove()
            log.warning("no cgroup for sandbox %s (%s); limiting with rlimits", group.name, exc)
            return None
        return group

    def _write_accounts(self) -> accounts.AccountFiles:
        """The rootfs's passwd and group with ``agent`` at the sandbox uid."""
        etc = self.rootfs / "etc"
        try:
            return accounts.AccountFiles.write(
                f"ab-{self.config.name}",
                image_passwd=(etc / "passwd").read_text(errors="replace"),
                image_group=(etc / "group").read_text(errors="replace"),
            )
        except OSError as exc:
            raise SandboxError(f"cannot write the sandbox user's account files: {exc}") from exc

    def _expose_workspace(self) -> None:
        """bwrap running as the sandbox uid must reach the workspace by path, and workspaces
        often sit below directories only root may enter (pytest's tmp_path is under a 0700
        directory). Root binds the workspace once per sandbox at /run/agentbench/ws/<name>,
        reachable by everyone; the sandbox gets it from there."""
        target = EXPOSE_ROOT / f"ab-{self.config.name}"
        try:
            mounts.unbind(target)  # left by a crashed worker under the same name
            EXPOSE_ROOT.mkdir(parents=True, exist_ok=True)
            EXPOSE_ROOT.chmod(0o755)
            target.mkdir(mode=0o755, exist_ok=True)
            mounts.bind(self.config.workspace, target)
        except OSError as exc:
            raise SandboxError(f"cannot expose the workspace to the sandbox user: {exc}") from exc
        self._exposed = target
        self._workspace_source = target

    def close(self) -> None:
        with self._lock:
            self._closing = bool(self._running)
            running = list(self._running.values())
        for pidfd in running:
            _kill(pidfd)
        if self._spawner is not None:
            self._spawner.close()
            self._spawner = None
        if self._cgroup is not None:
            self._cgroup.remove()
            self._cgroup = None
        if self._exposed is not None:
            mounts.unbind(self._exposed)
            self._exposed = None
            self._workspace_source = self.config.workspace
        if self._accounts is not None:
            self._accounts.remove()
            self._accounts = None
        if self._disk is not None:
            self._disk.remove(workspace=self.config.workspace, copy_back=self.config.disk_copy_back)
            self._disk = None

    # -- commands ---------------------------------------------------------------------------

    def exec(
        self,
        cmd: str | list[str],
        *,
        timeout: float,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        network: ExecNetwork = False,
    ) -> ExecResult:
        try:
            return self._exec_once(cmd, timeout=timeout, cwd=cwd, env=env, network=network)
        except SandboxError as exc:
            # bwrap setting up a new network namespace's loopback can fail transiently when
            # many are made at once ("loopback: Failed RTM_NEWADDR: No child processes", seen
            # under CI's load): it ended before the command ran, so once more is safe.
            if _LOOPBACK_SETUP_FAILED not in str(exc):
                raise
            return self._exec_once(cmd, timeout=timeout, cwd=cwd, env=env, network=network)

    def _exec_once(
        self,
        cmd: str | list[str],
        *,
        timeout: float,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        network: ExecNetwork = False,
    ) -> ExecResult:
        if self._spawner is None:
            raise SandboxError("exec on a bwrap sandbox that is not started")
        blackholed = network == BLACKHOLE and self._blackhole_possible()
        network = network is True
        argv = ["sh", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        # Checked once: the mounts and the forwarder go together (sandbox/gateway_mount.py).
        gateway = (
            self.config.gateway if self.config.gateway and self.config.gateway.active else None
        )
        if gateway is not None:
            argv = gateway.wrap(argv)
        full_env = {
            "PATH": PATH_ENV,
            "HOME": "/home/agent",
            "USER": "agent",
            "LANG": "C.UTF-8",
            **(blackhole.ENV if blackholed else {}),
            **self.config.env,
            **(env or {}),
        }
        args = self._rlimit_prefix(timeout) + self._bwrap_args(
            argv,
            cwd=self.config.resolve_cwd(cwd),
            env=full_env,
            network=network,
            blackhole=blackholed,
            gateway=gateway is not None,
        )
        if network and not self.config.allow_network:
            raise SandboxError(f"sandbox {self.config.name} was created without network")
        if network:
            self._fence_network()
        pipes = {name: os.pipe() for name in ("stdout", "stderr", "status")}
        # The child's fds 0..3: stdin, stdout, stderr and bwrap's status; with network also
        # 4 (bwrap waits on it: --block-fd) and 5 (the resolv.conf it mounts).
        child_side = [pipes[n][1] for n in ("stdout", "stderr", "status")]
        ours = [pipes[n][0] for n in ("stdout", "stderr", "status")]
        block_w = -1
        if network or blackholed:
            block_r, block_w = os.pipe()
            resolv = slirp.RESOLV_CONF if network else blackhole.RESOLV_CONF
            child_side += [block_r, _data_pipe(resolv)]
            ours.append(block_w)
        oom_before = self._cgroup.oom_kills() if self._cgroup else 0
        started = time.monotonic()
        try:
            with open(os.devnull, "rb") as devnull:
                pid = self._spawner.spawn(args, {"PATH": PATH_ENV}, [devnull.fileno(), *child_side])
        except SpawnerError as exc:
            for fd in ours:
                os.close(fd)
            raise SandboxError(f"cannot start bwrap: {exc}") from exc
        finally:
            for fd in child_side:
                os.close(fd)
        pidfd = _pidfd(pid)
        if pidfd is not None:
            with self._lock:
                self._running[pid] = pidfd
        # Read ends still open; pump closes (and drops) each at its end of file.
        readers = {pipes[n][0]: n for n in ("stdout", "stderr", "status")}
        network_stack: slirp.SlirpNetwork | None = None
        try:
            output = CappedOutput(self.config.output_cap_bytes)
            status = bytearray()
            if network:
                network_stack = self._attach_network(
                    readers, status, block_w=block_w, deadline=started + timeout
                )
            elif blackholed:
                self._attach_blackhole(readers, status, block_w=block_w, deadline=started + timeout)
            timed_out = pump(readers, output, status, deadline=started + timeout)
            if timed_out:
                _kill(pidfd)
                pump(readers, output, status, deadline=time.monotonic() + DRAIN_AFTER_KILL_SEC)
        finally:
            for r in readers:
                os.close(r)
            if pidfd is not None:
                with self._lock:
                    self._running.pop(pid, None)
                _kill(pidfd)  # a no-op after a normal end; after an exception, no orphan
                os.close(pidfd)
            if network_stack is not None:
                network_stack.close()
        exit_code = _exit_code(bytes(status))
        if exit_code is None and not timed_out and self._closing:
            raise SandboxClosed(
                f"[killed] sandbox {self.config.name} was closed while a command ran"
            )
        if exit_code is None and not timed_out:
            # No exit code: bwrap died before the command ran, or was killed from outside.
            stderr = output.text("stderr").strip()
            if "bwrap: Can't chdir" in stderr:
                exit_code = CANNOT_EXECUTE  # like Docker for a missing working directory
            elif stderr.startswith("bwrap:"):
                raise SandboxError(f"bubblewrap failed: {stderr}")
            else:
                exit_code = KILLED_EXIT_CODE
        oom = (
            self._cgroup is not None
            and exit_code == KILLED_EXIT_CODE
            and self._cgroup.oom_kills() > oom_before
        )
        return build_result(
            output=output,
            exit_code=exit_code if exit_code is not None else KILLED_EXIT_CODE,
            duration_sec=time.monotonic() - started,
            timed_out=timed_out,
            oom_killed=oom,
            disk_full=self._disk is not None and self._disk.full(),
        )

    def _fence_network(self) -> None:
        """A networked command needs root (to start slirp4netns in the fenced group) and the host
        firewall rules for that group: without either it does not run at all."""
        if self._host_uid is None:
            raise host_fence.FenceError(
                "networked commands under bubblewrap need root: slirp4netns must run with "
                "the fenced group (see sandbox/host_fence.py)"
            )
        host_fence.ensure(host_fence.slirp_rules(host_fence.net_gid()))

    def _blackhole_possible(self) -> bool:
        """A black-hole network needs root (bwrap then runs as the sandbox uid, and root sets
        the namespace up): without it the command gets no network at all (logged)."""
        reason = blackhole.unavailable_reason()
        if reason is None and self._host_uid is None:
            reason = "bwrap runs as the caller, not as root"
        if reason is not None:
            log.warning("no black-hole network for %s (%s): no network", self.config.name, reason)
        return reason is None

    def _attach_blackhole(
        self, readers: dict[int, str], status: bytearray, *, block_w: int, deadline: float
    ) -> None:
        """Once bwrap reports its child's pid, put the black hole in the child's network
        namespace (sandbox/blackhole.py), then let the command start. A failure to set it up
        raises SandboxError: the command does not run (bwrap is killed by the caller)."""
        try:
            child_pid = _read_child_pid(readers, status, deadline)
            if child_pid is not None:
                # The child waits on its block fd: its pid cannot have been reused.
                netns = blackhole.open_netns(child_pid)
                assert netns is not None  # without ``alive`` it is never None
                try:
                    blackhole.install(netns)
                finally:
                    os.close(netns)
            _release(block_w)
        finally:
            os.close(block_w)

    def _attach_network(
        self, readers: dict[int, str], status: bytearray, *, block_w: int, deadline: float
    ) -> slirp.SlirpNetwork | None:
        """Once bwrap reports its child's pid, attach slirp4netns to the child's network
        namespace, then let the command start (write to its block fd). If bwrap ends or the
        deadline passes first, the command is let go without a network (and fails or times out
        on its own)."""
        try:
            child_pid = _read_child_pid(readers, status, deadline)
            network = None
            if child_pid is not None:
                network = slirp.SlirpNetwork()
                network.attach(child_pid)
            _release(block_w)
            return network
        finally:
            os.close(block_w)

    def _bwrap_args(
        self,
        argv: list[str],
        *,
        cwd: str,
        env: dict[str, str],
        network: bool,
        gateway: bool,
        blackhole: bool = False,
    ) -> list[str]:
        tmp_size = str(self.config.memory_mb * 1024 * 1024 // 2)
        args = [
            "bwrap",
            "--unshare-all",
            "--unshare-user",
            "--disable-userns",
            "--die-with-parent",
            "--new-session",
            "--uid",
            str(AGENT_UID),
            "--gid",
            str(AGENT_UID),
            "--hostname",
            "sandbox",
            "--ro-bind",
            str(self.rootfs),
            "/",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
        ]
        args += self._cgroup_view()
        if self._disk is not None:  # on the quota's filesystem instead of in memory
            args += [
                "--bind",
                str(self._disk.tmp),
                "/tmp",
                "--bind",
                str(self._disk.home),
                "/home/agent",
            ]
        else:
            args += [
                "--perms",
                "1777",
                "--size",
                tmp_size,
                "--tmpfs",
                "/tmp",
                "--size",
                tmp_size,
                "--tmpfs",
                "/home/agent",
            ]
        args += [
            "--bind",
            str(self._workspace_source),
            self.config.workspace_path,
        ]
        if self._accounts is not None:
            for host_file, inside in self._accounts.binds.items():
                args += ["--ro-bind", host_file, inside]
        if self.config.readonly_mounts:
            # The root is read-only: a tmpfs over the (empty) mount root makes the mount points
            # (64 KiB: room for the mount points, none for the sandbox's own files).
            args += ["--perms", "0755", "--size", "65536", "--tmpfs", READONLY_MOUNT_ROOT]
            for mount in self.config.readonly_mounts:
                args += ["--ro-bind", str(mount.source.resolve()), mount.target]
        if gateway and self.config.gateway is not None:
            args += self.config.gateway.bwrap_args()
        if network or blackhole:
            # The network namespace stays unshared: the command waits on fd 4 until slirp4netns
            # gave it a tap device (see _attach_network), or the black hole its route
            # (_attach_blackhole), and resolves names through slirp (or the black hole).
            args += ["--block-fd", "4", "--ro-bind-data", "5", "/etc/resolv.conf"]
        args += ["--chdir", cwd, "--clearenv"]
        for key, value in env.items():
            args += ["--setenv", key, value]
        # fd 3 of bwrap is the status pipe: {"child-pid": N} at start, {"exit-code": N} at end.
        return [*args, "--json-status-fd", "3", "--", *argv]

    def _cgroup_view(self) -> list[str]:
        """The sandbox's own cgroup, read-only at ``/sys/fs/cgroup``, as a Docker container
        sees its own: test suites size themselves from its CPU quota (pylint reads
        ``cpu.max``, or v1's ``cpu/cpu.cfs_quota_us``), and without it they would see the
        host's whole CPU count. The folders are root's and bound read-only: nothing inside can
        change a limit."""
        if self._cgroup is None or not (self.rootfs / "sys").is_dir():
            return []
        # The root is read-only: a small tmpfs over /sys makes the mount points, then goes
        # read-only itself.
        args = ["--perms", "0755", "--size", "65536", "--tmpfs", "/sys"]
        if self._cgroup.version == 2:
            args += ["--ro-bind", str(self._cgroup.dirs["cpu"]), "/sys/fs/cgroup"]
        else:
            for controller, folder in self._cgroup.dirs.items():
                args += ["--ro-bind", str(folder), f"/sys/fs/cgroup/{controller}"]
        return [*args, "--remount-ro", "/sys"]

    def _rlimit_prefix(self, timeout: float) -> list[str]:
        """Without cgroups: rlimits that util-linux ``prlimit`` sets on itself before it execs
        bwrap (root may lack CAP_SYS_RESOURCE to set them on another uid's process).
        RLIMIT_NPROC is counted per user namespace, RLIMIT_AS stands in for memory, and
        RLIMIT_CPU backs up the wall-clock timeout."""
        if self._cgroup is not None or self._probe:
            return []
        memory = self.config.memory_mb * 1024 * 1024
        return [
            "prlimit",
            f"--nproc={self.config.pids_limit}",
            f"--as={memory}",
            f"--cpu={math.ceil(timeout) + 1}",
            "--",
        ]


def _pidfd(pid: int) -> int | None:
    """A handle on the bwrap process that cannot be confused with a later one reusing its pid;
    None if it already finished (and was reaped)."""
    try:
        return os.pidfd_open(pid)
    except ProcessLookupError:
        return None


def _kill(pidfd: int | None) -> None:
    """SIGKILL bwrap; its PID-namespace init follows (--die-with-parent), and with it every
    process of the command."""
    if pidfd is not None:
        with contextlib.suppress(ProcessLookupError, OSError):
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)


def _exit_code(status: bytes) -> int | None:
    """The exit code bwrap reported on its status fd (one JSON document per line)."""
    for line in reversed(status.decode(errors="replace").splitlines()):
        with contextlib.suppress(ValueError):
            doc = json.loads(line)
            if isinstance(doc, dict) and "exit-code" in doc:
                return int(doc["exit-code"])
    return None


def _data_pipe(data: bytes) -> int:
    """The read end of a pipe already holding ``data`` (small: it fits the pipe buffer)."""
    r, w = os.pipe()
    try:
        os.write(w, data)
    finally:
        os.close(w)
    return r


def _read_child_pid(readers: dict[int, str], status: bytearray, deadline: float) -> int | None:
    """Read bwrap's status fd until its first document (``{"child-pid": N, ...}``); None when
    bwrap closed it first (the fd is then closed and dropped from ``readers``) or the deadline
    passed. What was read stays in ``status`` for the exit code."""
    fd = next(fd for fd, name in readers.items() if name == "status")
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while b"\n" not in status:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not sel.select(remaining):
                return None
            data = os.read(fd, 65536)
            if not data:
                del readers[fd]
                os.close(fd)
                return None
            status.extend(data)
    with contextlib.suppress(ValueError):
        doc = json.loads(bytes(status).split(b"\n", 1)[0])
        if isinstance(doc, dict) and "child-pid" in doc:
            return int(doc["child-pid"])
    return None
