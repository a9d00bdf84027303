"""One conformance suite, run for real against every sandbox backend (Docker and bubblewrap).

Needs a Docker engine, bubblewrap and the runner image/rootfs: `bash .ci/test` sets them up.
"""

from __future__ import annotations

import os
import pwd
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import docker
import pytest

from sandbox import open_sandbox
from sandbox.base import AGENT_UID, ExecResult, ReadOnlyMount, Sandbox, SandboxConfig
from sandbox.errors import SandboxError, SandboxPathError
from sandbox.host_fence import host_ipv4_addresses
from tests.support.netns_fixtures import FakeInternet, Listener, host_address_for

MakeSandbox = Callable[..., Sandbox]


@pytest.fixture
def make_sandbox(backend: str, tmp_path: Path) -> Iterator[MakeSandbox]:
    """Build (not start) a sandbox with a unique name over a fresh workspace."""
    made: list[Sandbox] = []

    def make(**overrides: object) -> Sandbox:
        fields: dict[str, object] = {
            "name": f"test-{uuid.uuid4().hex[:12]}",
            "workspace": tmp_path / f"ws{len(made)}",
            "memory_mb": 256,
            "pids_limit": 64,
            "labels": {"agentbench.test": "conformance"},
        }
        fields.update(overrides)
        sb = open_sandbox(SandboxConfig(**fields), backend)  # type: ignore[arg-type]
        made.append(sb)
        return sb

    yield make
    for sb in made:
        sb.close()


@pytest.fixture
def sb(make_sandbox: MakeSandbox) -> Iterator[Sandbox]:
    with make_sandbox() as started:
        yield started


