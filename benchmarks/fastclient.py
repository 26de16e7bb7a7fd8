"""A lean HTTP/1.1 client for load generators: one persistent connection, pre-encoded requests.

aiohttp's client costs more CPU per request than the server we measure, which would make the benchmark
measure the client. This one writes a request in one call and reads the answer with two: simulated members
each get their own connection, as real member processes would.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import urlsplit


class Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str) -> None:
        self._reader = reader
        self._writer = writer
        self._host = host

    @classmethod
    async def open(cls, base_url: str) -> Connection:
        parts = urlsplit(base_url)
        assert parts.hostname is not None and parts.port is not None
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port, limit=2**24)
        return cls(reader, writer, f"{parts.hostname}:{parts.port}")

    def encode(self, method: str, path: str, body: bytes = b"") -> bytes:
        head = f"{method} {path} HTTP/1.1\r\nHost: {self._host}\r\n"
        if body:
            head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        return head.encode() + b"\r\n" + body

    async def send(self, request: bytes) -> tuple[int, bytes]:
        """Send a pre-encoded request; returns (status, body)."""
        self._writer.write(request)
        head = await self._reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        length = 0
        for line in head.split(b"\r\n"):
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
                break
        return status, await self._reader.readexactly(length)

    async def json(self, method: str, path: str, body: Any = None) -> Any:
        payload = b"" if body is None else json.dumps(body, separators=(",", ":")).encode()
        status, raw = await self.send(self.encode(method, path, payload))
        if status != 200:
            raise RuntimeError(f"{method} {path}: HTTP {status} {raw[:200]!r}")
        return json.loads(raw)

    async def close(self) -> None:
        self._writer.close()
        await self._writer.wait_closed()
