"""Floods against the coordinator's bounds (issue #12, coordinator part A), run by ``python -m benchmarks.floods``.

- ``journal_bloat``: one group rebalances over and over, its leader assigning ~240 KiB a time (the member library's
  encoding, a third of it user data): the journal must stay within ``--journal-retention-bytes`` on disk, events
  within ``--journal-event-max-bytes`` (summarised), a ``GET /v1/journal?limit=10000`` within
  ``--journal-page-max-bytes``, and RSS flat. The issue's own flood (a 700 KiB assignment) is answered 400 now.
- ``many_groups``: simple commits to new group ids until ``--max-groups`` refuses them (COORDINATOR_NOT_AVAILABLE);
  RSS and disk at the cap, then the reload: time to ready and RSS after it.
- ``big_metadata``: a bystander group commits offsets at a steady rate while a group of members with 200 KiB of
  metadata each forms (``--group-metadata-max-bytes`` turns away those beyond 8 MiB) and rebalances again and again;
  the bystander's commit latency, against a baseline without the big group.
- ``integrity_check``: what ``PRAGMA quick_check`` and ``integrity_check`` cost on the bloated store, and the
  coordinator's start with and without it.
- The floods of issue 22 against what the coordinator keeps, and against its probes: ``stored_floods``.

After each flood, ``at_rest``: the coordinator's RSS and data dir, then a restart: seconds to ready and RSS, against
the chart's limits. Every coordinator runs with default flags (the chart's), on core 0; load generators on core 1.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import mmap
import os
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.common import Coordinator, Result, pinned, progress
from benchmarks.fastclient import Connection
from berth.coordinator.store.sqlite_store import check_journal_rows

MiB = 2**20
#: The chart's limits (charts/berth/values.yaml, coordinator.resources and persistence).
CHART_MEMORY_MIB = 512
CHART_VOLUME_MIB = 1024
BLOAT_CYCLES = 1_800
BLOAT_PARTITIONS = 25_000  # ~150 KB of partitions JSON
BLOAT_USER_DATA = 90_000
MANY_GROUPS = 52_000  # the default cap is 50,000
BIG_MEMBERS = 100
BIG_METADATA = 200 * 1024
BYSTANDER_RATE = 200
BYSTANDER_SECONDS = 12


def at_rest(coordinator: Coordinator) -> dict[str, Any]:
    """RSS and disk after a flood, then the reload: time to ready, RSS once ready, the peak while loading."""
    figures: dict[str, Any] = {
        "rss_mib": coordinator.rss_bytes() / MiB,
        "peak_rss_mib": coordinator.peak_rss_bytes() / MiB,
        "disk_mib": tree_bytes(coordinator.data_dir) / MiB,
    }
    coordinator.stop()
    started = time.perf_counter()
    coordinator.start(timeout=300)
    figures["reload_s"] = time.perf_counter() - started
    figures["reload_rss_mib"] = coordinator.rss_bytes() / MiB
    figures["reload_peak_rss_mib"] = coordinator.peak_rss_bytes() / MiB
    figures["limits"] = {"memory_mib": CHART_MEMORY_MIB, "volume_mib": CHART_VOLUME_MIB}
    return figures


def tree_bytes(path: Path) -> int:
    """Bytes the folder takes on disk (allocated blocks, as ``du`` counts them)."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(FileNotFoundError):  # retention may drop a segment meanwhile
                total += os.stat(os.path.join(root, name)).st_blocks * 512
    return total


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def join_body(instance: str, metadata: bytes, member_id: str = "") -> dict[str, Any]:
    return {
        "member_id": member_id,
        "group_instance_id": instance,
        "session_timeout_ms": 120_000,
        "rebalance_timeout_ms": 120_000,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b64(metadata)}],
    }


def sync_body(joined: dict[str, Any], instance: str, assignments: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "member_id": joined["member_id"],
        "generation_id": joined["generation_id"],
        "group_instance_id": instance,
        "protocol_type": "consumer",
        "protocol_name": "range",
        "assignments": assignments,
    }


# ------------------------------------------------------------------------------------------------ journal bloat


def library_assignment() -> bytes:
    document = {
        "partitions": {"orders": list(range(BLOAT_PARTITIONS))},
        "user_data": "x" * BLOAT_USER_DATA,
        "version": 1,
    }
    return json.dumps(document, separators=(",", ":"), sort_keys=True).encode()


