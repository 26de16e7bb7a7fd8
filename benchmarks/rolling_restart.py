"""Benchmark 3: a rolling restart of every member of a 100-member group, static vs dynamic, in the same run.

Each member is closed (a static member does not leave; a dynamic one does) and started again; the next one
restarts once every partition is owned again. Goal: static costs 0 rebalances and moves 0 partitions.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import Coordinator, Result, progress
from benchmarks.fleet import Fleet, journal_end, rebalances_since
from benchmarks.goals import GOALS

MEMBERS = 100
PARTITIONS = 300


async def rolling_restart(url: str, *, static: bool) -> dict[str, Any]:
    group = "static" if static else "dynamic"
    fleet = Fleet(url, group, partitions=PARTITIONS, static=static)
    names = [f"{group}-{i}" for i in range(MEMBERS)]
    everyone = set(names)
    try:
        await with_expected(url, group, names if static else [])
        for name in names:
            await fleet.start(name)
        await fleet.ownership.until(lambda: fleet.ownership.covered_by(everyone, PARTITIONS), timeout_s=300)
        mark = await journal_end(url)
        moves_before = fleet.ownership.moves
        started = time.monotonic()
        gaps = []
        for i, name in enumerate(names):
            gone_at = await fleet.stop(name)
            await fleet.start(name)
            back_at = await fleet.ownership.until(lambda: fleet.ownership.covered_by(everyone, PARTITIONS))
            gaps.append(back_at - gone_at)
            if (i + 1) % 25 == 0:
                progress(f"{group}: {i + 1}/{MEMBERS} restarted")
        rebalances, _ = await rebalances_since(url, group, mark)
        return {
            "membership": group,
            "rebalances": rebalances,
            "partitions_moved": fleet.ownership.moves - moves_before,
            "seconds": time.monotonic() - started,
            "median_seconds_per_restart": sorted(gaps)[len(gaps) // 2],
        }
    finally:
        await fleet.close()


async def with_expected(url: str, group: str, ids: list[str]) -> None:
    if ids:
        from berth.coordinator.client import CoordinatorAdmin

        async with CoordinatorAdmin(url) as admin:
            await admin.put_expected_members(group, ids)


def main() -> Result:
    with tempfile.TemporaryDirectory() as tmp, Coordinator(Path(tmp) / "data") as coordinator:
        static = asyncio.run(rolling_restart(coordinator.url, static=True))
        progress(f"static: {static}")
        dynamic = asyncio.run(rolling_restart(coordinator.url, static=False))
        progress(f"dynamic: {dynamic}")
    met = static["rebalances"] == 0 and static["partitions_moved"] == 0
    return Result(
        name="rolling_restart",
        title="Rolling restart of a 100-member group",
        command="python -m benchmarks rolling_restart",
        goal=GOALS["rolling_restart"],
        met=met,
        summary=(
            f"static {static['rebalances']} rebalances / {static['partitions_moved']} moved; "
            f"dynamic {dynamic['rebalances']} / {dynamic['partitions_moved']}"
        ),
        figures={"members": MEMBERS, "partitions": PARTITIONS, "static": static, "dynamic": dynamic},
        note="Sticky assignor; each member restarts once every partition is owned again.",
    )


if __name__ == "__main__":
    result = main()
    print(json.dumps(result.figures, indent=2))
    result.save()
