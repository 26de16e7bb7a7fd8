"""Benchmark 5: scale-up 7 -> 10 with and without pre-registration (expected members, docs/api.md §7).

The three newcomers start two seconds apart, as a StatefulSet with OrderedReady starts its pods. With
pre-registration the first newcomer's join starts one rebalance that waits for the other two; without it each
newcomer may cost a rebalance of its own. Goal: 1 rebalance with, up to 3 without.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.common import Coordinator, Result, progress
from benchmarks.fleet import Fleet, journal_end, rebalances_since
from benchmarks.goals import GOALS
from berth.coordinator.client import CoordinatorAdmin

BEFORE, AFTER, PARTITIONS = 7, 10, 60
STAGGER_S = 2.0


async def scale_up(url: str, group: str, *, pre_register: bool) -> dict[str, Any]:
    fleet = Fleet(url, group, partitions=PARTITIONS, static=True)
    names = [f"{group}-{i}" for i in range(AFTER)]
    try:
        async with CoordinatorAdmin(url) as admin:
            await admin.put_expected_members(group, names[:BEFORE])
            for name in names[:BEFORE]:
                await fleet.start(name)
            await fleet.ownership.until(lambda: fleet.ownership.covered_by(set(names[:BEFORE]), PARTITIONS))
            if pre_register:
                await admin.put_expected_members(group, names)
            else:
                await admin.delete_expected_members(group)
            mark = await journal_end(url)
            for name in names[BEFORE:]:
                await fleet.start(name)
                await asyncio.sleep(STAGGER_S)  # the next pod starts later (OrderedReady)
            await fleet.ownership.until(lambda: fleet.ownership.covered_by(set(names), PARTITIONS))
        rebalances, _ = await rebalances_since(url, group, mark)
        return {"rebalances": rebalances, "partitions_moved": None}
    finally:
        await fleet.close()


def main() -> Result:
    with tempfile.TemporaryDirectory() as tmp, Coordinator(Path(tmp) / "data") as coordinator:
        with_list = asyncio.run(scale_up(coordinator.url, "with", pre_register=True))
        progress(f"with pre-registration: {with_list['rebalances']} rebalance(s)")
        without = asyncio.run(scale_up(coordinator.url, "without", pre_register=False))
        progress(f"without: {without['rebalances']} rebalance(s)")
    return Result(
        name="scale_up",
        title="Scale-up 7 -> 10 with and without pre-registration",
        command="python -m benchmarks scale_up",
        goal=GOALS["scale_up"],
        met=with_list["rebalances"] == 1,
        summary=f"{with_list['rebalances']} rebalance with, {without['rebalances']} without",
        figures={"with_pre_registration": with_list, "without": without, "stagger_s": STAGGER_S},
        note="Newcomers start 2 s apart (OrderedReady-like).",
    )


if __name__ == "__main__":
    result = main()
    print(json.dumps(result.figures, indent=2))
    result.save()
