"""The node tier's network: a namespace of the node's own, joined to this machine by a veth pair.

``NodeNetwork.choose()`` picks a /24 in 10.100.0.0-10.199.255.0 that no address or route of this machine touches, and
names (namespace ``berth-node-<pid><hex>``, interfaces ``bn<...>h|n|b``) unique to the run. ``create()`` makes:

- the veth pair: host end ``.249/30`` on this machine, node end ``.250/30`` in the namespace (the node's InternalIP);
- the pods' bridge inside the namespace with the gateway ``.1/25`` (the CNI bridge plugin takes it as it finds it),
  and the Service range routed onto it, so kube-proxy's rules rewrite ClusterIPs and the rest go unanswered;
- a route on this machine to the pods' /25 through the node end (tests and the apiserver reach pods and kubelet).

Nothing is routed out of the namespace: it has no default route. ``delete()`` removes the namespace (and with it the
veth pair, the bridge and the routes). ``inside(argv)`` runs a command in the namespace with ``nsenter --net``,
keeping this machine's mount namespace (the kubelet's volume mounts must be the ones containerd sees; ``ip netns
exec`` would give each process a mount namespace of its own).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import random
import secrets
import subprocess
from dataclasses import dataclass

SERVICE_RANGE = "10.0.0.0/24"


def run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(list(argv), capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {result.returncode}: {result.stderr.strip()}")
    return result


def _used_networks() -> list[ipaddress.IPv4Network]:
    """Every IPv4 network this machine already has an address or a route in (all tables)."""
    found = []
    for line in (
        run("ip", "-4", "-o", "addr").stdout.splitlines()
        + run("ip", "-4", "route", "show", "table", "all").stdout.splitlines()
    ):
        for word in line.split():
            with contextlib.suppress(ValueError):
                if "/" in word or word[:1].isdigit():
                    found.append(ipaddress.ip_network(word, strict=False))
    return [n for n in found if n.prefixlen > 0]


@dataclass(frozen=True)
class NodeNetwork:
    """Names and addresses of one node's network (see the module docstring)."""

    suffix: str
    prefix: str  # "10.A.B"

    @classmethod
    def choose(cls) -> NodeNetwork:
        used = _used_networks()
        rng = random.SystemRandom()
        for _ in range(200):
            prefix = f"10.{rng.randrange(100, 200)}.{rng.randrange(0, 256)}"
            candidate = ipaddress.ip_network(f"{prefix}.0/24")
            if not any(candidate.overlaps(n) for n in used):
                return cls(f"{os.getpid() % 100000}{secrets.token_hex(2)}", prefix)
        raise RuntimeError("no free /24 in 10.100.0.0-10.199.255.0 for the node's network")

    @property
    def netns(self) -> str:
        return f"berth-node-{self.suffix}"

    def _if(self, kind: str) -> str:  # at most 15 characters
        return f"bn{self.suffix[-9:]}{kind}"

    @property
    def host_if(self) -> str:
        return self._if("h")

    @property
    def node_if(self) -> str:
        return self._if("n")

    @property
    def bridge(self) -> str:
        return self._if("b")

    @property
    def host_ip(self) -> str:
        return f"{self.prefix}.249"

    @property
    def node_ip(self) -> str:
        return f"{self.prefix}.250"

    @property
    def pod_cidr(self) -> str:
        return f"{self.prefix}.0/25"

    @property
    def gateway(self) -> str:
        return f"{self.prefix}.1"

    def inside(self, *argv: str) -> list[str]:
        """``argv`` run in the node's network namespace (and this machine's mount namespace)."""
        return ["nsenter", f"--net=/var/run/netns/{self.netns}", "--", *argv]

    def create(self) -> None:
        ns = self.netns
        run("ip", "netns", "add", ns)
        run("ip", "link", "add", self.host_if, "type", "veth", "peer", "name", self.node_if, "netns", ns)
        run("ip", "addr", "add", f"{self.host_ip}/30", "dev", self.host_if)
        run("ip", "link", "set", self.host_if, "up")
        # This machine reaches the pods (tests, the apiserver's probes of nothing, kubectl port-forward's peer).
        run("ip", "route", "add", self.pod_cidr, "via", self.node_ip, "src", self.host_ip)
        for argv in (
            ("ip", "link", "set", "lo", "up"),
            ("ip", "addr", "add", f"{self.node_ip}/30", "dev", self.node_if),
            ("ip", "link", "set", self.node_if, "up"),
            # The pods' bridge, made here (the CNI plugin takes it as it finds it) so that ClusterIPs can be routed
            # to it: kube-proxy's rules rewrite the ones it knows, the rest go unanswered on the bridge.
            ("ip", "link", "add", self.bridge, "type", "bridge"),
            ("ip", "addr", "add", f"{self.gateway}/25", "dev", self.bridge),
            ("ip", "link", "set", self.bridge, "up"),
            ("ip", "route", "add", SERVICE_RANGE, "dev", self.bridge),
            ("sysctl", "-qw", "net.ipv4.ip_forward=1"),
        ):
            run(*self.inside(*argv))
        # Pod-to-Service-to-pod on one bridge: the replies must pass the namespace's iptables to be un-NATed.
        with contextlib.suppress(RuntimeError):
            run(*self.inside("sysctl", "-qw", "net.bridge.bridge-nf-call-iptables=1"))

    def delete(self) -> None:
        run("ip", "netns", "delete", self.netns, check=False)  # takes the veth pair, the bridge and the routes along
        run("ip", "link", "delete", self.host_if, check=False)
