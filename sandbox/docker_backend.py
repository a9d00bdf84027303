"""The Docker backend: one hardened container per attempt, every command an ``exec`` in it.

Hardening (see README "Sandboxes"): all capabilities dropped, no-new-privileges, a PID limit,
a memory limit with no extra swap, a CPU quota, read-only root filesystem, tmpfs ``/tmp`` and
``/home/agent``, the sandbox user (``AGENT_UID``, no host account: sandbox/accounts.py), an
init process reaping orphans.

Commands: the container's main program is a small exec server (sandbox/docker_exec_server.py)
that starts each command as the container's user on a request over a Unix socket: a few
milliseconds where a ``docker exec`` costs tens. An image without ``python3``, a host that
cannot make the socket directory, or a server that stopped gets ``docker exec`` instead; both
run the command under the same ``timeout`` wrapper and report alike.

Network: the container is created on the sandbox network (sandbox/docker_network.py: our own
bridge, fenced off the host by the host firewall) and disconnected before its first command, so
it has loopback only. An exec with ``network=True`` connects it for that exec and disconnects it
afterwards; a lock keeps other execs of the same sandbox from running while it is connected.
An exec with ``network="blackhole"`` gets a default route into a black hole in the container's
namespace for its duration instead (sandbox/blackhole.py), under the same lock. A
sandbox whose config does not allow network is created with none at all (and starts faster).

A model gateway (``config.gateway``, sandbox/gateway_mount.py) is two more read-only volumes
(its socket folder, the forwarder), and every command runs under the forwarder, which serves
the gateway on the container's loopback for as long as the command runs.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors
from docker.models.containers import Container
from docker.models.networks import Network

from sandbox import accounts, blackhole, cgroups, disk, docker_network, filesystem, orphans
from sandbox.base import (
    AGENT_UID,
    BLACKHOLE,
    KILLED_EXIT_CODE,
    ExecNetwork,
    ExecResult,
    Sandbox,
    SandboxConfig,
)
from sandbox.docker_engine import MANAGED_LABEL
from sandbox.docker_engine import engine_client as _client
from sandbox.docker_engine import first_line as _first_line
from sandbox.docker_exec_client import (
    LAUNCHER,
    ExecServer,
    Finished,
    ServerGone,
    remove_socket_dir,
)
from sandbox.errors import SandboxClosed, SandboxError, SandboxUnavailable
from sandbox.output import CappedOutput, build_result

log = logging.getLogger(__name__)

CANNOT_EXECUTE = 126
# Every exec runs under coreutils `timeout`, which puts the command in a process group of its
# own and SIGKILLs that group at the deadline; once the command ends, whatever it left running
# in the group (background jobs, a fork bomb) is killed too, as under bubblewrap. The host
# keeps only a backstop deadline in case the engine stops answering.
EXEC_WRAPPER = (
    'timeout -s KILL "$0" "$@" & pid=$!; wait "$pid"; rc=$?; '
    'kill -KILL -"$pid" 2>/dev/null; exit "$rc"'
)
OCI_FAILURE = "OCI runtime exec failed"
# Exit codes above this are deaths by a signal (128 + N).
SIGNAL_EXIT_BASE = 128
# How long a command's unreported death may precede its container's init's exit.
INIT_EXIT_WAIT_SEC = 1.0
# How long a refused exec may precede its container's init's exit (the engine removing it).
RUNTIME_REFUSED_WAIT_SEC = 0.5
# After the in-container `timeout` should have fired, how long to wait for the exec to end.
HARD_DEADLINE_GRACE_SEC = 10.0
# The engine reports OOM kills asynchronously: how long the events fallback listens.
OOM_EVENT_WAIT_SEC = 0.5


def unavailable_reason() -> str | None:
    """None when a Docker engine answers, else why not (one line, no traceback)."""
    try:
        # A loaded engine can take seconds to answer; a missing one fails at once (no socket).
        client = _client(timeout=30)
        try:
            client.ping()
        finally:
            client.close()
    except docker.errors.DockerException as exc:
        return f"the Docker engine does not answer: {_first_line(exc)}"
    except Exception as exc:  # requests/urllib3 errors surface raw from ping()
        return f"the Docker engine does not answer: {_first_line(exc)}"
    return None


def container_name(config: SandboxConfig) -> str:
    return f"ab-{config.name}"


class _NetworkGate:
    """Shared for offline execs, exclusive for a networked one (a readers-writer lock)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._offline = 0
        self._online = False

    @contextlib.contextmanager
    def offline(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._online)
            self._offline += 1
        try:
            yield
        finally:
            with self._cond:
                self._offline -= 1
                self._cond.notify_all()

    @contextlib.contextmanager
    def online(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._online and self._offline == 0)
            self._online = True
        try:
            yield
        finally:
            with self._cond:
                self._online = False
                self._cond.notify_all()


