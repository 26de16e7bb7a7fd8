"""Stuck-group detection on Berth's coordinator (issue 30, "What to build 3"): the operator's real pass against a real
coordinator on its manual clock (the signal lab), its members speaking the coordinator's protocol with the range
assignor over 6 partitions.

- A consumer that stops polling (its process alive and its pod Ready, but silent) is expired by the coordinator and
  the survivors go on: its Ready pod owns nothing while each survivor owns several — ``GroupStuck`` True
  (``ReadyPodsIdle``, naming the pod) within the threshold, one Warning Event, the fleet's gauges, ``status.stuck``.
- A fleet larger than its partition count (4 pods, 2 partitions): two Ready pods own nothing while each busy one owns
  one partition — never stuck.
- Unowned partitions, known from the group's committed offsets (Berth's coordinator keeps no partition log): the
  members commit all 6 partitions, then a scale-up's rebalance is assigned by a leader that sees only 4 of them (stale
  metadata) — ``GroupStuck`` True (``PartitionsUnowned``, naming the two) once they have had no owner for the
  threshold and not before, one Warning, the unowned gauge; a later rebalance over all 6 clears all of it.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterator
from dataclasses import replace
from datetime import timedelta

import aiohttp
import pytest
from support.coordinator import CoordinatorProcess
from support.signal_berth import BerthRig
from support.signal_lab import History, Lab, Step, fleet_metrics

from berth.operator.planners.conditions import parse_time
from berth.operator.planners.stuck_group import owners

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


def count_reads(rig: BerthRig) -> list[tuple[str, frozenset[str] | None]]:
    """Each read of committed partitions the port makes from now on: (group, topics asked for)."""
    reads: list[tuple[str, frozenset[str] | None]] = []
    read = rig.port.committed_partitions

    async def counted(group_id: str, topics: Collection[str] | None, limit: int) -> tuple[str, ...]:
        reads.append((group_id, None if topics is None else frozenset(topics)))
        return await read(group_id, topics, limit)

    rig.port.committed_partitions = counted  # type: ignore[method-assign]
    return reads


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


async def test_committed_partitions_nobody_owns_make_the_group_stuck_until_they_are_owned_again(
    coordinator: CoordinatorProcess,
) -> None:
    async with aiohttp.ClientSession() as session:
        rig = await BerthRig(coordinator.url, session).start()
        lab = lab_of(rig, 3)
        six = {f"orders:{n}" for n in range(6)}
        try:
            reads = count_reads(rig)
            await lab.come_to_rest()
            await lab.members.commit(owners(await rig.port.describe(lab.group)), 42)
            before = len(reads)
            for _ in range(3):
                await lab.wait(1_000)
                await lab.reconcile()
            assert len(reads) == before  # not once a pass: read again only when the membership changes
            assert stuck_condition(lab)["status"] == "False" and "stuck" not in lab.status.status

            lab.members.partitions = 4  # the leader's metadata shows 4 of the topic's 6 partitions from now on
            await lab.do(Step("scale", n=4))
            passes_before = len(lab.record.statuses)
            for _ in range(20):
                await lab.wait(1_000)
                await lab.reconcile()
                if stuck_condition(lab)["status"] == "True":
                    break
            described = await rig.port.describe(lab.group)
            assert sorted(p for m in described.members for p in m.assignment) == sorted(six - {"orders:4", "orders:5"})
            assert lab.memory.known_partitions == six  # the committed partitions, read as the membership changed
            assert reads[-1] == (lab.group, frozenset({"orders"}))  # of the topics the members subscribe to
            condition = stuck_condition(lab)
            assert (condition["status"], condition["reason"]) == ("True", "PartitionsUnowned"), condition
            assert (
                "2 partitions have had no owner" in condition["message"]
                and "orders:4, orders:5" in condition["message"]
            )
            stuck = lab.status.status["stuck"]
            assert (stuck["unowned"], stuck["unownedCount"], stuck["idleReadyPods"]) == (
                ["orders:4", "orders:5"],
                2,
                [],
            )
            # Within the threshold, and not before it: every pass since the scale-up said True exactly when the
            # partitions had had no owner for the threshold.
            since = parse_time(stuck["unownedSince"])
            assert since is not None
            for at_ms, status in lab.record.statuses[passes_before:]:
                said = next(c for c in status["conditions"] if c["type"] == "GroupStuck")["status"]
                due = (at_ms / 1000) >= since.timestamp() + THRESHOLD.total_seconds()
                assert said == ("True" if due else "False"), (at_ms, since, said)
            warnings = [s for s in lab.record.said if s.reason == "GroupStuck"]
            assert [(w.type, "orders:4, orders:5" in w.message) for w in warnings] == [("Warning", True)]
            metrics = fleet_metrics(lab.metrics.exposition().decode(), lab.group)
            assert metrics["berth_operator_fleet_unowned_partitions"] == 2
            assert metrics["berth_operator_fleet_group_stuck"] == 1

            lab.members.partitions = 6  # the leader sees the whole topic again: the next rebalance assigns all 6
            await lab.do(Step("scale", n=3))
            await lab.come_to_rest()
            described = await rig.port.describe(lab.group)
            assert sorted(p for m in described.members for p in m.assignment) == sorted(six)
            condition = stuck_condition(lab)
            assert (condition["status"], condition["reason"]) == ("False", "PartitionsOwned"), condition
            assert "stuck" not in lab.status.status
            metrics = fleet_metrics(lab.metrics.exposition().decode(), lab.group)
            assert metrics["berth_operator_fleet_unowned_partitions"] == 0
            assert metrics["berth_operator_fleet_group_stuck"] == 0
            assert len([s for s in lab.record.said if s.reason == "GroupStuck"]) == 1
        finally:
            await rig.teardown(lab.members)
