"""The soak (``make soak``): 1,000 members heartbeating for at least 10 minutes, with periodic static restarts and
scale changes, while the coordinator's memory and its non-200 answers are watched.

10 groups x 100 static members (the member library, in-process, each with its own HTTP session) against a real
coordinator. Every 20 s five random members restart; every 60 s one group sheds 10 members with a batch leave
(as the operator does) and takes them back with pre-registration. Memory (RSS) is sampled every 10 s; its trend
is the slope of a least-squares line over the second half. Goals: no memory growth trend (under 1 MiB/min), and
no error responses beyond the expected ones (every HTTP answer is 200; protocol outcomes are in-band).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from benchmarks.common import Coordinator, Result, progress
from benchmarks.fleet import Fleet
from berth.coordinator.client import CoordinatorAdmin

GROUPS, MEMBERS, PARTITIONS = 10, 100, 200


def slope_per_minute(samples: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, MiB) samples, in MiB per minute."""
    n = len(samples)
    if n < 2:
        return 0.0
    mean_t = sum(t for t, _ in samples) / n
    mean_m = sum(m for _, m in samples) / n
    var = sum((t - mean_t) ** 2 for t, _ in samples)
    cov = sum((t - mean_t) * (m - mean_m) for t, m in samples)
    return 0.0 if var == 0 else cov / var * 60


async def http_statuses(url: str) -> dict[str, int]:
    """Answers by HTTP status, from the coordinator's own counters."""
    async with aiohttp.ClientSession() as session, session.get(f"{url}/metrics") as resp:
        text = await resp.text()
    statuses: dict[str, int] = {}
    for match in re.finditer(r'berth_http_responses_total\{route="[^"]+",status="(\d+)"\} (\d+)', text):
        statuses[match.group(1)] = statuses.get(match.group(1), 0) + int(match.group(2))
    return statuses


async def soak(coordinator: Coordinator, minutes: float) -> dict[str, Any]:
    url = coordinator.url
    rng = random.Random(1122)
    fleets = [Fleet(url, f"soak-{g}", partitions=PARTITIONS, static=True, heartbeat_ms=3_000) for g in range(GROUPS)]
    names = {f.group: [f"{f.group}-{i}" for i in range(MEMBERS)] for f in fleets}
    samples: list[tuple[float, float]] = []
    restarts = scale_changes = 0
    async with CoordinatorAdmin(url) as admin:
        for fleet in fleets:
            await admin.put_expected_members(fleet.group, names[fleet.group])
            for name in names[fleet.group]:
                await fleet.start(name)
        for fleet in fleets:
            everyone = set(names[fleet.group])
            await fleet.ownership.until(
                lambda f=fleet, e=everyone: f.ownership.covered_by(e, PARTITIONS), timeout_s=600
            )
        progress(f"{GROUPS * MEMBERS} members formed; soaking for {minutes:g} min")
        started = time.monotonic()
        next_sample = next_restart = next_scale = started
        while (now := time.monotonic()) - started < minutes * 60:
            if now >= next_sample:
                samples.append((now - started, coordinator.rss_bytes() / 2**20))
                next_sample += 10
            if now >= next_restart:
                for fleet in rng.sample(fleets, 5):
                    name = rng.choice(list(fleet.members))
                    await fleet.stop(name)
                    await fleet.start(name)
                    restarts += 1
                next_restart += 20
            if now >= next_scale:
                fleet = rng.choice(fleets)
                kept, shed = names[fleet.group][:-10], names[fleet.group][-10:]
                await admin.put_expected_members(fleet.group, kept)
                for name in shed:
                    await fleet.stop(name)
                await admin.leave_instances(fleet.group, shed)
                await admin.put_expected_members(fleet.group, names[fleet.group])
                for name in shed:
                    await fleet.start(name)
                scale_changes += 1
                next_scale += 60
            if int(now - started) % 60 == 0 and samples:
                progress(f"{(now - started) / 60:.0f} min: RSS {samples[-1][1]:.0f} MiB")
            await asyncio.sleep(0.5)
        statuses = await http_statuses(url)
    for fleet in fleets:
        await fleet.close()
    second_half = [s for s in samples if s[0] >= samples[-1][0] / 2]
    return {
        "minutes": minutes,
        "members": GROUPS * MEMBERS,
        "restarts": restarts,
        "scale_changes": scale_changes,
        "rss_mib": {"first": samples[0][1], "last": samples[-1][1], "max": max(m for _, m in samples)},
        "rss_trend_mib_per_min_second_half": slope_per_minute(second_half),
        "http_statuses": statuses,
        "samples": samples,
    }


def main(minutes: float = 10.0) -> Result:
    with tempfile.TemporaryDirectory() as tmp, Coordinator(Path(tmp) / "data", cpu=0) as coordinator:
        figures = asyncio.run(soak(coordinator, minutes))
    non_200 = sum(n for status, n in figures["http_statuses"].items() if status != "200")
    trend = figures["rss_trend_mib_per_min_second_half"]
    return Result(
        name="soak",
        title=f"Soak: {GROUPS * MEMBERS} members for {minutes:g} min with restarts and scale changes",
        command="make soak",
        goal="no memory growth trend; no error responses beyond the expected ones",
        met=abs(trend) < 1.0 and non_200 == 0,
        summary=f"RSS trend {trend:+.2f} MiB/min; {non_200} non-200 answers; {figures['restarts']} restarts",
        figures=figures,
        note="Members heartbeat every 3 s; RSS sampled every 10 s; trend over the second half.",
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m benchmarks.soak")
    parser.add_argument("--minutes", type=float, default=10.0)
    result = main(parser.parse_args().minutes)
    print(json.dumps({k: v for k, v in result.figures.items() if k != "samples"}, indent=2))
    result.save()