class DockerSandbox(filesystem.HostWorkspaceFiles, Sandbox):
    backend = "docker"

    def __init__(self, config: SandboxConfig, *, exec_server: bool = True):
        super().__init__(config)
        self.name = container_name(config)
        self._client: docker.DockerClient | None = None
        self._container: Container | None = None
        self._gate = _NetworkGate()
        self._network: Network | None = None
        self._oom_counter: Path | None = None
        # False: always ``docker exec`` (how tests reach that path with the runner image).
        self._use_exec_server = exec_server
        self._server: ExecServer | None = None
        self._accounts: accounts.AccountFiles | None = None
        self._disk: disk.SandboxDisk | None = None
        # The container's init (host pid) and its cgroup's process list, for orphans.sweep.
        self._init_pid: int | None = None
        self._init_pidfd: int | None = None
        self._procs: Path | None = None
        self._running = 0
        self._running_lock = threading.Lock()
        # Set by close(): a command failing from now on was killed by us, not lost.
        self._closing = False

    @property
    def exec_mode(self) -> str:
        """``server`` (the in-container exec server) or ``docker-exec``."""
        return "server" if self._server is not None and self._server.connected else "docker-exec"

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        try:
            self._client = _client()
            self._client.ping()
        except Exception as exc:
            raise SandboxUnavailable(
                f"the Docker engine does not answer: {_first_line(exc)}"
            ) from exc
        try:
            image = self._client.images.get(self.config.image)
        except docker.errors.ImageNotFound as exc:
            raise SandboxError(
                f"image {self.config.image} is not on this Docker engine; build it with "
                "bash docker/py-runner/build-offline.sh"
            ) from exc
        accounts.check_no_host_account()
        self.config.workspace.mkdir(parents=True, exist_ok=True)
        filesystem.chown_tree_for_agent(self.config.workspace)
        self._remove_leftover()
        assert image.id is not None  # an engine's image always has one; typed optional
        self._accounts = self._write_accounts(image.id)
        self._disk, self.disk_quota = disk.open_quota(
            self.name, self.config.workspace, self.config.disk_mb, self.config.disk_files
        )
        if self._use_exec_server:
            self._server = ExecServer.listen(self.name)
        try:
            if self.config.allow_network:
                self._network = docker_network.ensure_network(self._client)
            self._container = self._client.containers.run(**self._run_kwargs())
            if self._network is not None:
                self._network.disconnect(self._container, force=True)
            self._container.reload()
            self._init_pid = self._container.attrs["State"]["Pid"]
            with contextlib.suppress(OSError):  # a remote engine's pids are not ours
                self._init_pidfd = os.pidfd_open(self._init_pid)
            self._oom_counter = cgroups.oom_counter_file(self._init_pid)
            self._procs = cgroups.procs_file(self._init_pid)
        except docker.errors.DockerException as exc:
            raise SandboxError(f"cannot start container {self.name}: {_first_line(exc)}") from exc
        # Usually connected by now: the server starts while the engine sets the network up.
        init_pid = self._container.attrs["State"]["Pid"]
        if self._server is not None and not self._server.accept(container_pid=init_pid):
            self._server.close()
            self._server = None

    def _write_accounts(self, image_id: str) -> accounts.AccountFiles | None:
        """The image's passwd and group with ``agent`` at the sandbox uid; None where this host
        cannot write them (not root), and the uid then has no name inside."""
        assert self._client is not None
        # Imported here: docker_images builds on this module's engine helpers.
        from sandbox.docker_images import image_accounts

        try:
            passwd, group = image_accounts(self._client, image_id)
        except Exception as exc:  # requests errors surface raw when the engine is gone
            raise self._failure(exc, f"cannot read the accounts of {self.config.image}") from exc
        try:
            return accounts.AccountFiles.write(self.name, image_passwd=passwd, image_group=group)
        except OSError as exc:
            log.warning("no account files for %s: %s", self.name, exc)
            return None

    def _run_kwargs(self) -> dict[str, Any]:
        cfg = self.config
        tmp_size = cfg.memory_mb * 1024 * 1024 // 2
        tmpfs_opts = f"rw,nosuid,nodev,size={tmp_size},uid={AGENT_UID},gid={AGENT_UID}"
        volumes = {str(cfg.workspace.resolve()): {"bind": cfg.workspace_path, "mode": "rw"}}
        if self._server is not None:
            volumes.update(self._server.volume)
        if self._accounts is not None:
            for host_file, inside in self._accounts.binds.items():
                volumes[host_file] = {"bind": inside, "mode": "ro"}
        for mount in cfg.readonly_mounts:
            volumes[str(mount.source.resolve())] = {"bind": mount.target, "mode": "ro"}
        if cfg.gateway is not None:
            volumes.update(cfg.gateway.docker_volumes())
        tmpfs = {"/tmp": tmpfs_opts + ",mode=1777", "/home/agent": tmpfs_opts + ",mode=0755"}
        if self._disk is not None:  # on the quota's filesystem instead of in memory
            tmpfs = {}
            volumes[str(self._disk.tmp)] = {"bind": "/tmp", "mode": "rw"}
            volumes[str(self._disk.home)] = {"bind": "/home/agent", "mode": "rw"}
        return {
            "image": cfg.image,
            "command": LAUNCHER if self._server is not None else ["sleep", "infinity"],
            "name": self.name,
            "labels": {**cfg.labels, MANAGED_LABEL: "1"},
            "detach": True,
            "init": True,
            "user": f"{AGENT_UID}:{AGENT_UID}",
            "working_dir": cfg.workspace_path,
            # The engine cannot look the uid up in the image: say who and where home is.
            "environment": {"HOME": accounts.AGENT_HOME, "USER": "agent", **cfg.env},
            "hostname": "sandbox",
            **(
                {"network": docker_network.NETWORK}
                if cfg.allow_network
                else {"network_mode": "none"}
            ),
            # Concurrent execs' gateway forwarders share a port (sandbox/gateway_forward.c):
            # connections queued on one whose exec ends move to another's, not reset.
            "sysctls": {"net.ipv4.tcp_migrate_req": "1"},
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"],
            "pids_limit": cfg.pids_limit,
            "mem_limit": cfg.memory_mb * 1024 * 1024,
            "memswap_limit": cfg.memory_mb * 1024 * 1024,
            "nano_cpus": int(cfg.cpus * 1_000_000_000),
            "read_only": True,
            "tmpfs": tmpfs,
            "volumes": volumes,
        }

    def _remove_leftover(self) -> None:
        """A container with our deterministic name left by a crashed worker is ours to remove;
        one without our label is not, and starting fails instead."""
        assert self._client is not None
        try:
            old = self._client.containers.get(self.name)
        except docker.errors.NotFound:
            return
        if old.labels.get(MANAGED_LABEL) != "1":
            raise SandboxError(f"a container named {self.name} exists and is not AgentBench's")
        old.remove(force=True)
        remove_socket_dir(self.name)

    def close(self) -> None:
        if self._client is None:
            return
        self._closing = True
        try:
            with contextlib.suppress(docker.errors.NotFound):
                if self._container is not None:
                    self._container.remove(force=True)
                else:  # start() failed midway: remove what it created, never a stranger's
                    found = self._client.containers.get(self.name)
                    if found.labels.get(MANAGED_LABEL) == "1" and all(
                        found.labels.get(k) == v for k, v in self.config.labels.items()
                    ):
                        found.remove(force=True)
        except Exception as exc:  # requests errors surface raw when the engine is gone
            raise self._close_failure(exc) from exc
        finally:
            self._container = None
            if self._server is not None:
                self._server.close()
                self._server = None
            self._client.close()
            self._client = None
            if self._accounts is not None:
                self._accounts.remove()
                self._accounts = None
            if self._init_pidfd is not None:
                os.close(self._init_pidfd)
                self._init_pidfd = None
            if self._disk is not None:
                self._disk.remove(
                    workspace=self.config.workspace, copy_back=self.config.disk_copy_back
                )
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
        if self._container is None or self._client is None:
            raise SandboxError("exec on a docker sandbox that is not started")
        with self._running_lock:
            self._running += 1
        try:
            return self._exec_gated(cmd, timeout=timeout, cwd=cwd, env=env, network=network)
        finally:
            with self._running_lock:  # held while sweeping: no exec starts meanwhile
                self._running -= 1
                if self._running == 0:
                    self._sweep()

    def _sweep(self) -> None:
        """The last running exec ended: kill whatever commands left in the container
        (``setsid`` processes outside every exec's group), as bubblewrap's PID namespace
        does. Best effort: a gone container has nothing left to kill."""
        if self._procs is not None and self._init_pid is not None:
            with contextlib.suppress(OSError):
                orphans.sweep(self._init_pid, self._procs)

    def _exec_gated(
        self,
        cmd: str | list[str],
        *,
        timeout: float,
        cwd: str | None,
        env: dict[str, str] | None,
        network: ExecNetwork,
    ) -> ExecResult:
        assert self._client is not None and self._container is not None
        if network == BLACKHOLE:
            return self._exec_blackholed(cmd, timeout=timeout, cwd=cwd, env=env)
        if network:
            if self._network is None:
                raise SandboxError(f"sandbox {self.config.name} was created without network")
            docker_network.fence(self._client, self._network)
            with self._gate.online():
                self._network.connect(self._container)
                try:
                    return self._exec(cmd, timeout=timeout, cwd=cwd, env=env)
                finally:
                    self._network.disconnect(self._container, force=True)
        with self._gate.offline():
            return self._exec(cmd, timeout=timeout, cwd=cwd, env=env)

    def _exec_blackholed(
        self, cmd: str | list[str], *, timeout: float, cwd: str | None, env: dict[str, str] | None
    ) -> ExecResult:
        """An exec whose network is a black hole (sandbox/blackhole.py), put in the
        container's own network namespace for its duration; no other exec runs meanwhile."""
        netns = self._container_netns()
        if netns is None:
            with self._gate.offline():
                return self._exec(cmd, timeout=timeout, cwd=cwd, env=env)
        env = {**blackhole.ENV, **(env or {})}
        try:
            with self._gate.online():
                blackhole.install(netns)
                try:
                    return self._exec(cmd, timeout=timeout, cwd=cwd, env=env)
                finally:
                    with contextlib.suppress(SandboxError):
                        blackhole.remove(netns)
        finally:
            os.close(netns)

    def _container_netns(self) -> int | None:
        """The container's network namespace (a file descriptor), or None (logged) where this
        host cannot reach it: not root, or an engine on another host."""
        reason = blackhole.unavailable_reason()
        if reason is None and (self._init_pid is None or self._init_pidfd is None):
            reason = "the container's processes are not on this host"
        if reason is None:
            assert self._init_pid is not None
            netns = blackhole.open_netns(self._init_pid, alive=self._init_pidfd)
            if netns is not None:
                return netns
            reason = "the container's init exited"
        log.warning("no black-hole network for %s (%s): no network at all", self.name, reason)
        return None

    def _exec(
        self, cmd: str | list[str], *, timeout: float, cwd: str | None, env: dict[str, str] | None
    ) -> ExecResult:
        argv = ["sh", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        gateway = self.config.gateway
        if gateway is not None and gateway.active:
            argv = gateway.wrap(argv)
        workdir = self.config.resolve_cwd(cwd)
        started_wall = time.time()
        oom_before = self._oom_kills()
        finished = None
        if self._server is not None:
            # ServerGone: killed from inside (``pkill python3``), docker exec from now on.
            with contextlib.suppress(ServerGone):
                finished = self._server.run(
                    argv,
                    cwd=workdir,
                    env=env or {},
                    timeout=timeout,
                    grace=HARD_DEADLINE_GRACE_SEC,
                    output_cap=self.config.output_cap_bytes,
                    kill_groups=self._kill_groups,
                )
        if finished is None:
            finished = self._docker_exec(argv, timeout=timeout, workdir=workdir, env=env)
        if finished.exit_code is None or (
            finished.exit_code >= SIGNAL_EXIT_BASE and finished.duration_sec < timeout
        ):
            # Killed without reporting, or by a signal: the container (or the engine with it)
            # may have gone. Only a living container makes this the command's own death.
            self._check_alive(wait=INIT_EXIT_WAIT_SEC if finished.exit_code is None else 0.2)
        elif _runtime_refused(finished):
            # runc could not start the command: a missing working directory, or a container
            # being removed meanwhile ("ttrpc: closed", "write init-p: broken pipe"), as when a
            # cancel removes it. Only a living container makes this the command's failure.
            self._check_alive(wait=RUNTIME_REFUSED_WAIT_SEC)
        if finished.stuck:
            return build_result(
                output=finished.output,
                exit_code=KILLED_EXIT_CODE,
                duration_sec=finished.duration_sec,
                timed_out=True,
            )
        # No exit code: the wrapper itself was killed (by the OOM killer, or kill -9 -1).
        exit_code = KILLED_EXIT_CODE if finished.exit_code is None else finished.exit_code
        timed_out = exit_code == KILLED_EXIT_CODE and finished.duration_sec >= timeout
        oom = False
        if exit_code == KILLED_EXIT_CODE and not timed_out:
            oom_after = self._oom_kills()
            if oom_before is not None and oom_after is not None:
                oom = oom_after > oom_before
            else:
                oom = self._oom_event_since(started_wall)
        return build_result(
            output=finished.output,
            exit_code=exit_code,
            duration_sec=finished.duration_sec,
            timed_out=timed_out,
            oom_killed=oom,
            disk_full=self._disk is not None and self._disk.full(),
        )

    def _docker_exec(
        self, argv: list[str], *, timeout: float, workdir: str, env: dict[str, str] | None
    ) -> Finished:
        assert self._client is not None and self._container is not None
        wrapped = ["sh", "-c", EXEC_WRAPPER, f"{max(timeout, 0.01):.3f}", *argv]
        api = self._client.api
        started = time.monotonic()
        try:
            exec_id = api.exec_create(
                self._container.id,
                wrapped,
                user=f"{AGENT_UID}:{AGENT_UID}",
                workdir=workdir,
                environment=env or None,
            )["Id"]
        except Exception as exc:  # requests errors surface raw when the engine is gone
            raise self._failure(exc, f"exec in {self.name} failed") from exc
        output = CappedOutput(self.config.output_cap_bytes)
        errors: list[BaseException] = []
        reader = threading.Thread(
            target=self._read_stream,
            args=(exec_id, output, errors),
            daemon=True,
            name=f"exec-{self.name}",
        )
        reader.start()
        reader.join(timeout + HARD_DEADLINE_GRACE_SEC)
        duration = time.monotonic() - started
        if reader.is_alive():
            # The engine hung; the thread ends when close() removes the container.
            return Finished(output=output, exit_code=None, duration_sec=duration, stuck=True)
        if errors:
            raise self._failure(errors[0], f"exec in {self.name} failed") from errors[0]
        try:
            exit_code = api.exec_inspect(exec_id)["ExitCode"]
        except Exception as exc:
            raise self._failure(exc, f"exec in {self.name} failed") from exc
        if exit_code is None:
            raise SandboxError(f"exec in {self.name} ended without an exit code")
        if exit_code == CANNOT_EXECUTE and output.text("stdout").startswith(OCI_FAILURE):
            # runc could not start the command (a missing working directory): say so on
            # stderr, where bubblewrap reports it too, not on the command's stdout.
            output = _moved_to_stderr(output)
        return Finished(output=output, exit_code=exit_code, duration_sec=duration, stuck=False)

    def _close_failure(self, exc: BaseException) -> SandboxError:
        self._closing = False  # it is the engine's failure, not ours
        try:
            return self._failure(exc, f"cannot remove container {self.name}")
        finally:
            self._closing = True

    def _check_alive(self, *, wait: float) -> None:
        """Raise SandboxError (``[engine-gone]``, ``[container-gone]`` or ``[killed]``) unless
        the container still runs. The host watches the container's init (its exit is the
        truth; the engine may lag or be stopping); without that view, the engine is asked."""
        if self._closing or self._container is None:
            raise SandboxClosed(f"[killed] sandbox {self.name} was closed while a command ran")
        init_exited = None
        if self._init_pidfd is not None:
            init_exited = bool(select.select([self._init_pidfd], [], [], wait)[0])
            if not init_exited:
                return
        if self._closing:
            raise SandboxClosed(f"[killed] sandbox {self.name} was closed while a command ran")
        try:
            self._container.reload()
        except Exception as exc:
            raise self._failure(exc, f"container {self.name}") from exc
        state = self._container.attrs.get("State") or {}
        if init_exited or not state.get("Running"):
            detail = (
                f"the engine says: status {state.get('Status')}, exit code {state.get('ExitCode')}"
            )
            if init_exited:
                detail = f"its init exited; {detail}"
            if state.get("OOMKilled"):
                detail += ", OOM-killed"
            if state.get("Error"):
                detail += f", {state['Error']}"
            raise SandboxError(f"[container-gone] container {self.name} stopped ({detail})")

    def _failure(self, exc: BaseException, doing: str) -> SandboxError:
        """The SandboxError for an engine call that failed, saying whose fault it was: the
        container gone (``[container-gone]``), the engine gone (``[engine-gone]``), or the
        harness closing the sandbox meanwhile (``[killed]``). The engine's error is kept."""
        if self._closing:
            return SandboxClosed(f"[killed] sandbox {self.name} was closed while a command ran")
        if isinstance(exc, docker.errors.NotFound):
            return SandboxError(f"[container-gone] {doing}: {_first_line(exc)}")
        if unavailable_reason() is not None:
            return SandboxError(
                f"[engine-gone] {doing}: the Docker engine went away: {_first_line(exc)}"
            )
        return SandboxError(f"{doing}: {_first_line(exc)}")

    def _kill_groups(self, groups: list[int]) -> None:
        """The backstop when a command outlived its timeout by the grace period (its
        ``timeout`` stopped, say): SIGKILL its process groups with a ``docker exec``."""
        assert self._client is not None and self._container is not None
        script = 'for g; do kill -KILL -"$g"; done 2>/dev/null; true'
        # Best effort, never raising: the engine may be the thing that hangs (requests and
        # urllib3 timeouts surface raw from the SDK).
        with contextlib.suppress(Exception):
            exec_id = self._client.api.exec_create(
                self._container.id,
                ["sh", "-c", script, "sh", *map(str, groups)],
                user=f"{AGENT_UID}:{AGENT_UID}",
            )["Id"]
            self._client.api.exec_start(exec_id)

    def _read_stream(self, exec_id: str, output: CappedOutput, errors: list[BaseException]) -> None:
        assert self._client is not None
        try:
            for out, err in self._client.api.exec_start(exec_id, stream=True, demux=True):
                if out:
                    output.feed("stdout", out)
                if err:
                    output.feed("stderr", err)
        except Exception as exc:  # reported by _exec in the caller's thread
            errors.append(exc)

    def _oom_kills(self) -> int | None:
        """The kernel's OOM-kill count for the container's memory cgroup, read on the host
        (synchronous, unlike the engine's events); None when the cgroup is not visible here."""
        return cgroups.read_oom_kills(self._oom_counter) if self._oom_counter else None

    def _oom_event_since(self, since: float) -> bool:
        """Fallback for a remote engine: did it report an ``oom`` event for the container?"""
        assert self._client is not None and self._container is not None
        # The ignore: the engine takes fractional seconds as a string (docker-py passes a str
        # through); the stubs allow only datetime or int, which would drop the fraction.
        events = self._client.events(  # type: ignore[call-overload]
            since=f"{since:.9f}",
            until=f"{time.time() + OOM_EVENT_WAIT_SEC:.9f}",
            filters={"container": self._container.id, "event": "oom"},
            decode=True,
        )
        try:
            return any(True for _ in events)
        finally:
            events.close()


def _moved_to_stderr(output: CappedOutput) -> CappedOutput:
    moved = CappedOutput(output.cap)
    moved.feed("stderr", output.text("stdout").strip().encode() + b"\n")
    return moved


def remove_stale_containers(label_filter: dict[str, str]) -> int:
    """Remove AgentBench containers matching every ``label=value`` (for example those of a
    crashed worker's attempts) and return how many were removed. Only containers carrying
    ``agentbench.managed=1`` are considered. Returns 0 when no Docker engine answers: with no
    engine there is nothing left behind."""
    if unavailable_reason() is not None:
        return 0
    labels = [f"{MANAGED_LABEL}=1"] + [f"{k}={v}" for k, v in label_filter.items()]
    client = _client()
    removed = 0
    try:
        for container in client.containers.list(
            all=True, filters={"label": labels}, ignore_removed=True
        ):
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True)
                removed += 1
            if container.name:  # a listed container always has one; typed optional
                remove_socket_dir(container.name)
    finally:
        client.close()
    return removed


def managed_label_values(label: str) -> set[str]:
    """The values of ``label`` on this engine's AgentBench containers (running or not), e.g.
    the attempt ids that still have a container; empty when no engine answers."""
    if unavailable_reason() is not None:
        return set()
    client = _client()
    try:
        found = client.containers.list(
            all=True, filters={"label": [f"{MANAGED_LABEL}=1", label]}, ignore_removed=True
        )
        return {c.labels[label] for c in found if label in c.labels}
    finally:
        client.close()


def _runtime_refused(finished: Finished) -> bool:
    """Whether the container runtime refused to start the command (exit 126 with its words)."""
    if finished.exit_code != CANNOT_EXECUTE:
        return False
    return any(finished.output.text(name).startswith(OCI_FAILURE) for name in ("stdout", "stderr"))
