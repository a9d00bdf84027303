"""A stand-in for the internet: a server in a network namespace of its own, routed from the host
through a veth pair, so a networked sandbox has somewhere to go that is not the host.

    host  198.51.100.1 (ab-inet-h…)  <-veth->  198.51.100.2 (namespace ab-inet-…)

198.51.100.0/24 is TEST-NET-2 (documentation addresses, never routed on the real internet).
The server greets every connection with ``GREETING``. Needs root and ``ip`` (iproute2).

``Listener`` (fixture ``listener``) is the host side: a server on every address of the host
that counts whoever reaches it; ``host_address_for`` is where a networked sandbox of a backend
would find the host.
"""

from __future__ import annotations

import ipaddress
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import docker
import pytest

from sandbox import docker_network

SLIRP_HOST_ALIAS = "10.0.2.2"
HOST_SIDE = "198.51.100.1"
REMOTE_SIDE = "198.51.100.2"
PORT = 8080
GREETING = b"hello from the internet\n"

SERVER = f"""
import socket
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(({REMOTE_SIDE!r}, {PORT}))
srv.listen(16)
while True:
    conn, _ = srv.accept()
    with conn:
        conn.sendall({GREETING!r})
"""


@dataclass(frozen=True)
class FakeInternet:
    address: str
    port: int
    greeting: str


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


@pytest.fixture(scope="session")
def fake_internet() -> Iterator[FakeInternet]:
    tag = uuid.uuid4().hex[:6]
    netns, host_if, remote_if = f"ab-inet-{tag}", f"ab-inet-h{tag}", f"ab-inet-n{tag}"
    server = None
    try:
        _ip("netns", "add", netns)
        _ip("link", "add", host_if, "type", "veth", "peer", "name", remote_if)
        _ip("link", "set", remote_if, "netns", netns)
        _ip("addr", "add", f"{HOST_SIDE}/24", "dev", host_if)
        _ip("link", "set", host_if, "up")
        inside = ["netns", "exec", netns, "ip"]
        _ip(*inside, "addr", "add", f"{REMOTE_SIDE}/24", "dev", remote_if)
        _ip(*inside, "link", "set", remote_if, "up")
        _ip(*inside, "link", "set", "lo", "up")
        _ip(*inside, "route", "add", "default", "via", HOST_SIDE)
        server = subprocess.Popen(["ip", "netns", "exec", netns, sys.executable, "-c", SERVER])
        # A generous wait: in parallel workers on a loaded machine the server's interpreter
        # may take seconds to start; one that exited is said at once.
        _wait_for(REMOTE_SIDE, PORT, timeout=90.0, server=server)
        yield FakeInternet(REMOTE_SIDE, PORT, GREETING.decode())
    finally:
        if server is not None:
            server.kill()
            server.wait()
        subprocess.run(["ip", "netns", "del", netns], capture_output=True)
        subprocess.run(["ip", "link", "del", host_if], capture_output=True)


def _wait_for(
    host: str, port: int, timeout: float = 10.0, server: subprocess.Popen | None = None
) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=1) as conn:
                assert conn.recv(100) == GREETING
                return
        except OSError:
            if server is not None and server.poll() is not None:
                raise RuntimeError(
                    f"the fake internet's server exited ({server.returncode})"
                ) from None
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


class Listener:
    """A TCP server on the host (all interfaces) that greets whoever connects."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("0.0.0.0", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            with conn:
                conn.sendall(b"hello from the host\n")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = Listener()
    yield server
    server.close()


def host_address_for(backend: str) -> str:
    """Where the host listener is, seen from a networked sandbox of this backend."""
    if backend == "docker":
        client = docker.from_env()
        try:
            ipam = docker_network.ensure_network(client).attrs["IPAM"]["Config"][0]
            # Older engines omit the gateway: it is the subnet's first address (docker0).
            return ipam.get("Gateway") or str(next(ipaddress.ip_network(ipam["Subnet"]).hosts()))
        finally:
            client.close()
    return SLIRP_HOST_ALIAS  # slirp4netns's name for the host (disabled: see sandbox/slirp.py)
