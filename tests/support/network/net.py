"""Small network helpers shared by every test tier."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A TCP port free right now on 127.0.0.1 (for a process that must listen on a port chosen in advance)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
