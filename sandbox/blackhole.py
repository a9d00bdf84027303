"""A network that silently drops everything, for commands that must behave as if they had one.

The official SWE-bench evaluation runs its tests in containers that have a network. Ours have
none (loopback only): a test that connects to a non-routable address and expects a connect
*timeout* (requests' ``TestTimeout::test_connect_timeout``) gets "Network is unreachable" at
once instead, and fails where it passes upstream. An exec with ``network="blackhole"`` gets a
network namespace with a default route into a black hole:

- a veth pair inside the command's own network namespace, one end up with ARP off and the
  other end down; IPv4 and IPv6 default routes through the end that is up. A packet to any
  address but loopback is handed to a link whose peer is down and dropped: nothing answers,
  not even with an error, so a connect times out, and a DNS query gets no answer
  (bubblewrap's resolver is ``DNS``, an address in the black hole; Docker's is the engine's).
- Nothing leaves the namespace: no packet reaches the host or anything beyond it, so no
  firewall rule is involved (the host fence of networked commands stays as it is).

Configured from the host as root with ``nsenter --net`` into the command's namespace, opened
by file descriptor while its process is known to be the command's (never the host's own:
checked by its inode), and iproute2's ``ip``. Where that cannot be done (not root,
no ``nsenter``/``ip``, a Docker engine on another host) the command runs with no network at
all, as before, and ``unavailable_reason`` says why.
"""

from __future__ import annotations

import os
import select
import shutil
import subprocess

from sandbox.errors import SandboxError

IFACE = "ab-bh0"
PEER = "ab-bh1"
# A resolver address in the black hole (RFC 2544's benchmarking range, never routed).
DNS = "198.18.0.53"
RESOLV_CONF = f"nameserver {DNS}\n".encode()
# The resolver options of a black-holed command (glibc reads RES_OPTIONS over resolv.conf's):
# a lookup gives up after 2 s instead of Docker's default 5 s x 2 per name server.
ENV = {"RES_OPTIONS": "timeout:2 attempts:1"}
SETUP = (
    f"link add {IFACE} type veth peer name {PEER}\n"
    f"link set {IFACE} arp off\n"
    f"link set {IFACE} up\n"
    f"route add default dev {IFACE}\n"
)
IP_TIMEOUT_SEC = 20


class BlackholeError(SandboxError):
    """The black-hole network could not be put in place."""


def unavailable_reason() -> str | None:
    """None when this host can give a command a black-hole network, else why not."""
    if os.geteuid() != 0:
        return "a black-hole network needs root (nsenter into the command's namespace)"
    for tool in ("nsenter", "ip"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (util-linux, iproute2)"
    return None


def install(netns: int) -> None:
    """Put the black hole in the network namespace open as file descriptor ``netns`` (opened
    from ``/proc/<pid>/ns/net`` while the process was known to be the command's), which must
    not be the host's. Raises BlackholeError."""
    _check_not_host(netns)
    _ip(netns, ["-batch", "-"], SETUP)
    # IPv6 is off in some namespaces (Docker's default): then there is nothing to route.
    _ip(netns, ["-6", "route", "add", "default", "dev", IFACE], check=False)


def remove(netns: int) -> None:
    """Take the black hole out of ``netns`` again (the pair goes with either end)."""
    _check_not_host(netns)
    _ip(netns, ["link", "del", IFACE], check=False)


def open_netns(pid: int, *, alive: int | None = None) -> int | None:
    """A file descriptor on ``pid``'s network namespace (close it when done). With ``alive``,
    a pidfd of the process: None when it had exited by the time the namespace was opened (the
    pid may name another process by then)."""
    try:
        netns = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise BlackholeError(f"cannot open the network namespace of pid {pid}: {exc}") from exc
    if alive is not None and select.select([alive], [], [], 0)[0]:
        os.close(netns)
        return None
    return netns


def _check_not_host(netns: int) -> None:
    theirs = os.fstat(netns)
    ours = os.stat("/proc/self/ns/net")
    if (theirs.st_dev, theirs.st_ino) == (ours.st_dev, ours.st_ino):
        raise BlackholeError("that is the host's own network namespace: refused")


def _ip(netns: int, args: list[str], stdin: str = "", *, check: bool = True) -> bool:
    try:
        done = subprocess.run(
            ["nsenter", f"--net=/proc/self/fd/{netns}", "ip", *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=IP_TIMEOUT_SEC,
            pass_fds=(netns,),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BlackholeError(f"cannot run ip in the command's network namespace: {exc}") from exc
    if done.returncode != 0 and check:
        detail = (done.stderr.strip() or f"exit {done.returncode}").splitlines()[0]
        raise BlackholeError(f"cannot set up the black-hole network (ip {args[0]}): {detail}")
    return done.returncode == 0
