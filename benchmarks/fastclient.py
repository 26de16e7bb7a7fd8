"""A lean HTTP/1.1 client for load generators: one persistent connection, pre-encoded requests.

aiohttp's client costs more CPU per request than the server we measure, which would make the benchmark
measure the client. This one is an ``asyncio.Protocol``: a request is one ``write``, and its answer is cut out
of the received bytes (status line, ``Content-Length``, body) and handed to a future, with no stream reader in
between. Simulated members each get their own connection, as real member processes would.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, cast
from urllib.parse import urlsplit


class _Answers(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = b""
        self.waiting: asyncio.Future[tuple[int, bytes]] | None = None
        self.lost: BaseException | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        head_end = self.buffer.find(b"\r\n\r\n")
        if head_end < 0 or self.waiting is None:
            return
        length = 0
        for line in self.buffer[:head_end].split(b"\r\n"):
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
                break
        end = head_end + 4 + length
        if len(self.buffer) < end:
            return
        status = int(self.buffer[9:12])
        body, self.buffer = self.buffer[head_end + 4 : end], self.buffer[end:]
        waiting, self.waiting = self.waiting, None
        if not waiting.done():
            waiting.set_result((status, body))

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = exc or ConnectionError("the server closed the connection")
        if self.waiting is not None and not self.waiting.done():
            self.waiting.set_exception(self.lost)


class Connection:
    def __init__(self, answers: _Answers, host: str, token: str | None = None) -> None:
        self._answers = answers
        self._host = host
        self._auth = f"Authorization: Bearer {token}\r\n" if token else ""

    @classmethod
    async def open(cls, base_url: str, token: str | None = None) -> Connection:
        """A connection to ``base_url``; with ``token``, every request carries it as a bearer token."""
        parts = urlsplit(base_url)
        assert parts.hostname is not None and parts.port is not None
        _, answers = await asyncio.get_running_loop().create_connection(_Answers, parts.hostname, parts.port)
        return cls(answers, f"{parts.hostname}:{parts.port}", token)

    def encode(self, method: str, path: str, body: bytes = b"") -> bytes:
        head = f"{method} {path} HTTP/1.1\r\nHost: {self._host}\r\n{self._auth}"
        if body:
            head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        return head.encode() + b"\r\n" + body

    def send(self, request: bytes) -> asyncio.Future[tuple[int, bytes]]:
        """Send a pre-encoded request; the future gives (status, body). One request at a time per connection."""
        answers = self._answers
        assert answers.transport is not None and answers.waiting is None, "one request at a time"
        if answers.lost is not None:
            raise ConnectionError("the connection is closed") from answers.lost
        answers.waiting = asyncio.get_running_loop().create_future()
        answers.transport.write(request)
        return answers.waiting

    async def json(self, method: str, path: str, body: Any = None) -> Any:
        payload = b"" if body is None else json.dumps(body, separators=(",", ":")).encode()
        status, raw = await self.send(self.encode(method, path, payload))
        if status != 200:
            raise RuntimeError(f"{method} {path}: HTTP {status} {raw[:200]!r}")
        return json.loads(raw)

    async def close(self) -> None:
        if self._answers.transport is not None:
            self._answers.transport.close()
