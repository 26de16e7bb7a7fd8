"""Store throughput: writes/s through ``GroupCommitWriter`` with 64 concurrent submitters, fsync on.

Each submitter is a task on one asyncio loop, as in the coordinator: it submits a write, waits for the
writer thread's ``on_done`` (hopped back with ``call_soon_threadsafe``), then submits the next one.

- (a) whole-group rewrites: each write rewrites a 50-member group (64 groups) and journals 2 events (a static
  replacement in the coordinator writes a two-row delta instead: see benchmarks/static_restart.py).
- (b) offset commits: each write carries 50 partition offsets (64 groups).
- (c) reload: 1,000 groups x 100 members loaded from disk and replayed into a fresh ``Coordinator``.

Targets inside the whole coordinator: >= 2,000 static replacements/s and >= 20,000 partition offsets/s.
Usage: ``python benchmarks/store_throughput.py [--seconds 3] [--data-dir DIR]`` (DIR must not be tmpfs, or
fsync costs nothing).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from berth.coordinator.core import (
    Coordinator,
    GroupMetadata,
    GroupRecord,
    MemberMetadata,
    OffsetAndMetadata,
    OffsetRecord,
    Write,
)
from berth.coordinator.store import GroupCommitWriter, SqliteStore

SUBMITTERS = 64
MEMBERS = 50
PARTITIONS = 50


def group_record(group_id: str, members: int, generation: int) -> GroupRecord:
    """A whole-group record of ``members`` static members, as the core writes it after a sync."""
    return GroupRecord(
        group_id,
        GroupMetadata(
            protocol_type="consumer",
            generation=generation,
            protocol="range",
            leader=f"{group_id}-0-0b6a3f0e-5d4e-4a39-9c55-0c7a1b1d2e3f",
            current_state_timestamp=1_700_000_000_000,
        ),
        tuple(
            MemberMetadata(
                member_id=f"{group_id}-{i}-0b6a3f0e-5d4e-4a39-9c55-0c7a1b1d2e3f",
                group_instance_id=f"{group_id}-{i}",
                client_id="orders-consumer",
                client_host="10.42.3.17",
                rebalance_timeout_ms=300_000,
                session_timeout_ms=45_000,
                subscription=b'{"owned_partitions":{},"topics":["orders"],"version":1}',
                assignment=b'{"partitions":{"orders":[0,1,2]},"version":1}',
            )
            for i in range(members)
        ),
    )


def static_replacement(token: int, submitter: int) -> Write:
    group_id = f"fleet-{submitter}"
    event = {"ts_ms": token, "group_id": group_id, "type": "static_member_replaced", "generation_id": 1}
    return Write(
        token,
        [group_record(group_id, MEMBERS, token)],
        [event, {**event, "type": "member_joined"}],
    )


def offset_commit(token: int, submitter: int) -> Write:
    group_id = f"fleet-{submitter}"
    return Write(
        token,
        [
            OffsetRecord(group_id, "orders", p, OffsetAndMetadata(token, "", 3, 1_700_000_000_000))
            for p in range(PARTITIONS)
        ],
        [],
    )


async def measure(data_dir: Path, make_write: Callable[[int, int], Write], seconds: float) -> tuple[float, float]:
    """Writes/s and mean writes per transaction over ``seconds`` of closed-loop submission."""
    loop = asyncio.get_running_loop()
    waiting: dict[int, asyncio.Future[bool]] = {}

    def resolve(outcomes: list[tuple[int, bool]]) -> None:
        for token, ok in outcomes:
            waiting.pop(token).set_result(ok)

    tokens = itertools.count(1)
    done = 0
    stop_at = 0.0

    async def submitter(index: int) -> None:
        nonlocal done
        while time.perf_counter() < stop_at:
            token = next(tokens)
            waiting[token] = loop.create_future()
            writer.submit(make_write(token, index))
            if not await waiting[token]:
                raise RuntimeError("a write failed")
            done += 1

    with SqliteStore(data_dir) as store:
        writer = GroupCommitWriter(store, lambda outcomes: loop.call_soon_threadsafe(resolve, outcomes))
        with writer:
            stop_at = time.perf_counter() + 0.5  # warm up: caches, WAL growth
            await asyncio.gather(*(submitter(i) for i in range(SUBMITTERS)))
            done, transactions_before = 0, writer.transactions
            started = time.perf_counter()
            stop_at = started + seconds
            await asyncio.gather(*(submitter(i) for i in range(SUBMITTERS)))
            elapsed = time.perf_counter() - started
            transactions = writer.transactions - transactions_before
    return done / elapsed, done / max(transactions, 1)


def measure_reload(data_dir: Path, groups: int = 1000, members: int = 100) -> tuple[float, float]:
    """Seconds to load every record, and to load and replay them into a fresh Coordinator."""
    with SqliteStore(data_dir) as store, GroupCommitWriter(store, lambda outcomes: None) as writer:
        for g in range(groups):
            writer.submit(Write(g, [group_record(f"g{g}", members, 1)], []))
    with SqliteStore(data_dir) as store:
        started = time.perf_counter()
        records = list(store.load())
        load_seconds = time.perf_counter() - started
        assert len(records) == groups
        started = time.perf_counter()
        Coordinator().load(store.load(), now_ms=1_700_000_000_000)
        replay_seconds = time.perf_counter() - started
    return load_seconds, replay_seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--data-dir", type=Path, default=None, help="parent dir for the stores (default: a temp dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.data_dir) as tmp:
        root = Path(tmp)
        replace_rate, replace_batch = asyncio.run(measure(root / "a", static_replacement, args.seconds))
        offset_rate, offset_batch = asyncio.run(measure(root / "b", offset_commit, args.seconds))
        load_s, replay_s = measure_reload(root / "c")
    print(f"store throughput, {SUBMITTERS} concurrent submitters, WAL + synchronous=FULL, data in {root}")
    print("| workload | writes/s | per write | mean writes/transaction | target |")
    print("|---|---|---|---|---|")
    print(
        f"| (a) {MEMBERS}-member group record rewrite + 2 events | {replace_rate:,.0f} | 1 group record"
        f" | {replace_batch:.1f} | >= 2,000 writes/s |"
    )
    print(
        f"| (b) {PARTITIONS} offsets | {offset_rate:,.0f} | {offset_rate * PARTITIONS:,.0f} offsets/s"
        f" | {offset_batch:.1f} | >= 20,000 offsets/s |"
    )
    print(f"reload 1,000 groups x 100 members: load {load_s:.2f} s, load + replay into Coordinator {replay_s:.2f} s")


if __name__ == "__main__":
    main()
