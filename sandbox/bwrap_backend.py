"""The bubblewrap backend: every exec is a fresh set of namespaces over a read-only root.

Layout inside: the runner rootfs (the same debootstrap tree the Docker image is imported from)
read-only at ``/``, the workspace read-write at ``config.workspace_path``, tmpfs ``/tmp`` and
``/home/agent``, a private ``/proc`` and ``/dev``. No network namespace is shared unless the
exec asks for ``network=True``.

Privileges: run as root, the host launches bwrap as the unprivileged host uid 1000 (the same uid
Docker's ``agent`` user has), so a breakout lands on an ordinary user, never root. The workspace
and the rootfs are handed over as open file descriptors (``--bind-fd``), so they may sit below
directories that uid cannot enter (pytest's ``tmp_path`` is under a 0700 directory).

Limits: a per-sandbox cgroup (pids, memory without extra swap, CPU quota) when cgroups are
writable, else rlimits (RLIMIT_NPROC counts per user namespace, RLIMIT_AS). bwrap is started
blocked (``--block-fd``); the host moves it into the cgroup, or sets the rlimits, and only then
lets the command run, so no process escapes the limits. The command runs under a PID namespace
whose init dies with bwrap (``--die-with-parent``): killing bwrap kills the whole process tree,
background jobs included, and nothing outlives an exec.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import selectors
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

from sandbox import cgroups, filesystem, mounts
from sandbox.base import AGENT_UID, ExecResult, Sandbox, SandboxConfig
from sandbox.errors import SandboxError, SandboxUnavailable
from sandbox.output import CappedOutput, build_result, exit_status

DEFAULT_ROOTFS = Path("/var/lib/agentbench/rootfs/py-runner")
EXPOSE_ROOT = Path("/run/agentbench/ws")
PATH_ENV = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# How long to keep draining pipes after the command was killed.
DRAIN_AFTER_KILL_SEC = 2.0
# Root filesystems a probe sandbox already ran on in this process (saves a probe per start).
_WORKING_ROOTFS: set[Path] = set()


def default_rootfs() -> Path:
    return Path(os.environ.get("SANDBOX_BWRAP_ROOTFS") or DEFAULT_ROOTFS)


def unavailable_reason(rootfs: Path | None = None) -> str | None:
    """None when bubblewrap can run sandboxes here, else why not (one line, no traceback)."""
    rootfs = rootfs or default_rootfs()
    if shutil.which("bwrap") is None:
        return "bubblewrap is not installed (apt-get install bubblewrap)"
    if not (rootfs / "usr/bin/python3").exists():
        return (
            f"no runner rootfs at {rootfs} (set SANDBOX_BWRAP_ROOTFS or build it with "
            "docker/py-runner/build-offline.sh)"
        )
    if rootfs in _WORKING_ROOTFS:
        return None
    probe = BwrapSandbox(SandboxConfig(name="probe", workspace=rootfs / "workspace"), rootfs=rootfs)
    try:
        result = probe.run_probe()
    except (OSError, SandboxError) as exc:
        return f"bubblewrap cannot create a sandbox here: {exc}"
    if result.exit_code != 0:
        detail = result.stderr.strip().splitlines()[-1:] or [f"exit {result.exit_code}"]
        return f"bubblewrap cannot create a sandbox here: {detail[0]}"
    _WORKING_ROOTFS.add(rootfs)
    return None


class BwrapSandbox(Sandbox):
    backend = "bwrap"

    def __init__(self, config: SandboxConfig, *, rootfs: Path | None = None):
        super().__init__(config)
        self.rootfs = rootfs or default_rootfs()
        self._cgroup: cgroups.SandboxCgroup | None = None
        self._running: set[subprocess.Popen[bytes]] = set()
        self._lock = threading.Lock()
        self._started = False
        # Drop to the agent's host uid when we can; a non-root caller runs bwrap as itself.
        self._host_uid = AGENT_UID if os.geteuid() == 0 else None
        self._exposed: Path | None = None
        self._workspace_source = config.workspace

    @property
    def limits_mode(self) -> str:
        """``cgroup-v1``/``cgroup-v2`` (limits shared by the sandbox) or ``rlimit``."""
        return f"cgroup-v{self._cgroup.version}" if self._cgroup else "rlimit"

    def start(self) -> None:
        reason = unavailable_reason(self.rootfs)
        if reason:
            raise SandboxUnavailable(reason)
        self.config.workspace.mkdir(parents=True, exist_ok=True)
        filesystem.chown_tree_for_agent(self.config.workspace)
        if self._host_uid is not None:
            self._expose_workspace()
        if cgroups.detect() is None:
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
                group.remove()
                raise SandboxError(f"cannot create the sandbox cgroup: {exc}") from exc
            self._cgroup = group
        self._started = True

    def close(self) -> None:
        with self._lock:
            running = list(self._running)
        for proc in running:
            _kill(proc)
        if self._cgroup is not None:
            self._cgroup.remove()
            self._cgroup = None
        if self._exposed is not None:
            mounts.unbind(self._exposed)
            self._exposed = None
            self._workspace_source = self.config.workspace
        self._started = False

    def _expose_workspace(self) -> None:
        """bwrap running as uid 1000 must reach the workspace by path, and workspaces often sit
        below directories only root may enter (pytest's tmp_path is under a 0700 directory).
        Root binds the workspace once per sandbox at /run/agentbench/ws/<name>, reachable by
        everyone; the sandbox gets it from there."""
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

    # -- commands ---------------------------------------------------------------------------

    def exec(
        self,
        cmd: str | list[str],
        *,
        timeout: float,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        network: bool = False,
    ) -> ExecResult:
        if not self._started:
            raise SandboxError("exec on a bwrap sandbox that is not started")
        return self._run(cmd, timeout=timeout, cwd=cwd, env=env, network=network)

    def run_probe(self) -> ExecResult:
        """One trivial command with the production flags, no limits: proves bwrap works."""
        return self._run(["true"], timeout=10, cwd="/", env=None, network=False, probe=True)

    def _bwrap_args(
        self, argv: list[str], *, cwd: str, env: dict[str, str], network: bool, fds: dict[str, int]
    ) -> list[str]:
        tmp_size = str(self.config.memory_mb * 1024 * 1024 // 2)
        args = [
            "bwrap",
            "--unshare-all",
            "--unshare-user",
            "--disable-userns",
            "--die-with-parent",
            "--new-session",
            "--uid", str(AGENT_UID),
            "--gid", str(AGENT_UID),
            "--hostname", "sandbox",
            "--ro-bind", str(self.rootfs), "/",
            "--proc", "/proc",
            "--dev", "/dev",
            "--perms", "1777", "--size", tmp_size, "--tmpfs", "/tmp",
            "--size", tmp_size, "--tmpfs", "/home/agent",
            "--bind", str(self._workspace_source), self.config.workspace_path,
        ]  # fmt: skip
        if network:
            # Name resolution needs the host's resolver configuration (the rootfs has none).
            args += ["--share-net", "--ro-bind", "/etc/resolv.conf", "/etc/resolv.conf"]
        args += ["--chdir", cwd, "--clearenv"]
        for key, value in env.items():
            args += ["--setenv", key, value]
        args += ["--info-fd", str(fds["info"]), "--block-fd", str(fds["block"]), "--", *argv]
        return args

    def _run(
        self,
        cmd: str | list[str],
        *,
        timeout: float,
        cwd: str | None,
        env: dict[str, str] | None,
        network: bool,
        probe: bool = False,
    ) -> ExecResult:
        argv = ["sh", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        full_env = {
            "PATH": PATH_ENV,
            "HOME": "/home/agent",
            "USER": "agent",
            "LANG": "C.UTF-8",
            **self.config.env,
            **(env or {}),
        }
        workdir = _resolve_cwd(self.config, cwd)
        info_r, info_w = os.pipe()
        block_r, block_w = os.pipe()
        fds = {"info": info_w, "block": block_r}
        args = self._bwrap_args(argv, cwd=workdir, env=full_env, network=network, fds=fds)
        if not probe:
            args = self._rlimit_prefix(timeout) + args
        started = time.monotonic()
        try:
            proc = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=tuple(fds.values()),
                user=self._host_uid,
                group=self._host_uid,
                extra_groups=[] if self._host_uid is not None else None,
                start_new_session=True,
            )
        finally:
            for fd in (info_w, block_r):
                os.close(fd)
        with self._lock:
            self._running.add(proc)
        try:
            return self._supervise(proc, info_r, block_w, timeout, started, probe)
        finally:
            with self._lock:
                self._running.discard(proc)
            _kill(proc)
            with contextlib.suppress(OSError):
                os.close(info_r)
            with contextlib.suppress(OSError):
                os.close(block_w)

    def _supervise(
        self,
        proc: subprocess.Popen[bytes],
        info_r: int,
        block_w: int,
        timeout: float,
        started: float,
        probe: bool,
    ) -> ExecResult:
        info = _read_all(info_r)
        output = CappedOutput(self.config.output_cap_bytes)
        try:
            child = int(json.loads(info)["child-pid"])
            oom_before = 0 if probe else self._confine([proc.pid, child])
            os.write(block_w, b"1")
        except (ValueError, KeyError, BrokenPipeError) as exc:
            # bwrap gave up while building the sandbox: its stderr says why.
            _signal_group(proc)
            _pump(proc, output, deadline=time.monotonic() + 5)
            proc.wait()
            detail = output.text("stderr").strip() or f"{type(exc).__name__}: {exc}"
            raise SandboxError(f"bubblewrap failed: {detail}") from exc
        timed_out = _pump(proc, output, deadline=started + timeout)
        if timed_out:
            _signal_group(proc)
            _pump(proc, output, deadline=time.monotonic() + DRAIN_AFTER_KILL_SEC)
        returncode = proc.wait()
        exit_code = exit_status(returncode)
        oom = (
            self._cgroup is not None and exit_code == 137 and self._cgroup.oom_kills() > oom_before
        )
        return build_result(
            output=output,
            exit_code=exit_code,
            duration_sec=time.monotonic() - started,
            timed_out=timed_out,
            oom_killed=oom,
        )

    def _confine(self, pids: list[int]) -> int:
        """Move the (still blocked) bwrap processes into the cgroup; return its OOM count."""
        if self._cgroup is None:
            return 0
        before = self._cgroup.oom_kills()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                self._cgroup.add(pid)
        return before

    def _rlimit_prefix(self, timeout: float) -> list[str]:
        """Without cgroups: rlimits set by util-linux ``prlimit`` on itself before it execs
        bwrap (root here may lack CAP_SYS_RESOURCE to set them on another uid's process).
        RLIMIT_NPROC is counted per user namespace, RLIMIT_AS stands in for memory, and
        RLIMIT_CPU backs up the wall-clock timeout."""
        if self._cgroup is not None:
            return []
        memory = self.config.memory_mb * 1024 * 1024
        return [
            "prlimit",
            f"--nproc={self.config.pids_limit}",
            f"--as={memory}",
            f"--cpu={math.ceil(timeout) + 1}",
            "--",
        ]

    # -- files (host side, see sandbox/filesystem.py) ---------------------------------------

    def read_file(self, path: str) -> bytes:
        return filesystem.read_file(
            self.config.workspace, filesystem.workspace_parts(self.config, path)
        )

    def write_file(self, path: str, content: bytes | str) -> None:
        data = content.encode() if isinstance(content, str) else content
        filesystem.write_file(
            self.config.workspace, filesystem.workspace_parts(self.config, path), data
        )

    def copy_in(self, host_dir: Path, sandbox_dir: str) -> None:
        filesystem.copy_in(
            host_dir, self.config.workspace, filesystem.workspace_parts(self.config, sandbox_dir)
        )

    def copy_out(self, sandbox_dir: str, host_dir: Path) -> None:
        filesystem.copy_out(
            self.config.workspace, filesystem.workspace_parts(self.config, sandbox_dir), host_dir
        )


def _resolve_cwd(config: SandboxConfig, cwd: str | None) -> str:
    if cwd is None:
        return config.workspace_path
    if cwd.startswith("/"):
        return cwd
    return f"{config.workspace_path.rstrip('/')}/{cwd}"


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 4096):
        chunks.append(chunk)
    return b"".join(chunks)


def _pump(proc: subprocess.Popen[bytes], output: CappedOutput, *, deadline: float) -> bool:
    """Read stdout/stderr until both close; True if the deadline passed first."""
    streams = {"stdout": proc.stdout, "stderr": proc.stderr}
    with selectors.DefaultSelector() as sel:
        for name, stream in streams.items():
            if stream is not None and not stream.closed:
                sel.register(stream, selectors.EVENT_READ, name)
        while sel.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return True
            for key, _ in sel.select(remaining):
                data = os.read(key.fd, 65536)
                if data:
                    output.feed(key.data, data)
                else:
                    sel.unregister(key.fileobj)
    return False


def _signal_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL bwrap's process group; its PID-namespace init follows (--die-with-parent), and
    with it every process of the command."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    _signal_group(proc)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