async def bloat(url: str, data_dir: Path, rss: Any) -> dict[str, Any]:
    conn = await Connection.open(url)
    await conn.json("PUT", "/v1/groups/bloat/expected-members", {"group_instance_ids": ["bloat-0"]})
    assignment = b64(library_assignment())
    joined = await conn.json("POST", "/v1/groups/bloat/join", join_body("bloat-0", b"sub"))
    peak_disk = peak_rss = 0
    started = time.perf_counter()
    for cycle in range(BLOAT_CYCLES):
        plan = [{"member_id": joined["member_id"], "assignment": assignment}]
        synced = await conn.json("POST", "/v1/groups/bloat/sync", sync_body(joined, "bloat-0", plan))
        assert synced["error"] == "NONE", synced
        joined = await conn.json("POST", "/v1/groups/bloat/join", join_body("bloat-0", b"sub", joined["member_id"]))
        assert joined["error"] == "NONE", joined
        if cycle % 100 == 0:
            peak_disk = max(peak_disk, tree_bytes(data_dir))
            peak_rss = max(peak_rss, rss())
    seconds = time.perf_counter() - started
    peak_disk = max(peak_disk, tree_bytes(data_dir))
    journal = data_dir / "journal"
    page_started = time.perf_counter()
    status, page = await conn.send(conn.encode("GET", "/v1/journal?after=0&limit=10000"))
    page_ms = (time.perf_counter() - page_started) * 1000
    decoded = json.loads(page)
    # The flood: an assignment of 700 KiB.
    too_big = [{"member_id": joined["member_id"], "assignment": b64(b"x" * 700 * 1024)}]
    refused = await conn.send(
        conn.encode("POST", "/v1/groups/bloat/sync", json.dumps(sync_body(joined, "bloat-0", too_big)).encode())
    )
    await conn.close()
    stored = [e for e in decoded["events"] if e["type"] == "assignment_stored"]
    return {
        "cycles": BLOAT_CYCLES,
        "seconds": seconds,
        "assignment_bytes": len(library_assignment()),
        "events_written": decoded["last"],
        "first_retained": decoded["first"],
        "segments_mib": tree_bytes(journal) / MiB,
        "data_dir_peak_mib": peak_disk / MiB,
        "data_dir_final_mib": tree_bytes(data_dir) / MiB,
        "rss_peak_mib": max(peak_rss, rss()) / MiB,
        "page": {"status": status, "bytes": len(page), "events": len(decoded["events"]), "ms": page_ms},
        "largest_event_bytes": max((len(json.dumps(e, separators=(",", ":"))) for e in stored), default=0),
        "summarised": all(e.get("summarised") for e in stored),
        "issue_700_kib_assignment_status": refused[0],
    }


def journal_bloat(tmp: Path) -> dict[str, Any]:
    data_dir = tmp / "bloat"
    coordinator = Coordinator(data_dir, cpu=0)
    with coordinator:
        figures = asyncio.run(bloat(coordinator.url, data_dir, coordinator.rss_bytes))
        figures["rss_after_page_mib"] = coordinator.rss_bytes() / MiB
        figures["at_rest"] = at_rest(coordinator)
    progress(
        f"journal_bloat: {figures['cycles']} cycles in {figures['seconds']:.0f} s, data dir peak "
        f"{figures['data_dir_peak_mib']:.0f} MiB, RSS peak {figures['rss_peak_mib']:.0f} MiB, page "
        f"{figures['page']['bytes'] / MiB:.2f} MiB"
    )
    return figures


# ------------------------------------------------------------------------------------------------- many groups