def host_processes_with(marker: str) -> list[int]:
    """Host pids whose command line contains ``marker`` (sandboxed processes included)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if marker.encode() in cmdline and int(entry.name) != os.getpid():
            found.append(int(entry.name))
    return found


def leftovers(sandbox: Sandbox) -> list[str]:
    """What a closed sandbox left behind: its container for Docker; for bubblewrap its cgroups,
    workspace mount and processes (the spawner and every bwrap carry ab-<name> in argv)."""
    if sandbox.backend == "docker":
        client = docker.from_env()
        try:
            # Only this sandbox's name, and sparse (no inspect of each): other workers' test
            # containers come and go meanwhile.
            name = f"ab-{sandbox.config.name}"
            listed = client.containers.list(all=True, sparse=True, filters={"name": name})
            return [n for c in listed for n in c.attrs.get("Names", []) if n.lstrip("/") == name]
        finally:
            client.close()
    name = f"ab-{sandbox.config.name}"
    found = [str(p) for p in Path("/sys/fs/cgroup").glob(f"*/agentbench/{name}")]
    found += [
        f"mount {line.split()[1]}"
        for line in Path("/proc/self/mounts").read_text().splitlines()
        if line.split()[1].endswith(f"/{name}")
    ]
    found += [f"pid {pid}" for pid in host_processes_with(name)]
    return found


def connect_script(host: str, port: int) -> list[str]:
    code = (
        "import socket, sys\n"
        f"s = socket.create_connection(({host!r}, {port}), timeout=3)\n"
        "print(s.recv(100).decode().strip())\n"
    )
    return ["python3", "-c", code]


# -- commands ------------------------------------------------------------------------------


def test_it_reports_exit_code_stdout_and_stderr(sb: Sandbox) -> None:
    result = sb.exec("echo out; echo err >&2; exit 3", timeout=10)
    assert isinstance(result, ExecResult)
    assert (result.exit_code, result.stdout, result.stderr) == (3, "out\n", "err\n")
    assert not result.ok and not result.timed_out and not result.truncated
    assert 0 < result.duration_sec < 5


def test_it_runs_a_list_command_without_a_shell(sb: Sandbox) -> None:
    result = sb.exec(
        ["python3", "-c", "import sys; print(sys.argv[1:])", "a b", "$HOME"], timeout=10
    )
    assert result.ok
    assert result.stdout == "['a b', '$HOME']\n"


def test_it_passes_environment_and_working_directory(make_sandbox: MakeSandbox) -> None:
    with make_sandbox(env={"FROM_CONFIG": "c", "OVERRIDDEN": "config"}) as sb:
        sb.exec("mkdir -p sub/dir", timeout=10)
        result = sb.exec(
            'echo "$FROM_CONFIG $FROM_EXEC $OVERRIDDEN"; pwd',
            timeout=10,
            env={"FROM_EXEC": "e", "OVERRIDDEN": "exec"},
            cwd="sub/dir",
        )
        assert result.stdout == "c e exec\n/workspace/sub/dir\n"
        assert sb.exec("pwd", timeout=10, cwd="/tmp").stdout == "/tmp\n"
        assert sb.exec("pwd", timeout=10).stdout == "/workspace\n"


def test_it_runs_as_the_agent_user_with_the_runner_tools(sb: Sandbox) -> None:
    result = sb.exec(
        "id -u; python --version; python -m pytest --version; git --version; rg --version",
        timeout=20,
    )
    assert result.ok, result.stderr
    lines = (result.stdout + result.stderr).splitlines()
    assert lines[0] == str(AGENT_UID)
    assert any(line.startswith("Python 3.11") for line in lines)
    assert any(line.startswith("pytest ") for line in lines)
    assert any(line.startswith("git version") for line in lines)
    assert any(line.startswith("ripgrep ") for line in lines)


def test_it_kills_a_command_and_its_children_at_the_timeout(sb: Sandbox) -> None:
    marker = f"{uuid.uuid4().int % 10**6 + 10**6}.25"  # a unique sleep length to find
    started = time.monotonic()
    result = sb.exec(f"sleep {marker} & sleep {marker}; echo never", timeout=1)
    elapsed = time.monotonic() - started
    assert result.exit_code == 124
    assert result.timed_out and not result.oom_killed
    assert "never" not in result.stdout
    assert elapsed < 3
    deadline = time.monotonic() + 3
    while host_processes_with(f"sleep {marker}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert host_processes_with(f"sleep {marker}") == []
    assert sb.exec("echo still usable", timeout=10).stdout == "still usable\n"


def test_a_background_job_does_not_outlive_its_exec(sb: Sandbox) -> None:
    marker = f"{uuid.uuid4().int % 10**6 + 10**6}.75"
    started = time.monotonic()
    result = sb.exec(f"sleep {marker} & echo started", timeout=10)
    assert result.ok and result.stdout == "started\n"
    assert time.monotonic() - started < 2  # not held open by the job's copy of stdout
    deadline = time.monotonic() + 3
    while host_processes_with(f"sleep {marker}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert host_processes_with(f"sleep {marker}") == []


def test_a_setsid_process_does_not_outlive_its_exec(sb: Sandbox) -> None:
    """A process that leaves the exec's process group and session (a daemon) is gone before
    the next command of the same sandbox runs, as if each exec had its own PID namespace."""
    marker = f"{uuid.uuid4().int % 10**6 + 10**6}.5"
    started = sb.exec(
        f"setsid sh -c 'sleep {marker}' </dev/null >/dev/null 2>&1 & "
        f"setsid -f sleep {marker} </dev/null >/dev/null 2>&1; echo started",
        timeout=10,
    )
    assert started.ok and started.stdout == "started\n"
    deadline = time.monotonic() + 3  # bubblewrap's PID namespace dies a moment after bwrap
    while host_processes_with(f"sleep {marker}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert host_processes_with(f"sleep {marker}") == []
    later = sb.exec(f"ps -eo args | grep -c '^sleep {marker}' || true", timeout=10)
    assert later.stdout.strip() == "0"


def test_it_runs_as_a_uid_without_a_host_account(sb: Sandbox) -> None:
    result = sb.exec("id -u; id -un; id -g; echo $HOME; touch /workspace/mine", timeout=10)
    assert result.ok, result.stderr
    assert result.stdout.split() == [str(AGENT_UID), "agent", str(AGENT_UID), "/home/agent"]
    assert AGENT_UID != 1000
    with pytest.raises(KeyError):
        pwd.getpwuid(AGENT_UID)
    assert (sb.config.workspace / "mine").stat().st_uid == AGENT_UID


def test_a_disk_quota_stops_writes_to_the_workspace_and_tmp(make_sandbox: MakeSandbox) -> None:
    """Everything the sandbox writes shares one quota; hitting it is ENOSPC for the command,
    ``disk_full`` on the result, and host disk use bounded by the quota. The workspace's tree
    is there inside and back on the host afterwards."""
    sb = make_sandbox(disk_mb=64)
    sb.config.workspace.mkdir(parents=True)
    (sb.config.workspace / "kept.txt").write_text("before\n")
    with sb:
        assert sb.disk_quota.startswith("ext4 image of 64 MiB"), sb.disk_quota
        ok = sb.exec(
            "cat kept.txt; echo after >> kept.txt; head -c 1000000 /dev/zero > /tmp/t", timeout=20
        )
        assert ok.ok and ok.stdout == "before\n" and not ok.disk_full, ok.stderr
        image = next(Path("/var/lib/agentbench/sandbox-disks").glob(f"*{sb.config.name}.img"))
        for target in ("/workspace/big", "/tmp/big", "/home/agent/big"):
            full = sb.exec(f"head -c 200000000 /dev/zero > {target}", timeout=60)
            assert full.exit_code != 0 and full.disk_full, (target, full)
            assert "No space left on device" in full.stderr
            assert image.stat().st_blocks * 512 <= 64 * 1024 * 1024
            sb.exec(f"rm -f {target}", timeout=10)
        assert not sb.exec("true", timeout=10).disk_full
    assert (sb.config.workspace / "kept.txt").read_text() == "before\nafter\n"
    assert not image.exists()


def test_it_caps_output_and_marks_it_truncated(make_sandbox: MakeSandbox) -> None:
    with make_sandbox(output_cap_bytes=1000) as sb:
        result = sb.exec("head -c 100000 /dev/zero | tr '\\0' x; echo tail >&2", timeout=10)
        assert result.ok
        assert result.truncated
        assert result.stdout == "x" * 1000
        assert result.stderr == "tail\n"
        small = sb.exec("echo small", timeout=10)
        assert not small.truncated and small.stdout == "small\n"


def test_it_gives_commands_the_default_signal_dispositions(sb: Sandbox) -> None:
    """A writer to a closed pipe dies of SIGPIPE quietly, as in a login shell."""
    result = sb.exec("yes | head -n 1", timeout=10)
    assert result.ok
    assert result.stdout == "y\n"
    assert result.stderr == ""


# -- isolation -----------------------------------------------------------------------------


def test_it_has_no_network_by_default(
    backend: str, sb: Sandbox, listener: Listener, fake_internet: FakeInternet
) -> None:
    outside = sb.exec(connect_script(fake_internet.address, fake_internet.port), timeout=10)
    assert outside.exit_code != 0
    assert fake_internet.greeting not in outside.stdout
    for host in {"127.0.0.1", host_address_for(backend)}:
        result = sb.exec(connect_script(host, listener.port), timeout=10)
        assert result.exit_code != 0, f"reached the host at {host}"
        assert "hello" not in result.stdout
    assert listener.accepted == 0


def test_it_reaches_the_network_only_for_a_network_exec(
    sb: Sandbox, fake_internet: FakeInternet
) -> None:
    script = connect_script(fake_internet.address, fake_internet.port)
    online = sb.exec(script, timeout=10, network=True)
    assert online.ok, online.stderr
    assert online.stdout == fake_internet.greeting
    # The next command is offline again.
    offline = sb.exec(script, timeout=10)
    assert offline.exit_code != 0
    assert offline.stdout == ""


def test_it_never_reaches_the_host_even_with_network(
    backend: str, sb: Sandbox, listener: Listener, fake_internet: FakeInternet
) -> None:
    """The listener answers on every address of the host; a networked command reaches the
    internet stand-in but none of them (nor the backend's alias for the host)."""
    addresses = {*host_ipv4_addresses(), host_address_for(backend)}
    assert len(addresses) >= 3  # loopback, the uplink, the internet stand-in's side at least
    code = (
        "import socket, sys\n"
        "for host in sys.argv[2:]:\n"
        "    try:\n"
        "        s = socket.create_connection((host, int(sys.argv[1])), timeout=2)\n"
        "        print('reached', host, s.recv(100))\n"
        "    except OSError as exc:\n"
        "        print('refused', host, type(exc).__name__)\n"
    )
    result = sb.exec(
        ["python3", "-c", code, str(listener.port), *sorted(addresses)], timeout=60, network=True
    )
    assert result.ok, result.stderr
    assert "reached" not in result.stdout
    assert result.stdout.count("refused") == len(addresses)
    assert listener.accepted == 0
    online = sb.exec(
        connect_script(fake_internet.address, fake_internet.port), timeout=10, network=True
    )
    assert online.stdout == fake_internet.greeting


BLACKHOLE_PROBE = """
import socket, sys, time

def connect(host, port):
    s = socket.socket()
    s.settimeout(1.5)
    started = time.monotonic()
    try:
        s.connect((host, port))
        return "reached " + s.recv(100).decode().strip()
    except socket.timeout:
        return "timeout after %.1f s" % (time.monotonic() - started)
    except OSError as exc:
        return "error " + type(exc).__name__ + " " + str(exc)

port = int(sys.argv[1])
for target in sys.argv[2:]:
    host, _, target_port = target.partition(":")
    print(target, connect(host, int(target_port or port)))
server = next(l.split()[1] for l in open("/etc/resolv.conf") if l.startswith("nameserver"))
dns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
dns.settimeout(1.5)
query = bytes.fromhex("abcd01000001000000000000076578616d706c6503636f6d0000010001")
dns.sendto(query, (server, 53))
try:
    print("dns answer", dns.recv(512))
except socket.timeout:
    print("dns no answer")
try:
    print("resolved", socket.getaddrinfo("example.com", 80))
except socket.gaierror as exc:
    print("lookup failed", exc)
"""


@pytest.mark.parametrize("allow_network", [False, True], ids=["offline", "network-capable"])
def test_a_blackhole_exec_times_out_every_connect_and_reaches_nothing(
    backend: str,
    make_sandbox: MakeSandbox,
    listener: Listener,
    fake_internet: FakeInternet,
    allow_network: bool,
) -> None:
    """``network="blackhole"`` (SWE-bench's final tests): a default route whose packets are
    dropped. A connect to a non-routable address, to the internet stand-in and to every
    address of the host times out (not refused, not unreachable); DNS gets no answer."""
    targets = {"10.255.255.1:80", f"{fake_internet.address}:{fake_internet.port}"}
    targets |= {
        f"{address}:{listener.port}"
        for address in {*host_ipv4_addresses(), host_address_for(backend)}
        if not address.startswith("127.")  # inside, loopback is the sandbox's own
    }
    with make_sandbox(allow_network=allow_network) as sandbox:
        result = sandbox.exec(
            ["python3", "-c", BLACKHOLE_PROBE, "0", *sorted(targets)],
            timeout=120,
            network="blackhole",
        )
        after = sandbox.exec(["python3", "-c", BLACKHOLE_PROBE, "0", "10.255.255.1:80"], timeout=60)

    assert result.ok, result.stderr
    outcomes = {
        line.split(" ", 1)[0]: line.split(" ", 1)[1]
        for line in result.stdout.splitlines()
        if line.split(" ", 1)[0] in targets
    }
    assert set(outcomes) == targets
    for target, outcome in outcomes.items():
        assert outcome.startswith("timeout after "), f"{target}: {outcome}"
    assert "dns no answer" in result.stdout
    assert "lookup failed" in result.stdout and "resolved" not in result.stdout
    assert listener.accepted == 0 and "reached" not in result.stdout
    # The black hole is the exec's own: the next command has no route at all again.
    assert "10.255.255.1:80 error OSError [Errno 101] Network is unreachable" in after.stdout


def test_it_refuses_network_to_a_sandbox_made_without(make_sandbox: MakeSandbox) -> None:
    with make_sandbox(allow_network=False) as offline:
        with pytest.raises(SandboxError, match="created without network"):
            offline.exec("true", timeout=10, network=True)
        interfaces = offline.exec(
            ["python3", "-c", "import socket; print(*(n for _, n in socket.if_nameindex()))"],
            timeout=10,
        )
        assert interfaces.stdout.split() == ["lo"]


def test_it_cannot_write_outside_the_workspace(sb: Sandbox) -> None:
    name = f"ab-escape-{uuid.uuid4().hex[:8]}"
    for directory in ("/etc", "/usr", "/root", "/", "/var/lib"):
        result = sb.exec(["touch", f"{directory.rstrip('/')}/{name}"], timeout=10)
        assert result.exit_code != 0, directory
        assert not Path(directory, name).exists()
    inside = sb.exec(f"touch /workspace/{name} /tmp/{name} && ls /tmp/{name}", timeout=10)
    assert inside.ok, inside.stderr
    created = sb.config.workspace / name
    assert created.exists()
    assert created.stat().st_uid == AGENT_UID
    assert not Path("/tmp", name).exists()  # the sandbox's /tmp is its own tmpfs


def test_it_cannot_change_its_own_cgroup_limits(sb: Sandbox) -> None:
    # Suites size themselves from the cgroup they see (pylint reads cpu.max): bubblewrap binds
    # the sandbox's own group in read-only, Docker gives a container its own, read-only too.
    # Whatever is seen, nothing inside may raise a limit or leave the group.
    files = "cpu.max memory.max pids.max cgroup.procs cpu/cpu.cfs_quota_us pids/pids.max"
    script = (
        "seen=0; for f in " + files + "; do p=/sys/fs/cgroup/$f; [ -e $p ] || continue; "
        "seen=1; if echo max > $p 2>/dev/null || echo -1 > $p 2>/dev/null; "
        'then echo "wrote $p"; fi; done; echo "seen=$seen"; '
        "touch /sys/fs/cgroup/ab-escape 2>/dev/null && echo wrote-new-file; "
        "mkdir /sys/fs/cgroup/ab-child 2>/dev/null && echo made-child-group; true"
    )
    result = sb.exec(script, timeout=20)
    assert result.ok, result.stderr
    assert "wrote" not in result.stdout and "made-child-group" not in result.stdout, result.stdout
    # The limits are there to be read (what the view is for): a file a suite reads exists.
    assert "seen=1" in result.stdout, result.stdout


def test_it_stops_a_fork_bomb_with_the_pid_limit(sb: Sandbox) -> None:
    forker = (
        "import os, time\n"
        "n = 0\n"
        "try:\n"
        "    for _ in range(1000):\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(30)\n"
        "            os._exit(0)\n"
        "        n += 1\n"
        "except OSError as exc:\n"
        "    print(n, exc.errno)\n"
    )
    result = sb.exec(["python3", "-c", forker], timeout=10)
    forked, errno_ = result.stdout.split()
    assert int(forked) < sb.config.pids_limit
    assert int(errno_) == 11  # EAGAIN: the PID limit, not something else
    bomb = sb.exec("bomb() { bomb | bomb & }; bomb; sleep 2", timeout=4)
    assert bomb.exit_code in (0, 2, 124, 137)
    # The machine and the sandbox still work afterwards.
    assert sb.exec("echo alive", timeout=10).stdout == "alive\n"
    assert os.system("true") == 0


def test_it_kills_a_memory_hog_with_137(sb: Sandbox) -> None:
    hog = "chunks = []\nwhile True:\n    chunks.append(bytearray(16 * 1024 * 1024))\n"
    result = sb.exec(["python3", "-c", hog], timeout=20)
    assert result.exit_code == 137
    assert result.oom_killed and not result.timed_out
    assert sb.exec("echo alive", timeout=10).stdout == "alive\n"


def test_a_kill_9_reports_137_without_oom(sb: Sandbox) -> None:
    result = sb.exec("kill -9 $$", timeout=10)
    assert result.exit_code == 137
    assert not result.oom_killed and not result.timed_out


# -- files ---------------------------------------------------------------------------------


def test_it_mounts_a_host_folder_read_only(make_sandbox: MakeSandbox) -> None:
    # Under /tmp itself: bubblewrap runs as the sandbox uid, which cannot enter pytest's tmp_path
    # (an install cache under /var/lib/agentbench is open to it the same way).
    tool = Path(tempfile.mkdtemp(prefix="ab-ro-mount-"))
    tool.chmod(0o755)
    (tool / "bin").mkdir(mode=0o755)
    (tool / "bin" / "hello").write_text("#!/bin/sh\necho hello from the mount\n")
    (tool / "bin" / "hello").chmod(0o755)
    mount = ReadOnlyMount(source=tool, target="/mnt/agentbench/tool")
    with make_sandbox(readonly_mounts=(mount,)) as sb:
        ran = sb.exec("/mnt/agentbench/tool/bin/hello", timeout=30)
        assert (ran.exit_code, ran.stdout) == (0, "hello from the mount\n")
        wrote = sb.exec("touch /mnt/agentbench/tool/bin/planted", timeout=30)
        assert wrote.exit_code != 0
        assert "Read-only file system" in wrote.stderr
    assert sorted(p.name for p in (tool / "bin").iterdir()) == ["hello"]
    shutil.rmtree(tool)


def test_a_read_only_mount_must_go_under_the_mount_root() -> None:
    with pytest.raises(ValueError, match="under /mnt/"):
        ReadOnlyMount(source=Path("/usr"), target="/usr/local/agent")
    with pytest.raises(ValueError, match="under /mnt/"):
        ReadOnlyMount(source=Path("/usr"), target="/mnt/../etc")


def test_it_round_trips_files(sb: Sandbox) -> None:
    sb.write_file("/workspace/notes/a.txt", "from the host\n")
    sb.write_file("b.bin", b"\x00\x01\xff")
    assert sb.exec("cat notes/a.txt", timeout=10).stdout == "from the host\n"
    assert sb.exec("od -An -tx1 b.bin", timeout=10).stdout.split() == ["00", "01", "ff"]
    assert sb.exec("echo changed >> notes/a.txt && echo new > c.txt", timeout=10).ok
    assert sb.read_file("notes/a.txt") == b"from the host\nchanged\n"
    assert sb.read_file("/workspace/c.txt") == b"new\n"


def test_it_copies_directories_in_and_out(sb: Sandbox, tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "mod.py").write_text("VALUE = 1\n")
    (src / "run.sh").write_text("#!/bin/sh\necho ran\n")
    (src / "run.sh").chmod(0o755)
    sb.copy_in(src, "/workspace/repo")
    result = sb.exec(
        "./run.sh && cat pkg/mod.py && echo more > pkg/new.txt", timeout=10, cwd="repo"
    )
    assert result.ok, result.stderr
    assert result.stdout == "ran\nVALUE = 1\n"
    out = tmp_path / "out"
    sb.copy_out("repo", out)
    assert (out / "pkg" / "mod.py").read_text() == "VALUE = 1\n"
    assert (out / "pkg" / "new.txt").read_text() == "more\n"
    assert os.access(out / "run.sh", os.X_OK)


def test_it_refuses_paths_that_leave_the_workspace(sb: Sandbox, tmp_path: Path) -> None:
    for path in ("../outside", "/etc/passwd", "/workspace/../etc/passwd", "a/../../b", "/work"):
        with pytest.raises(SandboxPathError):
            sb.read_file(path)
        with pytest.raises(SandboxPathError):
            sb.write_file(path, "x")
    # Symlinks made inside the sandbox lead nowhere outside.
    assert sb.exec("ln -s /etc etc_link && ln -s /etc/hostname host_link", timeout=10).ok
    with pytest.raises(SandboxPathError):
        sb.read_file("etc_link/hostname")
    with pytest.raises(SandboxPathError):
        sb.read_file("host_link")
    with pytest.raises(SandboxPathError):
        sb.write_file("etc_link/ab-planted", "x")
    with pytest.raises(SandboxPathError):
        sb.copy_in(tmp_path, "etc_link")
    assert not Path("/etc/ab-planted").exists()
    # Writing over a symlink replaces the link, never the file it points to.
    hostname_before = Path("/etc/hostname").read_bytes()
    sb.write_file("host_link", "replaced")
    assert Path("/etc/hostname").read_bytes() == hostname_before
    assert sb.read_file("host_link") == b"replaced"
    # copy_out keeps links as links.
    out = tmp_path / "out"
    sb.copy_out("/workspace", out)
    assert (out / "etc_link").is_symlink()
    assert os.readlink(out / "etc_link") == "/etc"


# -- lifecycle -----------------------------------------------------------------------------


def test_it_leaves_nothing_behind_after_exit(make_sandbox: MakeSandbox) -> None:
    marker = f"{uuid.uuid4().int % 10**6 + 10**6}.5"
    sandbox = make_sandbox()
    with sandbox:
        sandbox.exec(f"(setsid sleep {marker} >/dev/null 2>&1 &) ; true", timeout=10)
        assert leftovers(sandbox)
    assert leftovers(sandbox) == []
    deadline = time.monotonic() + 3
    while host_processes_with(f"sleep {marker}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert host_processes_with(f"sleep {marker}") == []
    sandbox.close()  # a second close is harmless


def test_it_leaves_nothing_behind_after_an_exception(make_sandbox: MakeSandbox) -> None:
    sandbox = make_sandbox()
    with pytest.raises(RuntimeError, match="boom"), sandbox:
        assert sandbox.exec("true", timeout=10).ok
        raise RuntimeError("boom")
    assert leftovers(sandbox) == []
