"""Heartbeat load generator, run as its own process: ``python -m benchmarks.loadgen < SPEC_JSON``.

SPEC: {"url", "members": [[group, member_id, generation, instance_id], ...], "connections", "seconds",
"rate" (null = closed loop, as fast as answers come back)}. Prints one JSON line: requests, errors,
requests_per_s and latency percentiles in ms. It stops by itself after ``seconds``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from benchmarks.fastclient import Connection


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


async def run(spec: dict[str, Any]) -> dict[str, Any]:
    members = spec["members"]
    connections = [await Connection.open(spec["url"]) for _ in range(spec["connections"])]
    requests = [
        connections[i % len(connections)].encode(
            "POST",
            f"/v1/groups/{group}/heartbeat",
            json.dumps(
                {"member_id": member_id, "generation_id": generation, "group_instance_id": instance},
                separators=(",", ":"),
            ).encode(),
        )
        for i, (group, member_id, generation, instance) in enumerate(members)
    ]
    latencies: list[float] = []
    errors = 0
    deadline = time.perf_counter() + spec["seconds"]
    rate = spec.get("rate")
    interval = None if not rate else len(connections) / rate  # each connection's share of the rate

    async def worker(index: int) -> None:
        nonlocal errors
        conn = connections[index]
        mine = requests[index :: len(connections)] or requests
        i = 0
        next_at = time.perf_counter() + (interval or 0) * index / len(connections)
        while (now := time.perf_counter()) < deadline:
            if interval is not None:
                if now < next_at:
                    await asyncio.sleep(next_at - now)
                start = next_at  # open loop: latency counts from when the request was due
                next_at += interval
            else:
                start = now
            status, body = await conn.send(mine[i % len(mine)])
            latencies.append(time.perf_counter() - start)
            if status != 200 or b'"error_code":0' not in body:
                errors += 1
            i += 1

    started = time.perf_counter()
    await asyncio.gather(*(worker(i) for i in range(len(connections))))
    elapsed = time.perf_counter() - started
    for conn in connections:
        await conn.close()
    latencies.sort()
    return {
        "requests": len(latencies),
        "errors": errors,
        "requests_per_s": len(latencies) / elapsed,
        "p50_ms": percentile(latencies, 0.50) * 1000,
        "p99_ms": percentile(latencies, 0.99) * 1000,
        "max_ms": (latencies[-1] if latencies else float("nan")) * 1000,
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(run(json.loads(sys.stdin.read())))), flush=True)
