"""The node tier's network: a fabric joining this machine and every node, and a namespace of its own per node.

**The fabric** (:class:`Fabric`): one layer-2 segment, a bridge inside a network namespace of its own
(``berth-node-<pid><hex>``), on a /24 in 10.100.0.0-10.199.255.0 that no address or route of this machine touches.
This machine joins it by a veth pair (host end ``.1/24``: the apiserver's address, which every kubelet and every pod
reaches); node ``i`` at ``.(10+i)``. Being one segment, no packet between two nodes, or between a node and this
machine, is routed by this machine (its ``ip_forward`` stays as it is: off here).

**A node** (:class:`NodeNetwork`): a namespace of its own (``berth-node-<pid><hex>``), joined to the fabric by a
veth pair (its end ``node_ip``, the node's InternalIP; the other end a port of the fabric's bridge), and a /24 of its
own for pods: their bridge inside the namespace, gateway ``.1/25``, pods in ``.0/25``, the Service range routed onto
the bridge (kube-proxy's rules rewrite the ClusterIPs they know, the rest go unanswered). Routes: this machine reaches
each node's pods through that node's fabric address; every node reaches every other node's pods the same way
(:meth:`NodeNetwork.route_to`), so pods on different nodes talk to each other, as a cluster's pod network promises.

Nothing is routed out of the fabric: no namespace has a default route. :meth:`NodeNetwork.cut` takes a node off the
fabric (its port down: nothing in or out, as when its network is gone) and :meth:`NodeNetwork.mend` puts it back.
``delete()`` removes a namespace (and with it its veth pair, bridge and routes). ``inside(argv)`` runs a command in
the namespace with ``nsenter --net``, keeping this machine's mount namespace (the kubelet's volume mounts must be the
ones containerd sees; ``ip netns exec`` would give each process a mount namespace of its own).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import random
import secrets
import subprocess
from collections.abc import Iterable
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


def choose_prefix(taken: Iterable[str] = ()) -> str:
    """A free /24 ("10.A.B") in 10.100.0.0-10.199.255.0: no address or route of this machine in it, nor in ``taken``."""
    used = _used_networks() + [ipaddress.ip_network(f"{prefix}.0/24") for prefix in taken]
    rng = random.SystemRandom()
    for _ in range(200):
        prefix = f"10.{rng.randrange(100, 200)}.{rng.randrange(0, 256)}"
        candidate = ipaddress.ip_network(f"{prefix}.0/24")
        if not any(candidate.overlaps(n) for n in used):
            return prefix
    raise RuntimeError("no free /24 in 10.100.0.0-10.199.255.0 for the node tier's network")


def _suffix() -> str:
    """Names unique to this run: the pid (modulo 100,000, support.node_reap reads it back) and four hex digits."""
    return f"{os.getpid() % 100000}{secrets.token_hex(2)}"


def _if(suffix: str, kind: str) -> str:  # at most 15 characters
    return f"bn{suffix[-9:]}{kind}"


@dataclass(frozen=True)
class Fabric:
    """The segment joining this machine and the nodes (see the module docstring)."""

    suffix: str
    prefix: str  # "10.A.B"

    @classmethod
    def choose(cls) -> Fabric:
        return cls(_suffix(), choose_prefix())

    @property
    def netns(self) -> str:
        return f"berth-node-{self.suffix}"

    @property
    def host_if(self) -> str:
        return _if(self.suffix, "h")

    @property
    def bridge(self) -> str:
        return _if(self.suffix, "b")

    @property
    def host_ip(self) -> str:
        return f"{self.prefix}.1"

    def address(self, index: int) -> str:
        """Node ``index``'s address on the fabric (1 <= index <= 200)."""
        if not 1 <= index <= 200:
            raise ValueError(f"node index {index} outside 1..200")
        return f"{self.prefix}.{10 + index}"

    def create(self) -> None:
        ns = self.netns
        run("ip", "netns", "add", ns)
        run("ip", "-n", ns, "link", "set", "lo", "up")
        run("ip", "-n", ns, "link", "add", self.bridge, "type", "bridge")
        run("ip", "-n", ns, "link", "set", self.bridge, "up")
        port = _if(self.suffix, "f")
        run("ip", "link", "add", self.host_if, "type", "veth", "peer", "name", port, "netns", ns)
        run("ip", "-n", ns, "link", "set", port, "master", self.bridge)
        run("ip", "-n", ns, "link", "set", port, "up")
        run("ip", "addr", "add", f"{self.host_ip}/24", "dev", self.host_if)
        run("ip", "link", "set", self.host_if, "up")

    def delete(self) -> None:
        run("ip", "netns", "delete", self.netns, check=False)
        run("ip", "link", "delete", self.host_if, check=False)


@dataclass(frozen=True)
class NodeNetwork:
    """Names and addresses of one node's network (see the module docstring)."""

    suffix: str
    prefix: str  # "10.A.B": the node's pods
    fabric: Fabric
    index: int

    @classmethod
    def choose(cls, fabric: Fabric, index: int, taken: Iterable[str] = ()) -> NodeNetwork:
        return cls(_suffix(), choose_prefix([fabric.prefix, *taken]), fabric, index)

    @property
    def netns(self) -> str:
        return f"berth-node-{self.suffix}"

    @property
    def node_if(self) -> str:
        return _if(self.suffix, "n")

    @property
    def port(self) -> str:
        """The other end of the node's link: a port of the fabric's bridge, in the fabric's namespace."""
        return _if(self.suffix, "p")

    @property
    def bridge(self) -> str:
        return _if(self.suffix, "b")

    @property
    def host_ip(self) -> str:
        """This machine's address as the node sees it (the apiserver's)."""
        return self.fabric.host_ip

    @property
    def node_ip(self) -> str:
        return self.fabric.address(self.index)

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
        ns, fabric = self.netns, self.fabric.netns
        run("ip", "netns", "add", ns)
        run("ip", "-n", fabric, "link", "add", self.port, "type", "veth", "peer", "name", self.node_if, "netns", ns)
        run("ip", "-n", fabric, "link", "set", self.port, "master", self.fabric.bridge)
        run("ip", "-n", fabric, "link", "set", self.port, "up")
        for argv in (
            ("ip", "link", "set", "lo", "up"),
            ("ip", "addr", "add", f"{self.node_ip}/24", "dev", self.node_if),
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
        # This machine reaches the pods (tests, the apiserver's logs and exec, kubectl port-forward's peer).
        run("ip", "route", "replace", self.pod_cidr, "via", self.node_ip, "src", self.host_ip)

    def route_to(self, other: NodeNetwork) -> None:
        """This node's namespace reaches ``other``'s pods (through ``other``'s fabric address)."""
        run("ip", "-n", self.netns, "route", "replace", other.pod_cidr, "via", other.node_ip)

    def cut(self) -> None:
        """Off the fabric: nothing in or out, as when the node's network is gone."""
        run("ip", "-n", self.fabric.netns, "link", "set", self.port, "down")

    def mend(self) -> None:
        run("ip", "-n", self.fabric.netns, "link", "set", self.port, "up")

    def delete(self) -> None:
        run("ip", "route", "delete", self.pod_cidr, check=False)
        run("ip", "netns", "delete", self.netns, check=False)  # takes the veth pair, the bridge and the routes along
