"""Stuck-group detection on Berth's coordinator (issue 30, "What to build 3"): the operator's real pass against a real
coordinator on its manual clock (the signal lab), its members speaking the coordinator's protocol with the range
assignor over 6 partitions.

- A consumer that stops polling (its process alive and its pod Ready, but silent) is expired by the coordinator and
  the survivors go on: its Ready pod owns nothing while each survivor owns several — ``GroupStuck`` True
  (``ReadyPodsIdle``, naming the pod) within the threshold, one Warning Event, the fleet's gauges, ``status.stuck``.
- A fleet larger than its partition count (4 pods, 2 partitions): two Ready pods own nothing while each busy one owns
  one partition — never stuck.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta

import aiohttp
import pytest
from support.coordinator import CoordinatorProcess
from support.signal_berth import BerthRig
from support.signal_lab import History, Lab, fleet_metrics

THRESHOLD = timedelta(seconds=5)
_names = itertools.count(1)


@pytest.fixture(scope="module")
def coordinator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CoordinatorProcess]:
    process = CoordinatorProcess(tmp_path_factory.mktemp("stuck") / "data")
    process.start()
    yield process
    process.kill()


def lab_of(rig: BerthRig, replicas: int) -> Lab:
    history = History(replicas=replicas, leave_on_scale_down=True, pre_register=True, ordered_ready=False, steps=())
    lab = Lab(rig, f"stuck{next(_names)}", history)
    settings = replace(lab.context.settings, stuck_group=THRESHOLD)
    lab.context = replace(lab.context, settings=settings)
    return lab


def stuck_condition(lab: Lab) -> dict[str, str]:
    return next(c for c in lab.status.status["conditions"] if c["type"] == "GroupStuck")


async def test_a_consumer_that_stops_polling_leaves_its_ready_pod_idle_and_the_group_stuck(
    coordinator: CoordinatorProcess,
) -> None:
    async with aiohttp.ClientSession() as session:
        rig = await BerthRig(coordinator.url, session).start()
        lab = lab_of(rig, 3)
        try:
            await lab.come_to_rest()
            assert stuck_condition(lab)["status"] == "False" and "stuck" not in lab.status.status
            silent = f"{lab.group}-2"
            lab.members.stop(silent)  # stops polling: no heartbeat, no rejoin; its pod stays Ready
            assert lab.fleet.pods[silent].ready
            await lab.wait(12_000)  # past the session timeout (10 s): expired, a rebalance, 3 partitions each
            await lab.reconcile()
            first = lab.rig.now_ms()
            assert lab.status.status["stuck"]["idleReadyPods"] == [silent]
            assert stuck_condition(lab)["status"] == "False"  # not for the threshold yet
            while lab.rig.now_ms() - first < THRESHOLD.total_seconds() * 1000:
                await lab.wait(1_000)
                await lab.reconcile()
            condition = stuck_condition(lab)
            assert (condition["status"], condition["reason"]) == ("True", "ReadyPodsIdle"), condition
            assert silent in condition["message"] and "while a member owns" in condition["message"]
            warnings = [s for s in lab.record.said if s.reason == "GroupStuck"]
            assert len(warnings) == 1 and warnings[0].type == "Warning"
            await lab.reconcile()
            assert len([s for s in lab.record.said if s.reason == "GroupStuck"]) == 1  # once
            metrics = fleet_metrics(lab.metrics.exposition().decode(), lab.group)
            assert metrics["berth_operator_fleet_group_stuck"] == 1
            assert metrics["berth_operator_fleet_idle_ready_pods"] == 1
        finally:
            await rig.teardown(lab.members)


async def test_a_fleet_larger_than_its_partition_count_is_never_stuck(coordinator: CoordinatorProcess) -> None:
    async with aiohttp.ClientSession() as session:
        rig = await BerthRig(coordinator.url, session).start()
        lab = lab_of(rig, 4)
        lab.members.partitions = 2
        try:
            await lab.come_to_rest()
            for _ in range(4):
                await lab.wait(5_000)
                await lab.reconcile()
            described = await rig.port.describe(lab.group)
            assert sorted(len(m.assignment) for m in described.members) == [0, 0, 1, 1]
            assert stuck_condition(lab)["status"] == "False" and "stuck" not in lab.status.status
            assert not [s for s in lab.record.said if s.reason == "GroupStuck"]
            metrics = fleet_metrics(lab.metrics.exposition().decode(), lab.group)
            assert metrics["berth_operator_fleet_group_stuck"] == 0
        finally:
            await rig.teardown(lab.members)
