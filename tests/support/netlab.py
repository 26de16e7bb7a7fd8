"""A private network of hosts on this machine, for faults that need a real network: partitions, loss, rate limits.

``Lab.create()`` picks a /24 in 10.200.0.0-10.249.255.0 that no address or route of this machine touches and makes:

- a *switch*: a network namespace of its own holding one bridge (no iptables rules, nothing routed out);
- this machine as a host of the lab: a veth pair from the root namespace to the bridge, ``.254`` on this side, so
  the test process (and anything it starts without a namespace) reaches every host directly;
- ``lab.host(name)``: a network namespace with loopback and ``eth0`` on the bridge (``.1``, ``.2``, ...). Processes
  run in it with ``host.argv(*argv)`` (``nsenter --net``: the same mount namespace and files as the test).

Faults are made inside a host's namespace, so nothing of this machine's own network is touched:

- ``host.block(peer=None, port=None, inbound=True, outbound=True)``: iptables DROP (a blackhole, no reset: the
  peer's packets vanish, as in a real partition), to and from one address (or every address but loopback), or only
  a TCP port of this host;
- ``host.lose(probability, peer=None)``: random packet loss (``-m statistic --mode random``);
- ``host.limit(rate)``: a rate limit on the host's egress (``tc tbf``; ``netem`` is not in this kernel, so delays
  come from a userspace proxy instead);
- ``host.heal()``: every rule and qdisc removed.

Every namespace's name carries the pid of the run that made it (``berth-lab-<pid>-<lab>-<host>``): :func:`reap_stale`
ends the processes of and removes every lab whose run is no longer alive (a run killed with ``kill -9``); a live
run's lab is never touched. ``Lab.delete()`` ends the processes still inside its hosts and removes everything.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import random
import re
import secrets
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

NETNS_DIR = Path("/var/run/netns")
_NAME = re.compile(r"^berth-lab-(\d+)-([0-9a-f]{4})-([a-z0-9-]+)$")
#: The addresses a lab may take: 10.200.0.0/24 to 10.249.255.0/24.
_SECOND_OCTETS = range(200, 250)


def run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(list(argv), capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {result.returncode}: {result.stderr.strip()}")
    return result


def missing_tools() -> list[str]:
    """What the lab needs and this machine lacks (root, ip, iptables, tc, nsenter)."""
    missing = [] if os.geteuid() == 0 else ["root"]
    for tool in ("ip", "iptables", "tc", "nsenter"):
        if run("sh", "-c", f"command -v {tool}", check=False).returncode != 0:
            missing.append(tool)
    return missing


def _used_networks() -> list[ipaddress.IPv4Network]:
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


def _choose_prefix() -> str:
    used = _used_networks()
    rng = random.SystemRandom()
    for _ in range(200):
        prefix = f"10.{rng.choice(_SECOND_OCTETS)}.{rng.randrange(0, 256)}"
        if not any(ipaddress.ip_network(f"{prefix}.0/24").overlaps(n) for n in used):
            return prefix
    raise RuntimeError("no free /24 in 10.200.0.0-10.249.255.0 for a test network")


@dataclass
class Host:
    """One network namespace on the lab's bridge."""

    lab: Lab
    name: str
    index: int
    faults: list[str] = field(default_factory=list)  # what is in force, for logs

    @property
    def netns(self) -> str:
        return f"{self.lab.stem}-{self.name}"

    @property
    def ip(self) -> str:
        return f"{self.lab.prefix}.{self.index}"

    def argv(self, *argv: str) -> list[str]:
        """``argv`` run in this host's network namespace."""
        return ["nsenter", f"--net={NETNS_DIR / self.netns}", "--", *argv]

    def sh(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return run(*self.argv(*argv), check=check)

    # ------------------------------------------------------------------------------------------ faults

    def block(
        self, peer: str | None = None, *, port: int | None = None, inbound: bool = True, outbound: bool = True
    ) -> None:
        """Drop packets to and from ``peer`` (every address but loopback when None), or only those of TCP ``port``
        on this host (its listening port: the peer's connections to it, and its answers)."""
        match_in: list[str] = ["!", "-i", "lo"] if peer is None else ["-s", peer]
        match_out: list[str] = ["!", "-o", "lo"] if peer is None else ["-d", peer]
        if port is not None:
            match_in = [*match_in, "-p", "tcp", "--dport", str(port)]
            match_out = [*match_out, "-p", "tcp", "--sport", str(port)]
        if inbound:
            self.sh("iptables", "-I", "INPUT", *match_in, "-j", "DROP")
        if outbound:
            self.sh("iptables", "-I", "OUTPUT", *match_out, "-j", "DROP")
        self.faults.append(f"block {peer or 'all'}{f':{port}' if port else ''}")

    def lose(self, probability: float, peer: str | None = None) -> None:
        """Drop each packet to and from ``peer`` (or anyone) with ``probability``."""
        if not 0 < probability < 1:
            raise ValueError("probability: between 0 and 1")
        chance = ["-m", "statistic", "--mode", "random", "--probability", f"{probability:.3f}"]
        source = ["!", "-i", "lo"] if peer is None else ["-s", peer]
        destination = ["!", "-o", "lo"] if peer is None else ["-d", peer]
        self.sh("iptables", "-I", "INPUT", *source, *chance, "-j", "DROP")
        self.sh("iptables", "-I", "OUTPUT", *destination, *chance, "-j", "DROP")
        self.faults.append(f"lose {probability:.0%} {peer or 'all'}")

    def limit(self, rate: str, burst: str = "32kb", latency: str = "400ms") -> None:
        """Shape this host's egress to ``rate`` (``tc tbf``, e.g. ``"256kbit"``)."""
        shape = ("tbf", "rate", rate, "burst", burst, "latency", latency)
        self.sh("tc", "qdisc", "replace", "dev", "eth0", "root", *shape)
        self.faults.append(f"limit {rate}")

    def heal(self) -> None:
        self.sh("iptables", "-F", "INPUT", check=False)
        self.sh("iptables", "-F", "OUTPUT", check=False)
        self.sh("tc", "qdisc", "del", "dev", "eth0", "root", check=False)
        self.faults.clear()

    def pids(self) -> list[int]:
        return [int(p) for p in run("ip", "netns", "pids", self.netns, check=False).stdout.split()]


class Lab:
    """The switch, this machine's veth to it, and the hosts (see the module docstring)."""

    def __init__(self) -> None:
        self.id = secrets.token_hex(2)
        self.stem = f"berth-lab-{os.getpid()}-{self.id}"
        self.prefix = ""
        self.hosts: dict[str, Host] = {}
        self._next_index = 1

    @property
    def switch(self) -> str:
        return f"{self.stem}-switch"

    @property
    def bridge(self) -> str:
        return f"bl{self.id}br"

    @property
    def gateway(self) -> str:
        """This machine's address on the lab."""
        return f"{self.prefix}.254"

    def _veth(self, index: int) -> tuple[str, str]:
        return f"bl{self.id}{index}a", f"bl{self.id}{index}b"  # at most 15 characters

    def create(self) -> Lab:
        self.prefix = _choose_prefix()
        switch = self.switch
        run("ip", "netns", "add", switch)
        inside = ["nsenter", f"--net={NETNS_DIR / switch}", "--"]
        run(*inside, "ip", "link", "set", "lo", "up")
        run(*inside, "ip", "link", "add", self.bridge, "type", "bridge")
        run(*inside, "ip", "link", "set", self.bridge, "up")
        outer, port = self._veth(0)
        run("ip", "link", "add", outer, "type", "veth", "peer", "name", port, "netns", switch)
        run(*inside, "ip", "link", "set", port, "master", self.bridge, "up")
        run("ip", "addr", "add", f"{self.gateway}/24", "dev", outer)
        run("ip", "link", "set", outer, "up")
        return self

    def host(self, name: str) -> Host:
        """A new host on the lab (``name``: lowercase letters, digits and dashes)."""
        if not re.fullmatch(r"[a-z0-9-]{1,20}", name) or name in self.hosts or name == "switch":
            raise ValueError(f"host name {name!r}: lowercase letters, digits and dashes, unique in the lab")
        index = self._next_index
        self._next_index += 1
        host = Host(self, name, index)
        inner, port = self._veth(index)
        run("ip", "netns", "add", host.netns)
        run("ip", "link", "add", inner, "type", "veth", "peer", "name", port, "netns", self.switch)
        run("ip", "link", "set", inner, "netns", host.netns)
        run("nsenter", f"--net={NETNS_DIR / self.switch}", "--", "ip", "link", "set", port, "master", self.bridge, "up")
        host.sh("ip", "link", "set", "lo", "up")
        host.sh("ip", "link", "set", inner, "name", "eth0")
        host.sh("ip", "addr", "add", f"{host.ip}/24", "dev", "eth0")
        host.sh("ip", "link", "set", "eth0", "up")
        self.hosts[name] = host
        return host

    def heal(self) -> None:
        for host in self.hosts.values():
            host.heal()

    def delete(self) -> None:
        for host in self.hosts.values():
            _remove_namespace(host.netns)
        _remove_namespace(self.switch)
        run("ip", "link", "delete", self._veth(0)[0], check=False)
        self.hosts.clear()


def _remove_namespace(netns: str) -> None:
    for pid in run("ip", "netns", "pids", netns, check=False).stdout.split():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)
    run("ip", "netns", "delete", netns, check=False)


def reap_stale() -> list[str]:
    """Remove every lab namespace whose run is gone (and the processes in it); the names removed."""
    removed = []
    if not NETNS_DIR.is_dir():
        return removed
    for entry in sorted(NETNS_DIR.iterdir()):
        match = _NAME.match(entry.name)
        if match is None or _alive(int(match.group(1))):
            continue
        _remove_namespace(entry.name)
        removed.append(entry.name)
    for line in run("ip", "-o", "link", "show").stdout.splitlines():  # a root-side veth whose switch is gone
        found = re.search(r"\d+: (bl[0-9a-f]{4}0a)@", line)
        if found and not any(e.name.endswith(f"-{found.group(1)[2:6]}-switch") for e in NETNS_DIR.iterdir()):
            run("ip", "link", "delete", found.group(1), check=False)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
