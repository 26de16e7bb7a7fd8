"""Benchmark 4: scale-down 10 -> 7 members over 60 partitions. Time from the departing members' exit until the
survivors own every partition: with Berth's batch leave (sent the moment they are gone, as the operator does)
versus waiting out a 45 s session timeout, side by side in the same run. Goal: <= 1 s with the batch leave.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.common import Coordinator, Result, progress, spread
from benchmarks.fleet import Fleet
from benchmarks.goals import GOALS
from berth.coordinator.client import CoordinatorAdmin

BEFORE, AFTER, PARTITIONS = 10, 7, 60
SESSION_MS = 45_000
RUNS = 3


async def scale_down(url: str, group: str, *, batch_leave: bool) -> dict[str, Any]:
    fleet = Fleet(url, group, partitions=PARTITIONS, static=True, session_ms=SESSION_MS)
    names = [f"{group}-{i}" for i in range(BEFORE)]
    survivors = set(names[:AFTER])
    try:
        async with CoordinatorAdmin(url) as admin:
            await admin.put_expected_members(group, names)
            for name in names:
                await fleet.start(name)
            await fleet.ownership.until(lambda: fleet.ownership.covered_by(set(names), PARTITIONS))
            await admin.put_expected_members(group, sorted(survivors))
            exits = [await fleet.stop(name) for name in names[AFTER:]]  # the pods terminate (no leave: static)
            gone_at = max(exits)
            if batch_leave:
                results = await admin.leave_instances(group, names[AFTER:])
                assert {r.error.name for r in results} == {"NONE"}, results
            owned_at = await fleet.ownership.until(
                lambda: fleet.ownership.covered_by(survivors, PARTITIONS), timeout_s=SESSION_MS / 1000 + 60
            )
        return {"seconds": owned_at - gone_at}
    finally:
        await fleet.close()


def main() -> Result:
    leave_s: list[float] = []
    wait_s: list[float] = []
    with tempfile.TemporaryDirectory() as tmp, Coordinator(Path(tmp) / "data") as coordinator:
        for run in range(RUNS):
            leave_s.append(asyncio.run(scale_down(coordinator.url, f"leave-{run}", batch_leave=True))["seconds"])
            progress(f"run {run + 1}: batch leave {leave_s[-1]:.2f} s")
        # Waiting out the session timeout takes 45 s a run: once is enough for the contrast.
        wait_s.append(asyncio.run(scale_down(coordinator.url, "wait", batch_leave=False))["seconds"])
        progress(f"waiting out the session timeout: {wait_s[-1]:.1f} s")
    leave, wait = spread(leave_s), spread(wait_s)
    speedup = wait["median"] / leave["median"]
    return Result(
        name="scale_down",
        title="Scale-down 10 -> 7 over 60 partitions",
        command="python -m benchmarks scale_down",
        goal=GOALS["scale_down"],
        met=leave["median"] <= 1.0 and speedup >= 40,
        summary=f"batch leave {leave['median']:.2f} s vs {wait['median']:.1f} s waiting ({speedup:.0f}x)",
        figures={"batch_leave_s": leave, "session_timeout_wait_s": wait, "speedup": speedup, "session_ms": SESSION_MS},
        note="Members heartbeat every 500 ms, so survivors learn of the rebalance within half a second.",
    )


if __name__ == "__main__":
    result = main()
    print(json.dumps(result.figures, indent=2))
    result.save()
