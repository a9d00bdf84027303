"""Host firewall rules that keep a networked sandbox off the host itself.

A command with ``network=True`` may reach the internet, never a service on the host (a
database on loopback, the Docker API, a metadata endpoint). Each backend's traffic reaches the
host by a different road, so each gets its own rules, all tagged with ``COMMENT``:

- bubblewrap: the sandbox's user-mode network stack (slirp4netns) opens ordinary sockets in the
  host's network namespace. It runs with the group ``NET_GID``, and the ``OUTPUT`` rules
  refuse that group any destination that is an address of the host (``addrtype LOCAL``: every
  interface, loopback included) or link-local. The one exception: DNS to a loopback stub
  resolver (systemd-resolved's 127.0.0.53), which name resolution in the sandbox goes through.
- Docker: packets from the sandbox network's bridge addressed to the host go through
  ``INPUT`` (refused); link-local addresses through ``FORWARD`` (refused in ``DOCKER-USER``).

The rules are checked (``iptables -C``) before every networked command and inserted when
missing, so a flushed firewall is repaired; when they cannot be (no iptables, not root) the
networked command fails with FenceError instead of running unfenced.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading

from sandbox.errors import SandboxError

COMMENT = "agentbench-sandbox-fence"
DEFAULT_NET_GID = 64531
LINK_LOCAL = "169.254.0.0/16"
IPTABLES_TIMEOUT_SEC = 20
_lock = threading.Lock()


class FenceError(SandboxError):
    """The host firewall rules a networked command needs could not be put in place."""


def net_gid() -> int:
    """The group slirp4netns runs with; ``SANDBOX_NET_GID`` overrides it. Nothing else on the
    host should use it: the rules refuse this group every connection to the host."""
    raw = os.environ.get("SANDBOX_NET_GID", "").strip()
    if not raw:
        return DEFAULT_NET_GID
    if not raw.isdigit() or int(raw) == 0:
        raise FenceError(f"SANDBOX_NET_GID must be a group number other than 0, got {raw!r}")
    return int(raw)


def slirp_rules(gid: int) -> list[list[str]]:
    """``OUTPUT`` rules for the bubblewrap backend's slirp4netns (in insertion order: each
    ``-I`` goes on top, so the DNS exception ends up first)."""
    owner = ["-m", "owner", "--gid-owner", str(gid)]
    rules = [
        ["OUTPUT", *owner, "-m", "addrtype", "--dst-type", "LOCAL", "-j", "REJECT"],
        ["OUTPUT", *owner, "-d", LINK_LOCAL, "-j", "REJECT"],
    ]
    for proto in ("udp", "tcp"):
        rules.append(
            ["OUTPUT", *owner, "-d", "127.0.0.0/8", "-p", proto, "--dport", "53", "-j", "ACCEPT"]
        )
    return rules


def docker_rules(bridge: str, *, forward_chain: str) -> list[list[str]]:
    """Rules for the Docker backend's sandbox network, whose Linux bridge is ``bridge``."""
    return [
        ["INPUT", "-i", bridge, "-j", "REJECT"],
        [forward_chain, "-i", bridge, "-d", LINK_LOCAL, "-j", "REJECT"],
    ]


def ensure(rules: list[list[str]]) -> None:
    """Insert every rule that is not there yet; raise FenceError naming the one that failed."""
    iptables = shutil.which("iptables")
    if iptables is None:
        raise FenceError(
            "iptables is not installed, so a networked command could reach the host "
            "(apt-get install iptables)"
        )
    with _lock:  # two threads of one worker must not insert the same rule twice
        for rule in rules:
            tagged = [*rule, "-m", "comment", "--comment", COMMENT]
            if _iptables(iptables, "-C", tagged).returncode == 0:
                continue
            done = _iptables(iptables, "-I", tagged)
            if done.returncode != 0:
                detail = (done.stderr.strip() or f"exit {done.returncode}").splitlines()[0]
                raise FenceError(
                    f"cannot fence the sandbox network off the host (iptables -I "
                    f"{' '.join(rule)}): {detail}; networked commands need root and iptables"
                )


def host_ipv4_addresses() -> list[str]:
    """Every IPv4 address of this host, loopback included (``ip -4 -o addr``): what a
    networked sandbox must not reach."""
    try:
        out = subprocess.run(
            ["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise FenceError(f"cannot list the host's addresses (ip -4 addr): {exc}") from exc
    return sorted({line.split()[3].split("/")[0] for line in out.splitlines()})


def has_chain(chain: str) -> bool:
    iptables = shutil.which("iptables")
    return iptables is not None and _iptables(iptables, "-S", [chain]).returncode == 0


def _iptables(binary: str, action: str, rule: list[str]) -> subprocess.CompletedProcess[str]:
    # -w: wait for the xtables lock instead of failing while Docker edits the rules.
    try:
        return subprocess.run(
            [binary, "-w", str(IPTABLES_TIMEOUT_SEC), action, *rule],
            capture_output=True,
            text=True,
            timeout=IPTABLES_TIMEOUT_SEC + 5,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise FenceError(f"cannot run iptables: {exc}") from exc
