"""Flood generator, run as its own process: ``python -m benchmarks.flood_gen KIND URL SECONDS``.

Kinds: ``anonymous_joins`` (KIP-394 joins with empty member ids, as fast as answers come), ``oversized``
(bodies over the size limit), ``deep_json`` (nested arrays), ``huge_lists`` (a leave naming 200,000 ids),
``slowloris`` (connections that send a request head one byte at a time and never finish), ``slowloris_at_cap``
(10,000 such connections from many client addresses, each reconnecting when it is closed, to hold the coordinator
at its connection limit). Prints a JSON line with what the coordinator answered.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections import Counter
from urllib.parse import urlsplit

CONNECTIONS = 32


async def hammer(url: str, seconds: float, request: bytes) -> Counter[str]:
    parts = urlsplit(url)
    answers: Counter[str] = Counter()
    deadline = time.monotonic() + seconds

    async def worker() -> None:
        while time.monotonic() < deadline:
            try:
                reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
                while time.monotonic() < deadline:
                    writer.write(request)
                    head = await reader.readuntil(b"\r\n\r\n")
                    length = next(
                        (int(line[15:]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")),
                        0,
                    )
                    await reader.readexactly(length)
                    answers[head[9:12].decode()] += 1
                    if b"connection: close" in head.lower():
                        break
                writer.close()
            except (OSError, asyncio.IncompleteReadError):
                answers["connection-error"] += 1
                await asyncio.sleep(0.01)

    await asyncio.gather(*(worker() for _ in range(CONNECTIONS)))
    return answers


def post(path: str, body: bytes) -> bytes:
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


async def slowloris(url: str, seconds: float, connections: int = 1000) -> Counter[str]:
    parts = urlsplit(url)
    answers: Counter[str] = Counter()
    deadline = time.monotonic() + seconds
    request = b"POST /v1/groups/g/heartbeat HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Slow: "

    async def drip() -> None:
        try:
            reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
        except OSError:
            answers["refused"] += 1
            return
        answers["opened"] += 1
        for byte in request:
            if time.monotonic() > deadline:
                break
            writer.write(bytes([byte]))
            try:
                await asyncio.wait_for(reader.read(1), 0.5)
                answers["answered-or-closed"] += 1
                break
            except TimeoutError:
                continue
        writer.close()

    await asyncio.gather(*(drip() for _ in range(connections)))
    return answers


async def slowloris_at_cap(url: str, seconds: float, connections: int, sources: int) -> Counter[str]:
    """``connections`` dripping clients spread over ``sources`` loopback addresses (127.0.1.1, ...: other hosts,
    as far as the per-client limit can tell), one header byte a second each; every one that is answered or closed
    reconnects at once, so the coordinator stays at its connection limit for the whole flood."""
    parts = urlsplit(url)
    answers: Counter[str] = Counter()
    deadline = time.monotonic() + seconds
    head = b"POST /v1/groups/g/heartbeat HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Slow: "

    async def drip(source: str) -> None:
        while time.monotonic() < deadline:
            try:
                reader, writer = await asyncio.open_connection(parts.hostname, parts.port, local_addr=(source, 0))
            except OSError:
                answers["connect-failed"] += 1
                await asyncio.sleep(1.0)
                continue
            answers["opened"] += 1
            sent = 0
            while time.monotonic() < deadline:
                writer.write(head[sent : sent + 1] if sent < len(head) else b"a")
                sent += 1
                try:
                    answer = await asyncio.wait_for(reader.read(64), 1.0)
                except TimeoutError:
                    continue
                except OSError:
                    answers["reset"] += 1
                    break
                answers[answer[9:12].decode() if answer else "closed"] += 1
                break
            writer.close()

    addresses = [f"127.0.1.{1 + i % sources}" for i in range(connections)]
    await asyncio.gather(*(drip(address) for address in addresses))
    return answers


async def main(kind: str, url: str, seconds: float, *extra: str) -> dict[str, object]:
    if kind == "anonymous_joins":
        body = json.dumps(
            {
                "member_id": "",
                "session_timeout_ms": 30_000,
                "protocol_type": "consumer",
                "protocols": [{"name": "r", "metadata": ""}],
            }
        ).encode()
        answers = await hammer(url, seconds, post("/v1/groups/flooded/join", body))
    elif kind == "oversized":
        answers = await hammer(url, seconds, post("/v1/groups/flooded/heartbeat", b'{"x":"' + b"a" * 2_000_000 + b'"}'))
    elif kind == "deep_json":
        answers = await hammer(url, seconds, post("/v1/groups/flooded/heartbeat", b"[" * 20_000 + b"]" * 20_000))
    elif kind == "huge_lists":
        ids = json.dumps({"members": [{"group_instance_id": f"i{i}"} for i in range(200_000)]}).encode()
        answers = await hammer(url, seconds, post("/v1/groups/flooded/leave", ids))
    elif kind == "slowloris":
        answers = await slowloris(url, seconds)
    elif kind == "slowloris_at_cap":
        connections, sources = (int(extra[0]), int(extra[1])) if extra else (10_000, 11)
        answers = await slowloris_at_cap(url, seconds, connections, sources)
    else:
        raise SystemExit(f"unknown flood {kind}")
    return {"kind": kind, "answers": dict(answers)}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2], float(sys.argv[3]), *sys.argv[4:]))), flush=True)
