"""Benchmark 7: coordinator restart with 1,000 groups x 100 members persisted: time from process start to
``/readyz`` 200 (the ready line is printed then), and resident memory per member. Goals: < 2 s; < 2 KiB.

The data directory is written once through the store itself (real group records), then the coordinator is
started on it several times.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from benchmarks.common import Coordinator, Result, progress, spread
from benchmarks.goals import GOALS
from berth.coordinator.core.group import STABLE, Group
from berth.coordinator.core.member import Member
from berth.coordinator.core.records import new_group_record
from berth.coordinator.protocol import JoinProtocol as Protocol
from berth.coordinator.store import GroupCommitWriter, SqliteStore

GROUPS, MEMBERS = 1_000, 100
RUNS = 3


def write_groups(data_dir: Path) -> None:
    store = SqliteStore(data_dir)
    writer = GroupCommitWriter(store, lambda results: None)
    subscription = b'{"owned_partitions":{},"topics":["orders"],"user_data":null,"version":1}'
    from berth.coordinator.core.effects import Write

    for g in range(GROUPS):
        group = Group(
            f"group-{g:04d}", now_ms=0, state=STABLE, generation_id=7, protocol_type="consumer", protocol_name="sticky"
        )
        for m in range(MEMBERS):
            instance = f"group-{g:04d}-{m}"
            member = Member(
                f"{instance}-00000000-0000-4000-8000-{m:012d}",
                instance,
                "berth-member",
                "10.0.0.1",
                300_000,
                45_000,
                "consumer",
                (Protocol("sticky", subscription),),
                b'{"partitions":{"orders":[' + str(m).encode() + b']},"user_data":null,"version":1}',
            )
            group.add(member)
        writer.submit(Write(g + 1, [new_group_record(group)], []))
    writer.close()
    store.close()


def start_once(data_dir: Path) -> tuple[float, int]:
    started = time.perf_counter()
    with Coordinator(data_dir) as coordinator:
        ready_s = time.perf_counter() - started
        rss = coordinator.rss_bytes()
    return ready_s, rss


def main() -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        empty_ready, empty_rss = start_once(Path(tmp) / "empty")
        data = Path(tmp) / "loaded"
        progress(f"writing {GROUPS} groups x {MEMBERS} members")
        write_groups(data)
        ready, rss = [], []
        for run in range(RUNS):
            r, m = start_once(data)
            ready.append(r)
            rss.append(m)
            progress(f"run {run + 1}: ready in {r:.2f} s, RSS {m / 2**20:.0f} MiB")
    per_member = [(m - empty_rss) / (GROUPS * MEMBERS) for m in rss]
    ready_s, bytes_per = spread(ready), spread(per_member)
    return Result(
        name="reload",
        title="Reload of 1,000 groups x 100 members",
        command="python -m benchmarks reload",
        goal=GOALS["reload"],
        met=ready_s["median"] < 2.0 and bytes_per["median"] < 2048,
        summary=f"ready in {ready_s['median']:.2f} s; {bytes_per['median']:.0f} bytes per member",
        figures={
            "ready_s": ready_s,
            "bytes_per_member": bytes_per,
            "empty_coordinator_ready_s": empty_ready,
            "empty_coordinator_rss_mib": empty_rss / 2**20,
            "members": GROUPS * MEMBERS,
        },
        note="From process start (Python start-up included) to the ready line; memory above an empty coordinator.",
    )


if __name__ == "__main__":
    result = main()
    print(json.dumps(result.figures, indent=2))
    result.save()