COMMIT = json.dumps({"topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1}]}]})
# A KIP-394 join: the group is created with a pending member id, as a glob token's client would mint them.
ANONYMOUS_JOIN = json.dumps(
    {
        "member_id": "",
        "session_timeout_ms": 60_000,
        "protocol_type": "consumer",
        "protocols": [{"name": "r", "metadata": ""}],
    }
)


async def create_groups(url: str, count: int, how: str = "offsets", connections: int = 32) -> dict[str, int]:
    conns = [await Connection.open(url) for _ in range(connections)]
    answers: dict[str, int] = {}
    body = COMMIT if how == "offsets" else ANONYMOUS_JOIN

    async def worker(index: int) -> None:
        conn = conns[index]
        for n in range(index, count, connections):
            request = conn.encode("POST", f"/v1/groups/many-{n:06d}/{how}", body.encode())
            status, answer = await conn.send(request)
            name = json.loads(answer).get("error", str(status)) if status == 200 else str(status)
            answers[name] = answers.get(name, 0) + 1

    await asyncio.gather(*(worker(i) for i in range(connections)))
    for conn in conns:
        await conn.close()
    return answers


def many_groups(tmp: Path) -> dict[str, Any]:
    data_dir = tmp / "many"
    coordinator = Coordinator(data_dir, cpu=0)
    coordinator.start()
    try:
        baseline = coordinator.rss_bytes()
        started = time.perf_counter()
        answers = asyncio.run(create_groups(coordinator.url, MANY_GROUPS))
        seconds = time.perf_counter() - started
        at_cap = coordinator.rss_bytes()
        rest = at_rest(coordinator)
    finally:
        coordinator.stop()
    joined_dir = tmp / "many-joins"
    with Coordinator(joined_dir, cpu=0) as joined:
        by_joins = asyncio.run(create_groups(joined.url, MANY_GROUPS, "join"))
        joins_rss = joined.rss_bytes()
    figures = {
        "requests": MANY_GROUPS,
        "answers": answers,
        "by_joins": {"answers": by_joins, "rss_at_cap_mib": joins_rss / MiB},
        "seconds": seconds,
        "rss_empty_mib": baseline / MiB,
        "rss_at_cap_mib": at_cap / MiB,
        "data_dir_mib": rest["disk_mib"],
        "reload_s": rest["reload_s"],
        "rss_after_reload_mib": rest["reload_rss_mib"],
        "at_rest": rest,
    }
    progress(
        f"many_groups: {answers} in {seconds:.0f} s; RSS {figures['rss_at_cap_mib']:.0f} MiB at the cap, reload "
        f"{figures['reload_s']:.1f} s to {figures['rss_after_reload_mib']:.0f} MiB"
    )
    return figures


# ------------------------------------------------------------------------------------------------ big metadata


async def form(url: str, group: str, instances: list[str], metadata: bytes) -> list[dict[str, Any]]:
    """Join every instance at once (answers come after the initial delay); sync those let in; return their joins."""
    conns = [await Connection.open(url) for _ in instances]
    joins = await asyncio.gather(
        *(
            c.json("POST", f"/v1/groups/{group}/join", join_body(i, metadata))
            for c, i in zip(conns, instances, strict=True)
        )
    )
    members = [(c, j, i) for c, j, i in zip(conns, joins, instances, strict=True) if j["error"] == "NONE"]
    await sync_all(group, members)
    for c in conns:
        await c.close()
    return [dict(j, instance=i) for _, j, i in members] + [
        dict(j, instance=i) for j, i in zip(joins, instances, strict=True) if j["error"] != "NONE"
    ]


async def sync_all(group: str, members: list[tuple[Connection, dict[str, Any], str]]) -> None:
    plan = [{"member_id": j["member_id"], "assignment": b64(b"p" * 1024)} for _, j, _ in members]
    leader = next(j for _, j, _ in members if j["leader"] == j["member_id"])
    synced = await asyncio.gather(
        *(
            c.json("POST", f"/v1/groups/{group}/sync", sync_body(j, i, plan if j is leader else []))
            for c, j, i in members
        )
    )
    assert all(s["error"] == "NONE" for s in synced), {s["error"] for s in synced}


async def rebalance_repeatedly(url: str, group: str, members: list[dict[str, Any]], seconds: float) -> int:
    """Every member rejoins (its metadata again), then syncs: one rebalance of the big group, over and over."""
    conns = [await Connection.open(url) for _ in members]
    deadline = time.perf_counter() + seconds
    rounds = 0
    current = members
    while time.perf_counter() < deadline:
        # New metadata each round: every member's join starts or joins the rebalance, in whatever order they come.
        metadata = (b"n" if rounds % 2 == 0 else b"m") * BIG_METADATA
        joins = await asyncio.gather(
            *(
                c.json("POST", f"/v1/groups/{group}/join", join_body(m["instance"], metadata, m["member_id"]))
                for c, m in zip(conns, current, strict=True)
            )
        )
        assert all(j["error"] == "NONE" for j in joins), {j["error"] for j in joins}
        await sync_all(group, [(c, j, m["instance"]) for c, j, m in zip(conns, joins, current, strict=True)])
        current = [dict(j, instance=m["instance"]) for j, m in zip(joins, current, strict=True)]
        rounds += 1
    for c in conns:
        await c.close()
    return rounds


def bystander_commits(url: str, members: list[dict[str, Any]], seconds: float) -> dict[str, Any]:
    spec = {"url": url, "members": members, "rate": BYSTANDER_RATE, "seconds": seconds}
    out = subprocess.run(
        pinned([sys.executable, "-m", "benchmarks.bounds_floods", "commit-load"], 1),
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        check=True,
        timeout=seconds + 120,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


async def commit_load(spec: dict[str, Any]) -> dict[str, Any]:
    """Open-loop offset commits by the bystander's members, one connection each, at ``rate`` per second."""
    members = spec["members"]
    conns = [await Connection.open(spec["url"]) for _ in members]
    interval = len(members) / spec["rate"]
    deadline = time.perf_counter() + spec["seconds"]
    latencies: list[float] = []
    errors = 0

    async def worker(index: int) -> None:
        nonlocal errors
        m, conn = members[index], conns[index]
        next_at = time.perf_counter() + interval * index / len(members)
        offset = 0
        while next_at < deadline:
            now = time.perf_counter()
            if now < next_at:
                await asyncio.sleep(next_at - now)
            offset += 1
            body = {
                "member_id": m["member_id"],
                "generation_id": m["generation_id"],
                "group_instance_id": m["instance"],
                "topics": [{"name": "t", "partitions": [{"partition_index": index, "committed_offset": offset}]}],
            }
            status, answer = await conn.send(
                conn.encode("POST", "/v1/groups/bystander/offsets", json.dumps(body).encode())
            )
            latencies.append(time.perf_counter() - next_at)
            if status != 200 or b'"error_code":0' not in answer:
                errors += 1
            next_at += interval

    await asyncio.gather(*(worker(i) for i in range(len(members))))
    for conn in conns:
        await conn.close()
    latencies.sort()

    def pct(q: float) -> float:
        return latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000 if latencies else float("nan")

    return {"commits": len(latencies), "errors": errors, "p50_ms": pct(0.5), "p99_ms": pct(0.99), "max_ms": pct(1.0)}


def big_metadata(tmp: Path) -> dict[str, Any]:
    data_dir = tmp / "big"
    coordinator = Coordinator(data_dir, cpu=0)
    with coordinator:
        url = coordinator.url
        bystanders = asyncio.run(form(url, "bystander", [f"by-{i}" for i in range(10)], b"sub"))
        baseline = bystander_commits(url, bystanders, BYSTANDER_SECONDS)
        progress(f"big_metadata: bystander baseline p50 {baseline['p50_ms']:.1f} ms, p99 {baseline['p99_ms']:.1f} ms")
        big = asyncio.run(form(url, "big", [f"big-{i}" for i in range(BIG_MEMBERS)], b"m" * BIG_METADATA))
        admitted = [m for m in big if m["error"] == "NONE"]
        turned_away = {m["error"] for m in big if m["error"] != "NONE"}
        loop_result: dict[str, Any] = {}

        def rebalancing() -> None:
            loop_result["rounds"] = asyncio.run(rebalance_repeatedly(url, "big", admitted, BYSTANDER_SECONDS))

        churn = threading.Thread(target=rebalancing)
        churn.start()
        during = bystander_commits(url, bystanders, BYSTANDER_SECONDS)
        churn.join()
        rss = coordinator.rss_bytes()
        rest = at_rest(coordinator)
    figures: dict[str, Any] = {
        "big_group": {
            "members_tried": BIG_MEMBERS,
            "metadata_bytes_each": BIG_METADATA,
            "admitted": len(admitted),
            "turned_away": len(big) - len(admitted),
            "turned_away_with": sorted(turned_away),
            "rebalances_during": loop_result.get("rounds", 0),
        },
        "bystander_baseline": baseline,
        "bystander_during": during,
        "coordinator_rss_mib": rss / MiB,
        "at_rest": rest,
    }
    progress(
        f"big_metadata: {len(admitted)} of {BIG_MEMBERS} admitted, {figures['big_group']['rebalances_during']}"
        f" rebalances; bystander p50 {during['p50_ms']:.1f} ms, p99 {during['p99_ms']:.1f} ms, max"
        f" {during['max_ms']:.1f} ms"
    )
    return figures


# --------------------------------------------------------------------------------------------- integrity check


def integrity_check(tmp: Path) -> dict[str, Any]:
    """The bloated store's checks, timed on a copy of it at rest (page cache warm), and the start-up they add."""
    data_dir = tmp / "bloat"
    db = data_dir / "berth.db"
    figures: dict[str, Any] = {"database_mib": db.stat().st_size / MiB, "disk_read_mib_s": direct_read_mib_s(db)}
    for pragma in ("quick_check", "integrity_check"):
        conn = sqlite3.connect(db)
        started = time.perf_counter()
        result = conn.execute(f"PRAGMA {pragma}").fetchall()
        figures[f"{pragma}_s"] = time.perf_counter() - started
        figures[f"{pragma}_result"] = result[0][0]
        conn.close()
    conn = sqlite3.connect(db)
    started = time.perf_counter()
    check_journal_rows(conn, db)  # what every start does, whatever --integrity-check says
    figures["journal_rows_check_s"] = time.perf_counter() - started
    figures["journal_table_rows"] = conn.execute("SELECT count(*) FROM journal").fetchone()[0]
    conn.close()
    for mode in ("quick", "off"):
        coordinator = Coordinator(data_dir, "--integrity-check", mode, cpu=0)
        started = time.perf_counter()
        coordinator.start()
        figures[f"start_with_{mode}_s"] = time.perf_counter() - started
        coordinator.stop()
    progress(
        f"integrity_check: {figures['database_mib']:.0f} MiB database, quick_check {figures['quick_check_s']:.2f} s,"
        f" integrity_check {figures['integrity_check_s']:.2f} s, journal rows {figures['journal_rows_check_s']:.2f} s;"
        f" start {figures['start_with_quick_s']:.2f} s with"
        f" the check, {figures['start_with_off_s']:.2f} s without"
    )
    return figures


def direct_read_mib_s(path: Path) -> float:
    """How fast the disk reads the file past the page cache (O_DIRECT): what a cold integrity check reads at."""
    block = 4 * MiB
    buffer = mmap.mmap(-1, block)  # page-aligned, as O_DIRECT wants
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECT", 0))
    started = time.perf_counter()
    total = 0
    try:
        while (n := os.readv(fd, [buffer])) > 0:
            total += n
    finally:
        os.close(fd)
    return total / MiB / (time.perf_counter() - started)


def main() -> Result:
    from benchmarks import stored_floods  # here: it imports benchmarks.floods, which imports this module

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        figures = {"journal_bloat": journal_bloat(root)}
        figures["integrity_check"] = integrity_check(root)
        figures["many_groups"] = many_groups(root)
        figures["big_metadata"] = big_metadata(root)
        figures.update(stored_floods.run(root))
    bloat, many, big = figures["journal_bloat"], figures["many_groups"], figures["big_metadata"]
    rests = [f["at_rest"] for f in figures.values() if isinstance(f, dict) and "at_rest" in f]
    within = all(
        max(r["peak_rss_mib"], r["reload_peak_rss_mib"]) < CHART_MEMORY_MIB and r["disk_mib"] < CHART_VOLUME_MIB
        for r in rests
    )
    met = (
        within
        and bloat["data_dir_peak_mib"] < CHART_VOLUME_MIB
        and bloat["rss_peak_mib"] < CHART_MEMORY_MIB
        and bloat["page"]["bytes"] <= MiB
        and many["rss_at_cap_mib"] < CHART_MEMORY_MIB
        and many["answers"].get("COORDINATOR_NOT_AVAILABLE", 0) == MANY_GROUPS - 50_000
        and big["bystander_during"]["errors"] == 0
        and stored_floods.met(figures)
    )
    worst = max(rests, key=lambda r: max(r["peak_rss_mib"], r["reload_peak_rss_mib"]))
    return Result(
        name="floods_bounds",
        title="Floods against the bounds: journal bloat, many groups, big metadata, offsets, metadata across groups",
        command="python -m benchmarks.floods",
        goal="every flood leaves RSS, reload RSS and disk under the chart's 512 MiB and 1 GiB; a bystander group"
        " keeps being served; probes answered; no lockout",
        met=met,
        summary=(
            f"data dir peak {bloat['data_dir_peak_mib']:.0f} MiB after {bloat['cycles']} bloating rebalances;"
            f" RSS {many['rss_at_cap_mib']:.0f} MiB at 50,000 groups, reload {many['reload_s']:.1f} s; bystander"
            f" commit p99 {big['bystander_during']['p99_ms']:.0f} ms while an 8 MiB group rebalances; the most"
            f" memory after any flood {max(worst['peak_rss_mib'], worst['reload_peak_rss_mib']):.0f} MiB"
            f" of {CHART_MEMORY_MIB}"
        ),
        figures=figures,
        note="Default flags (the chart's); coordinator on core 0, load generators on core 1.",
    )


if __name__ == "__main__":
    if sys.argv[1:] == ["commit-load"]:
        print(json.dumps(asyncio.run(commit_load(json.loads(sys.stdin.read())))))
    else:
        outcome = main()
        print(json.dumps(outcome.figures, indent=2))
        outcome.save()
