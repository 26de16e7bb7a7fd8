"""Small network helpers shared by every test tier."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A TCP port free right now on 127.0.0.1 (for a process that must listen on a port chosen in advance)."""
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """``count`` different TCP ports free right now on 127.0.0.1: each probe holds its port until all are chosen
    (the kernel may give a port just released again: two ``free_port()`` in a row once gave a Spark master the same
    port for its RPC and its web UI)."""
    probes = [socket.socket() for _ in range(count)]
    try:
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [int(probe.getsockname()[1]) for probe in probes]
    finally:
        for probe in probes:
            probe.close()
