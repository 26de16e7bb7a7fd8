"""``support.net``: the ports a test picks in advance for the processes it starts."""

from __future__ import annotations

import socket
from types import SimpleNamespace

import pytest
from support import net
from support.net import free_ports


class _ReusingKernel:
    """A socket whose ``bind(("127.0.0.1", 0))`` takes the lowest port no open one of them holds: a kernel that
    gives a port just released again at once, as Linux once did to two ``free_port()`` in a row."""

    held: set[int] = set()

    def __init__(self) -> None:
        self.port = 0

    def bind(self, address: tuple[str, int]) -> None:
        self.port = min(set(range(40000, 40100)) - self.held)
        self.held.add(self.port)

    def getsockname(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    def close(self) -> None:
        self.held.discard(self.port)

    def __enter__(self) -> _ReusingKernel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def test_ports_picked_together_differ_even_when_the_kernel_gives_a_released_port_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Regression: two ``free_port()`` in a row gave a standalone Spark master the same port for its RPC and its web
    UI. ``free_ports`` holds each probe until all are chosen."""
    monkeypatch.setattr(_ReusingKernel, "held", set())
    monkeypatch.setattr(net, "socket", SimpleNamespace(socket=_ReusingKernel))
    ports = free_ports(3)
    assert len(set(ports)) == 3, ports
    assert not _ReusingKernel.held, "every probe is closed afterwards"


def test_ports_picked_together_can_each_be_listened_on() -> None:
    ports = free_ports(8)
    assert len(set(ports)) == 8, ports
    for listener in [socket.create_server(("127.0.0.1", port)) for port in ports]:
        listener.close()
