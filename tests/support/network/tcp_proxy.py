"""A TCP proxy on loopback that a test can cut: what a load balancer or a network partition does to long-lived
connections (a watch, a long-poll) between a client and a server.

``TcpProxy(target_port).start()`` listens on a free port and forwards every connection to ``127.0.0.1:target_port``
byte for byte (TLS passes through untouched, so a client verifies the server as if it were direct).
:meth:`cut` closes every open connection at once (both sides see a reset); with :meth:`refuse` new connections are
closed as soon as they are accepted, until :meth:`allow`; with ``delay_s`` set, every chunk waits that long before it
is passed on, in both directions (the delay a slow network adds: this kernel has no ``netem``). ``target_host``
forwards elsewhere than loopback (a host of a test's lab). Threads, not asyncio: the proxy must keep working while
the test's own event loop (if any) is blocked.

``listen=(ADDRESS, PORT)`` listens where it is told instead of on a free loopback port;
``python -m support.tcp_proxy LISTEN_HOST:PORT TARGET_HOST:PORT`` runs one until it is killed (the node tier relays
a broker that listens on one node's loopback to the loopback of every node: ``Cluster.loopback_everywhere``).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time

from support.net import free_port


class TcpProxy:
    def __init__(
        self, target_port: int, target_host: str = "127.0.0.1", *, listen: tuple[str, int] | None = None
    ) -> None:
        self.target_port = target_port
        self.target_host = target_host
        self.delay_s = 0.0
        self.host, self.port = listen if listen is not None else ("127.0.0.1", free_port())
        self._listener: socket.socket | None = None
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._refusing = False
        self._stopped = threading.Event()
        self.accepted = 0

    def start(self) -> TcpProxy:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.host, self.port))
        listener.listen(128)
        self._listener = listener
        threading.Thread(target=self._accept, name=f"proxy-{self.port}", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        if self._listener is not None:
            self._listener.close()
        self.cut()

    def cut(self) -> None:
        """Close every connection open now."""
        with self._lock:
            sockets, self._open = self._open, set()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def refuse(self) -> None:
        """Close new connections as soon as they arrive (and cut the open ones)."""
        self._refusing = True
        self.cut()

    def allow(self) -> None:
        self._refusing = False

    def _accept(self) -> None:
        assert self._listener is not None
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._refusing:
                client.close()
                continue
            try:
                upstream = socket.create_connection((self.target_host, self.target_port), timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._open |= {client, upstream}
                self.accepted += 1
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                if self.delay_s:
                    time.sleep(self.delay_s)
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            with self._lock:
                self._open -= {source, sink}


if __name__ == "__main__":
    import sys

    (listen_host, listen_port), (target_host, target_port) = (arg.rsplit(":", 1) for arg in sys.argv[1:3])
    proxy = TcpProxy(int(target_port), target_host=target_host, listen=(listen_host, int(listen_port))).start()
    print(f"relaying {listen_host}:{listen_port} to {target_host}:{target_port}", flush=True)
    threading.Event().wait()
