"""Load generator for benchmark 6, run as its own process: ``python -m benchmarks.writes_loadgen < SPEC_JSON``.

SPEC: {"url", "kind": "replace" | "commit", "group", "instances" (replace), "partitions" (commit),
"connections", "seconds"}. ``replace``: each connection restarts its own static member over and over (a join
with an empty member id: a static replacement, one group-record write each). ``commit``: each connection
commits ``partitions`` offsets per request to its own simple group. Prints one JSON line: the writes ``done``,
``errors`` by code, ``per_s`` and the window they were timed over (``elapsed_s``).

``load(spec, server_pid)`` runs it as a process pinned to core 1 and adds the server's CPU seconds meanwhile: how
``durable_writes``, ``failover`` and ``ha_writes`` load a coordinator (64 connections, 50 partitions per commit).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from typing import Any

from benchmarks.common import cpu_seconds, pinned
from benchmarks.fastclient import Connection

CLIENTS = 64
PARTITIONS_PER_COMMIT = 50


def load(spec: dict[str, Any], server_pid: int) -> dict[str, Any]:
    """Run the load generator with ``spec`` (pinned to core 1); its counts plus ``server_cpu_s``."""
    before = cpu_seconds(server_pid)
    out = subprocess.run(
        pinned([sys.executable, "-m", "benchmarks.writes_loadgen"], 1),
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        check=True,
        timeout=spec["seconds"] + 120,
    )
    result = dict(json.loads(out.stdout.strip().splitlines()[-1]))
    result["server_cpu_s"] = cpu_seconds(server_pid) - before
    return result


async def run(spec: dict[str, Any]) -> dict[str, Any]:
    connections = [await Connection.open(spec["url"]) for _ in range(spec["connections"])]
    deadline = time.perf_counter() + spec["seconds"]
    done = 0
    errors: dict[str, int] = {}

    async def worker(i: int) -> None:
        nonlocal done
        conn = connections[i]
        offset = 0
        while time.perf_counter() < deadline:
            if spec["kind"] == "replace":
                body = {
                    "member_id": "",
                    "group_instance_id": spec["instances"][i],
                    "session_timeout_ms": 60_000,
                    "rebalance_timeout_ms": 60_000,
                    "protocol_type": "consumer",
                    "protocols": [{"name": "range", "metadata": ""}],
                }
                path = f"/v1/groups/{spec['group']}/join"
            else:
                offset += 1
                partitions = [{"partition_index": p, "committed_offset": offset} for p in range(spec["partitions"])]
                body = {"topics": [{"name": "t", "partitions": partitions}]}
                path = f"/v1/groups/{spec['group']}-{i}/offsets"
            answer = await conn.json("POST", path, body)
            if answer["error"] == "NONE":
                done += 1
            else:
                errors[answer["error"]] = errors.get(answer["error"], 0) + 1

    started = time.perf_counter()
    await asyncio.gather(*(worker(i) for i in range(len(connections))))
    elapsed = time.perf_counter() - started
    for conn in connections:
        await conn.close()
    return {"done": done, "errors": errors, "per_s": done / elapsed, "elapsed_s": elapsed}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(run(json.loads(sys.stdin.read())))), flush=True)
