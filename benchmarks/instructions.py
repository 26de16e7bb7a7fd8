"""CPU instructions per heartbeat under callgrind: the noise-free second figure of benchmark 1.

Requests per second move with whatever else the machine runs; instructions executed do not. Each server runs
under ``valgrind --tool=callgrind`` (hash seed fixed) and is sent heartbeats one after another on one keep-alive
connection; the server is run twice, with ``FEW`` and with ``MANY`` heartbeats, and the difference of the two
totals divided by ``MANY - FEW`` is the cost of one heartbeat, start-up and shut-down cancelled out.

Servers: aiohttp's ``web.Application`` with a bare handler (row 1's 100 %), the same handler on aiohttp's
low-level ``web.Server``, and Berth (one static member, formed with pre-registration, heartbeating).
``python -m benchmarks.instructions [--few N] [--many N] [SERVER ...]`` prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

FEW = 300
MANY = 2_300
READY = re.compile(r"listening on http://([\d.]+):(\d+)")
SERVERS = ("bare_application", "bare_low_level", "berth")


def server_command(kind: str, data_dir: Path) -> list[str]:
    if kind == "bare_application":
        return [sys.executable, "-m", "benchmarks.bare_server"]
    if kind == "bare_low_level":
        return [sys.executable, "-m", "benchmarks.bare_server", "--low-level"]
    return [
        *(sys.executable, "-m", "berth.coordinator.command.main", "--data-dir", str(data_dir)),
        *("--port", "0", "--log-level", "warning", "--group-initial-rebalance-delay-ms", "0"),
    ]


class Client:
    """Blocking HTTP/1.1 on one keep-alive connection: the least work on the client side."""

    def __init__(self, host: str, port: int) -> None:
        self.sock = socket.create_connection((host, port))
        self.host = f"{host}:{port}"
        self.buffer = b""

    def encode(self, method: str, path: str, body: Any = None) -> bytes:
        payload = b"" if body is None else json.dumps(body, separators=(",", ":")).encode()
        head = f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\n"
        if payload:
            head += f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n"
        return head.encode() + b"\r\n" + payload

    def send(self, request: bytes) -> tuple[int, bytes]:
        self.sock.sendall(request)
        while b"\r\n\r\n" not in self.buffer:
            self.buffer += self._recv()
        head, _, rest = self.buffer.partition(b"\r\n\r\n")
        length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))  # type: ignore[union-attr]
        while len(rest) < length:
            rest += self._recv()
        self.buffer = rest[length:]
        return int(head[9:12]), rest[:length]

    def json(self, method: str, path: str, body: Any = None) -> Any:
        status, raw = self.send(self.encode(method, path, body))
        if status != 200:
            raise RuntimeError(f"{method} {path}: HTTP {status} {raw[:200]!r}")
        return json.loads(raw)

    def _recv(self) -> bytes:
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("server closed the connection")
        return data


def form_member(client: Client) -> dict[str, Any]:
    """One static member in group ``ins``: the heartbeat body it sends."""
    client.json("PUT", "/v1/groups/ins/expected-members", {"group_instance_ids": ["ins-0"]})
    join = client.json(
        "POST",
        "/v1/groups/ins/join",
        {
            "member_id": "",
            "group_instance_id": "ins-0",
            "session_timeout_ms": 1_800_000,
            "rebalance_timeout_ms": 60_000,
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": ""}],
        },
    )
    identity = {"member_id": join["member_id"], "generation_id": join["generation_id"], "group_instance_id": "ins-0"}
    sync = client.json(
        "POST",
        "/v1/groups/ins/sync",
        {
            **identity,
            "protocol_type": "consumer",
            "protocol_name": join["protocol_name"],
            "assignments": [{"member_id": join["member_id"], "assignment": ""}],
        },
    )
    assert sync["error_code"] == 0, sync
    return identity


@contextmanager
def under_callgrind(kind: str, out: Path, data_dir: Path) -> Iterator[tuple[str, int]]:
    command = [
        "valgrind",
        "--tool=callgrind",
        f"--callgrind-out-file={out}",
        *server_command(kind, data_dir),
    ]
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    assert proc.stdout is not None
    try:
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError(f"{kind} exited before it was ready")
            match = READY.search(line)
            if match:
                break
        else:
            raise RuntimeError(f"{kind} was not ready in time")
        yield match.group(1), int(match.group(2))
        proc.send_signal(signal.SIGTERM)
        proc.wait(900)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()


def total_instructions(kind: str, heartbeats: int) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        with under_callgrind(kind, out, Path(tmp) / "data") as (host, port):
            client = Client(host, port)
            body = form_member(client) if kind == "berth" else {"member_id": "m", "generation_id": 1}
            request = client.encode("POST", "/v1/groups/ins/heartbeat", body)
            for _ in range(heartbeats):
                status, answer = client.send(request)
                assert status == 200 and b'"error_code":0' in answer.replace(b" ", b""), answer
            client.sock.close()
        text = out.read_text(errors="replace")
    match = re.search(r"^summary: (\d+)", text, re.MULTILINE) or re.search(r"^totals: (\d+)", text, re.MULTILINE)
    assert match, "no instruction total in the callgrind output"
    return int(match.group(1))


def per_request(kind: str, few: int = FEW, many: int = MANY) -> float:
    return (total_instructions(kind, many) - total_instructions(kind, few)) / (many - few)


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.instructions", description=__doc__)
    parser.add_argument("servers", nargs="*", choices=[*SERVERS, []])
    parser.add_argument("--few", type=int, default=FEW)
    parser.add_argument("--many", type=int, default=MANY)
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (Debian: apt-get install valgrind)")
    figures = {}
    for kind in args.servers or SERVERS:
        figures[kind] = per_request(kind, args.few, args.many)
        print(f"[bench] {kind}: {figures[kind]:,.0f} instructions per heartbeat", file=sys.stderr, flush=True)
    return figures


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
