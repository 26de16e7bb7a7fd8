"""``support.net``: the ports a test picks in advance for the processes it starts."""

from __future__ import annotations

import socket

from support.net import free_ports


def test_ports_picked_together_differ_and_each_can_be_listened_on() -> None:
    """Regression: two ``free_port()`` in a row once gave a standalone Spark master the same port for its RPC and its
    web UI; ports picked together by ``free_ports`` are held until all are chosen, so they differ."""
    for _ in range(20):
        ports = free_ports(8)
        assert len(set(ports)) == len(ports), ports
        listeners = [socket.create_server(("127.0.0.1", port)) for port in ports]
        for listener in listeners:
            listener.close()
