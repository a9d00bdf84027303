"""The Docker network a sandbox joins for a networked command, and its fence.

Not Docker's default ``bridge``: a network of our own, so its Linux bridge has a name the host
firewall can match (``BRIDGE_IFACE``), and with inter-container traffic off (two attempts'
setups cannot talk to each other). A container is created on it and disconnected before its
first command; ``exec(network=True)`` connects it for that command only. The firewall rules
(sandbox/host_fence.py) refuse the bridge's traffic to the host and to link-local addresses.
"""

from __future__ import annotations

import docker
import docker.errors
from docker.models.networks import Network

from sandbox import host_fence

NETWORK = "agentbench-sandbox"
BRIDGE_IFACE = "ab-sandbox0"
MANAGED_LABEL = "agentbench.managed"
BRIDGE_NAME_OPTION = "com.docker.network.bridge.name"


def ensure_network(client: docker.DockerClient) -> Network:
    """The sandbox network, created on first use (two workers may race: both end with it)."""
    try:
        return client.networks.get(NETWORK)
    except docker.errors.NotFound:
        pass
    try:
        return client.networks.create(
            NETWORK,
            driver="bridge",
            options={
                BRIDGE_NAME_OPTION: BRIDGE_IFACE,
                "com.docker.network.bridge.enable_icc": "false",
            },
            labels={MANAGED_LABEL: "1"},
            check_duplicate=True,
        )
    except docker.errors.APIError:
        return client.networks.get(NETWORK)  # created meanwhile by another worker


def fence(client: docker.DockerClient, network: Network) -> None:
    """Put the host firewall rules for ``network``'s bridge in place (or raise FenceError).
    The rules are this host's: an engine elsewhere (DOCKER_HOST over TCP or SSH) has its own
    firewall, which this process cannot see, so networked commands are refused there."""
    if not client.api.base_url.startswith("http+docker://localhost"):
        raise host_fence.FenceError(
            f"networked commands need the Docker engine on this host (its firewall keeps "
            f"sandboxes off the host); DOCKER_HOST points at {client.api.base_url}"
        )
    iface = network.attrs.get("Options", {}).get(BRIDGE_NAME_OPTION) or f"br-{network.short_id}"
    chain = "DOCKER-USER" if host_fence.has_chain("DOCKER-USER") else "FORWARD"
    host_fence.ensure(host_fence.docker_rules(iface, forward_chain=chain))
