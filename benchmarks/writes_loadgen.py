"""Load generator for benchmark 6, run as its own process: ``python -m benchmarks.writes_loadgen < SPEC_JSON``.

SPEC: {"url", "kind": "replace" | "commit", "group", "instances" (replace), "partitions" (commit),
"connections", "seconds"}. ``replace``: each connection restarts its own static member over and over (a join
with an empty member id: a static replacement, one group-record write each). ``commit``: each connection
commits ``partitions`` offsets per request to its own simple group. Prints one JSON line of counts.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from benchmarks.fastclient import Connection


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
    return {"done": done, "errors": errors, "per_s": done / elapsed}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(run(json.loads(sys.stdin.read())))), flush=True)
