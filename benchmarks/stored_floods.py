"""Floods against what the coordinator keeps, and against its probes (issue 22, points 1, 2, 5, 7, 8), run by
``python -m benchmarks.floods`` through ``bounds_floods``. Every coordinator runs as the chart runs it (default
bounds, a tokens file, a probe port), on core 0; the load on core 1. After each flood that stores something: the
coordinator's RSS and its data dir's size, then a restart: seconds to ready, RSS once ready and the peak while it
loaded (VmHWM), against the chart's limits (512 MiB of memory, a 1 GiB volume).

- ``offsets_one_group``: the issue's flood with one group's token: 501 commits, a new topic each, of 250 partitions
  with 4,000 bytes of metadata; then one offset fetch of the group (its pages).
- ``offsets_glob_token``: the same commits with a glob token, each to a new group (the token's bounds).
- ``offsets_admin``: the same with the admin token (no tenant: the total bound) — what the coordinator holds at
  ``--max-stored-bytes``, and what it reloads.
- ``metadata_across_groups``: the issue's 80 groups, each of 40 static members with 200 KiB of metadata (under the
  8 MiB group bound), joined with the admin token.
- ``anonymous_joins``: 10,000 anonymous (KIP-394) joins asking for 30-minute sessions into a group with dynamic
  members, then a new dynamic member: how long until it is in a Stable generation.
- ``probe_flood``: 4 x 16 slow connections, reopened as soon as closed, at the probe port, while the kubelet probes.
- ``metric_slots``: a glob token's 205 commits to new groups, then a fleet's group: does the fleet have its series?
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from benchmarks.bounds_floods import CHART_MEMORY_MIB, MiB, at_rest
from benchmarks.common import Coordinator, progress
from benchmarks.fastclient import Connection
from benchmarks.floods import probe

ADMIN, TEAM, GLOB = "admin-token-0123456789", "team-token-0123456789", "glob-token-0123456789"
TOKENS = {
    "tokens": [
        {"name": "operator", "token": ADMIN, "admin": True},
        {"name": "team", "token": TEAM, "groups": ["team-*"]},
        {"name": "glob", "token": GLOB, "groups": ["*"]},
    ]
}
COMMITS, PARTITIONS, METADATA = 501, 250, "m" * 4_000
GROUPS, MEMBERS, MEMBER_METADATA = 80, 40, 200 * 1024
ANONYMOUS_JOINS = 10_000
PROBE_SECONDS = 20
SLOW_SOURCES, SLOW_PER_SOURCE = 4, 16


def chart_coordinator(tmp: Path, name: str, *extra: str) -> Coordinator:
    tokens = tmp / "tokens.yaml"
    tokens.write_text(json.dumps(TOKENS))
    return Coordinator(tmp / name, "--tokens-file", str(tokens), "--probe-port", "0", *extra, cpu=0)


def said(name: str, figures: dict[str, Any]) -> None:
    rest = figures["at_rest"]
    progress(
        f"{name}: {figures.get('answers')}; RSS {rest['rss_mib']:.0f} MiB, disk {rest['disk_mib']:.0f} MiB; reload"
        f" {rest['reload_s']:.1f} s to {rest['reload_rss_mib']:.0f} MiB (peak {rest['reload_peak_rss_mib']:.0f}) of"
        f" {CHART_MEMORY_MIB}"
    )


def count(answers: dict[str, int], key: str) -> None:
    answers[key] = answers.get(key, 0) + 1


# ------------------------------------------------------------------------------------------------------ offsets


def commit_body(topic: str) -> bytes:
    partitions = [
        {"partition_index": p, "committed_offset": 1, "committed_metadata": METADATA} for p in range(PARTITIONS)
    ]
    return json.dumps({"topics": [{"name": topic, "partitions": partitions}]}, separators=(",", ":")).encode()


async def offset_flood(url: str, token: str, group_of: Any) -> dict[str, Any]:
    """COMMITS commits, a new topic each, to ``group_of(n)``: answers by top-level error and partitions by error."""
    conn = await Connection.open(url, token)
    answers: dict[str, int] = {}
    partitions: dict[str, int] = {}
    started = time.perf_counter()
    for n in range(COMMITS):
        status, raw = await conn.send(
            conn.encode("POST", f"/v1/groups/{group_of(n)}/offsets", commit_body(f"t{n:04d}"))
        )
        answer = json.loads(raw)
        count(answers, answer.get("error", str(status)))
        for topic in answer.get("topics", ()):
            for partition in topic["partitions"]:
                count(partitions, partition["error"])
    await conn.close()
    return {"answers": answers, "partitions": partitions, "seconds": time.perf_counter() - started}


async def fetch_pages(url: str, group: str) -> dict[str, Any]:
    conn = await Connection.open(url, ADMIN)
    pages = offsets = largest = 0
    after: str | None = None
    started = time.perf_counter()
    while True:
        path = f"/v1/groups/{group}/offsets" + (f"?after={after}" if after else "")
        _, raw = await conn.send(conn.encode("GET", path))
        answer = json.loads(raw)
        pages += 1
        largest = max(largest, len(raw))
        offsets += sum(len(t["partitions"]) for t in answer["topics"])
        after = answer["next"]
        if after is None:
            break
    await conn.close()
    return {
        "pages": pages,
        "offsets": offsets,
        "largest_page_mib": largest / MiB,
        "seconds": time.perf_counter() - started,
    }


def offsets_flood(tmp: Path, name: str, token: str, group_of: Any) -> dict[str, Any]:
    coordinator = chart_coordinator(tmp, name)
    with coordinator:
        figures = asyncio.run(offset_flood(coordinator.url, token, group_of))
        if name == "offsets_one_group":
            figures["fetch"] = asyncio.run(fetch_pages(coordinator.url, group_of(0)))
            figures["fetch"]["rss_after_mib"] = coordinator.rss_bytes() / MiB
        figures["at_rest"] = at_rest(coordinator)
    said(name, figures)
    return figures


# ------------------------------------------------------------------------------------------ metadata, all groups


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


async def big_group(url: str, group: str, metadata: str) -> dict[str, int]:
    """MEMBERS static members with MEMBER_METADATA each join ``group`` (pre-registered: it forms when all are in),
    and the leader assigns a little to each."""
    admin = await Connection.open(url, ADMIN)
    instances = [f"{group}-{i}" for i in range(MEMBERS)]
    await admin.json("PUT", f"/v1/groups/{group}/expected-members", {"group_instance_ids": instances})
    conns = [await Connection.open(url, ADMIN) for _ in instances]

    def join(instance: str) -> bytes:
        body = {
            "member_id": "",
            "group_instance_id": instance,
            "session_timeout_ms": 1_800_000,
            "rebalance_timeout_ms": 60_000,
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": metadata}],
        }
        return json.dumps(body).encode()

    joins = await asyncio.gather(
        *(c.send(c.encode("POST", f"/v1/groups/{group}/join", join(i))) for c, i in zip(conns, instances, strict=True))
    )
    answers: dict[str, int] = {}
    decoded = [json.loads(raw) for _, raw in joins]
    for answer in decoded:
        count(answers, answer["error"])
    admitted = [(c, a, i) for c, a, i in zip(conns, decoded, instances, strict=True) if a["error"] == "NONE"]
    if admitted and not any(a["leader"] == a["member_id"] for _, a, _ in admitted):
        admitted = []  # the group never formed (its expected members are not all in): nothing to sync
    if admitted:
        plan = [{"member_id": a["member_id"], "assignment": b64(b"p" * 64)} for _, a, _ in admitted]

        def sync(answer: dict[str, Any], instance: str) -> bytes:
            body = {
                "member_id": answer["member_id"],
                "generation_id": answer["generation_id"],
                "group_instance_id": instance,
                "protocol_type": "consumer",
                "protocol_name": "range",
                "assignments": plan if answer["leader"] == answer["member_id"] else [],
            }
            return json.dumps(body).encode()

        synced = await asyncio.gather(
            *(c.send(c.encode("POST", f"/v1/groups/{group}/sync", sync(a, i))) for c, a, i in admitted)
        )
        for _, raw in synced:
            count(answers, "synced " + json.loads(raw)["error"])
    for c in [admin, *conns]:
        await c.close()
    return answers


def metadata_across_groups(tmp: Path) -> dict[str, Any]:
    metadata = b64(b"s" * MEMBER_METADATA)
    answers: dict[str, int] = {}
    started = time.perf_counter()
    coordinator = chart_coordinator(tmp, "metadata")
    with coordinator:
        for n in range(GROUPS):
            for key, value in asyncio.run(big_group(coordinator.url, f"big-{n:03d}", metadata)).items():
                answers[key] = answers.get(key, 0) + value
        figures: dict[str, Any] = {
            "groups": GROUPS,
            "members_each": MEMBERS,
            "metadata_bytes_each": MEMBER_METADATA,
            "answers": answers,
            "seconds": time.perf_counter() - started,
        }
        figures["at_rest"] = at_rest(coordinator)
    said("metadata_across_groups", figures)
    return figures


# ----------------------------------------------------------------------------------------------- anonymous joins


async def lockout(url: str) -> dict[str, Any]:
    """A group with a dynamic member; 10,000 anonymous joins asking for 30-minute sessions; then a newcomer."""
    conn = await Connection.open(url, GLOB)

    def join(member_id: str = "", session_ms: int = 30_000) -> bytes:
        body = {
            "member_id": member_id,
            "session_timeout_ms": session_ms,
            "rebalance_timeout_ms": 60_000,
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": ""}],
        }
        return json.dumps(body).encode()

    path = "/v1/groups/lockout/join"
    conns = [await Connection.open(url, GLOB) for _ in range(32)]
    answers: dict[str, int] = {}
    started = time.perf_counter()

    async def flood(c: Connection, index: int) -> None:
        for _ in range(index, ANONYMOUS_JOINS, len(conns)):
            _, raw = await c.send(c.encode("POST", path, join(session_ms=1_800_000)))
            count(answers, json.loads(raw)["error"])

    await asyncio.gather(*(flood(c, i) for i, c in enumerate(conns)))
    flood_s = time.perf_counter() - started
    arrived = time.perf_counter()
    first = json.loads((await conn.send(conn.encode("POST", path, join())))[1])
    joined = json.loads((await conn.send(conn.encode("POST", path, join(first["member_id"]))))[1])
    in_group_s = time.perf_counter() - arrived
    for c in [conn, *conns]:
        await c.close()
    return {
        "flood": {"joins": ANONYMOUS_JOINS, "answers": answers, "seconds": flood_s},
        "newcomer": {"first": first["error"], "join": joined["error"], "seconds_to_generation": in_group_s},
    }


def anonymous_joins(tmp: Path) -> dict[str, Any]:
    coordinator = chart_coordinator(tmp, "lockout")
    with coordinator:
        figures = asyncio.run(lockout(coordinator.url))
        figures["rss_mib"] = coordinator.rss_bytes() / MiB
    progress(
        f"anonymous_joins: {figures['flood']['answers']} in {figures['flood']['seconds']:.1f} s; a newcomer then"
        f" {figures['newcomer']['first']} -> {figures['newcomer']['join']} in"
        f" {figures['newcomer']['seconds_to_generation']:.1f} s"
    )
    return figures


# ----------------------------------------------------------------------------------------------------- probes


def slow_connections(url: str, source: str, until: float, counts: dict[str, int]) -> None:
    """SLOW_PER_SOURCE connections from ``source`` dripping a request head, each reopened as soon as it is closed."""
    parts = urlsplit(url)
    socks: list[socket.socket | None] = [None] * SLOW_PER_SOURCE
    while time.monotonic() < until:
        for i, sock in enumerate(socks):
            try:
                if sock is None:
                    sock = socks[i] = socket.create_connection((parts.hostname, parts.port), 5, (source, 0))
                    sock.sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
                    sock.setblocking(False)
                    counts["opened"] = counts.get("opened", 0) + 1
                sock.send(b"a")
                if sock.recv(4096) == b"":
                    raise ConnectionError
            except BlockingIOError:
                pass
            except OSError:
                if sock is not None:
                    sock.close()
                socks[i] = None
        time.sleep(0.05)
    for sock in socks:
        if sock is not None:
            sock.close()


def probe_flood(tmp: Path) -> dict[str, Any]:
    coordinator = chart_coordinator(tmp, "probes")
    with coordinator:
        until = time.monotonic() + PROBE_SECONDS + 2
        counts: dict[str, int] = {}
        flooders = [
            threading.Thread(target=slow_connections, args=(coordinator.probe_url, f"127.0.0.{20 + i}", until, counts))
            for i in range(SLOW_SOURCES)
        ]
        for thread in flooders:
            thread.start()
        time.sleep(1.0)  # every place is taken
        seen: dict[str, dict[str, Any]] = {
            path: {"statuses": {}, "latencies_ms": []} for path in ("/healthz", "/readyz")
        }
        probers = [
            threading.Thread(target=probe, args=(coordinator.probe_url, path, until - 1, seen[path])) for path in seen
        ]
        for thread in [*probers]:
            thread.start()
        for thread in [*probers, *flooders]:
            thread.join()
    figures = {
        "slow_connections": SLOW_SOURCES * SLOW_PER_SOURCE,
        "slow_connections_opened": counts.get("opened", 0),
        "probes": {
            path: {"ok": s["statuses"].get("200", 0), "statuses": s["statuses"], "max_ms": max(s["latencies_ms"])}
            for path, s in seen.items()
        },
        "seconds": PROBE_SECONDS,
    }
    answered = sum(p["ok"] for p in figures["probes"].values())
    total = sum(sum(p["statuses"].values()) for p in figures["probes"].values())
    progress(
        f"probe_flood: {answered} of {total} kubelet-style probes answered 200"
        f" ({counts.get('opened', 0)} slow connections opened)"
    )
    return figures


# ------------------------------------------------------------------------------------------------ metric slots


async def glob_commits(url: str) -> dict[str, int]:
    conn = await Connection.open(url, GLOB)
    answers: dict[str, int] = {}
    body = json.dumps({"topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1}]}]})
    for n in range(205):
        _, raw = await conn.send(conn.encode("POST", f"/v1/groups/glob-{n:03d}/offsets", body.encode()))
        count(answers, json.loads(raw)["error"])
    admin = await Connection.open(url, ADMIN)
    owner = {"namespace": "team-a", "name": "orders", "uid": "uid-1"}
    await admin.json("PUT", "/v1/groups/fleet-orders/owner", owner)
    await admin.json("PUT", "/v1/groups/fleet-orders/expected-members", {"group_instance_ids": ["orders-0"]})
    join = {
        "member_id": "",
        "group_instance_id": "orders-0",
        "session_timeout_ms": 30_000,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": ""}],
    }
    await admin.json("POST", "/v1/groups/fleet-orders/join", join)
    for c in (conn, admin):
        await c.close()
    return answers


def metric_slots(tmp: Path) -> dict[str, Any]:
    coordinator = chart_coordinator(tmp, "slots", "--group-initial-rebalance-delay-ms", "0")
    with coordinator:
        answers = asyncio.run(glob_commits(coordinator.url))
        text = urlopen_text(coordinator.probe_url + "/metrics")
    with_series = set(re.findall(r'^berth_group_members\{group="([^"]*)"\}', text, re.MULTILINE))
    figures = {
        "glob_commits": answers,
        "groups_with_series": len(with_series),
        "glob_groups_with_series": sum(g.startswith("glob-") for g in with_series),
        "fleet_group_has_series": "fleet-orders" in with_series,
    }
    progress(
        f"metric_slots: the glob token's groups hold {figures['glob_groups_with_series']} slots; the fleet's group"
        f" has its series: {figures['fleet_group_has_series']}"
    )
    return figures


def urlopen_text(url: str) -> str:
    import urllib.request

    with urllib.request.urlopen(url, timeout=30) as answer:
        return str(answer.read().decode())


# ---------------------------------------------------------------------------------------------------------- all

FLOODS: dict[str, Callable[[Path], dict[str, Any]]] = {
    "offsets_one_group": lambda tmp: offsets_flood(tmp, "offsets_one_group", TEAM, lambda _: "team-orders"),
    "offsets_glob_token": lambda tmp: offsets_flood(tmp, "offsets_glob_token", GLOB, lambda n: f"glob-{n:04d}"),
    "offsets_admin": lambda tmp: offsets_flood(tmp, "offsets_admin", ADMIN, lambda n: f"admin-{n:04d}"),
    "metadata_across_groups": metadata_across_groups,
    "anonymous_joins": anonymous_joins,
    "probe_flood": probe_flood,
    "metric_slots": metric_slots,
}


def run(tmp: Path, names: list[str] | None = None) -> dict[str, Any]:
    return {name: FLOODS[name](tmp) for name in names or FLOODS}


def met(figures: dict[str, Any]) -> bool:
    """The goals of these floods (RSS, reload and disk are checked with every flood's ``at_rest``)."""
    probes = figures["probe_flood"]["probes"].values()
    slots = figures["metric_slots"]
    return (
        all(p["ok"] == sum(p["statuses"].values()) for p in probes)
        and figures["anonymous_joins"]["newcomer"]["join"] == "NONE"
        and slots["fleet_group_has_series"]
        and figures["offsets_one_group"]["fetch"]["largest_page_mib"] <= 2
    )


if __name__ == "__main__":
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        print(json.dumps(run(Path(tmp), sys.argv[1:]), indent=2))
