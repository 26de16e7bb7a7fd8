"""Coordinator replicas on this machine: ``Replicas`` (N ``berth-coordinator`` processes on one etcd prefix) and
``ServiceProxy``, which stands in for their Kubernetes Service.

``ServiceProxy`` does what a Service with readiness does for the replicated coordinator: it probes every replica's
``/readyz`` every ``period_s`` (the chart's readiness probe: period 1 s, one failure marks a pod unready) and sends
each new connection to a replica that answered 200 at the last probe; with none ready, a new connection is closed at
once (kube-proxy rejects it). Established connections stay where they are, as they do behind kube-proxy: a replica
that stops leading closes them itself. It runs its own event loop in a thread, so synchronous benchmarks and
asynchronous tests use it alike.

These are the process-level stand-ins for pods; a pod-level variant (the node tier) replaces ``Replicas`` and keeps
the tests: ``kill``, ``freeze``/``thaw``, ``active()`` and ``url`` are what they use.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from berth.operator.local.coordinator_process import CoordinatorProcess, EtcdTarget

PROBE_PERIOD_S = 1.0
PROBE_TIMEOUT_S = 1.0


class Replicas:
    """``count`` coordinator replicas on one etcd prefix, each with its probe port."""

    def __init__(
        self,
        workdir: Path,
        endpoints: str,
        prefix: str,
        count: int = 2,
        *extra_args: str,
        lease_ttl_s: int = 5,
        manual_clock: bool = False,
    ) -> None:
        self.processes = [
            CoordinatorProcess(
                workdir / f"replica-{i}",
                "--probe-port",
                "0",
                *extra_args,
                manual_clock=manual_clock,
                etcd=EtcdTarget(endpoints, prefix, f"replica-{i}", lease_ttl_s),
            )
            for i in range(count)
        ]

    def start(self) -> Replicas:
        for process in self.processes:
            process.start()
        return self

    def ready(self, process: CoordinatorProcess) -> bool:
        """Whether ``/readyz`` answers 200 now (the probe port)."""
        return process.running and _ready(process.probe_url)

    def active(self, timeout_s: float = 30.0) -> CoordinatorProcess:
        """The replica that is ready (waits for one)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for process in self.processes:
                if self.ready(process):
                    return process
            time.sleep(0.05)
        raise RuntimeError(f"no replica became ready within {timeout_s} s")

    def standbys(self, active: CoordinatorProcess) -> list[CoordinatorProcess]:
        return [p for p in self.processes if p is not active]

    def stderr(self) -> str:
        return "\n".join(f"--- {p.data_dir.name}\n{p.stderr()}" for p in self.processes)

    def stop(self) -> None:
        for process in self.processes:
            if process.proc is not None:
                with contextlib.suppress(ProcessLookupError):
                    process.thaw()
                process.kill()

    def __enter__(self) -> Replicas:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _ready(probe_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{probe_url}/readyz", timeout=PROBE_TIMEOUT_S) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


class ServiceProxy:
    """A TCP front for the replicas that routes new connections to a ready one (see the module docstring)."""

    def __init__(self, backends: Callable[[], list[CoordinatorProcess]], *, period_s: float = PROBE_PERIOD_S) -> None:
        self._backends = backends
        self.period_s = period_s
        self._ready: list[tuple[str, int]] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="service-proxy", daemon=True)
        self._server: asyncio.Server | None = None
        self._prober: asyncio.Task[None] | None = None
        self._pumps: set[asyncio.Task[None]] = set()
        self.port = 0
        self.refused = 0  # connections closed because no replica was ready

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ServiceProxy:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        await self._probe_once()
        self._prober = asyncio.create_task(self._probe_forever())

    async def _probe_forever(self) -> None:
        while True:
            await asyncio.sleep(self.period_s)
            await self._probe_once()

    async def _probe_once(self) -> None:
        backends = [p for p in self._backends() if p.running and p.probe_url]
        answers = await asyncio.gather(*(asyncio.to_thread(_ready, p.probe_url) for p in backends))
        self._ready = [_address(p.url) for p, ok in zip(backends, answers, strict=True) if ok]

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self._ready:
            self.refused += 1
            _abort(writer)
            return
        host, port = self._ready[0]
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(host, port)
        except OSError:
            _abort(writer)
            return
        for source, sink in ((reader, upstream_writer), (upstream_reader, writer)):
            task = asyncio.create_task(_pump(source, sink))
            self._pumps.add(task)
            task.add_done_callback(self._pumps.discard)

    def stop(self) -> None:
        async def shutdown() -> None:
            if self._prober is not None:
                self._prober.cancel()
            if self._server is not None:
                self._server.close()
            for task in list(self._pumps):
                task.cancel()

        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    def __enter__(self) -> ServiceProxy:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _address(url: str) -> tuple[str, int]:
    host, port = url.rsplit("//", 1)[1].rsplit(":", 1)
    return host, int(port)


def _abort(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if isinstance(sock, socket.socket):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with a reset
    writer.close()


async def _pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    try:
        while data := await source.read(65536):
            sink.write(data)
            await sink.drain()
    except (OSError, asyncio.CancelledError):
        pass
    finally:
        sink.close()  # HTTP never half-closes: one side done, the connection is done
