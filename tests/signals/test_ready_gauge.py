"""The fleet's Ready gauge follows its Ready condition however a pass ends: the operator's real pass against a real
coordinator on its manual clock (the signal lab), then a coordinator that stops answering.

Regression (found by the Kafka signal lab): a pass that found the coordinator unreachable wrote Ready Unknown to
status but left ``berth_operator_fleet_ready`` at 1, so an alert on the gauge stayed quiet while status said the
fleet was not known to be ready.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import aiohttp
import pytest
from support.coordinator import CoordinatorProcess
from support.signal_berth import BerthRig
from support.signal_lab import History, Lab, fleet_metrics

from berth.operator.ports import CoordinatorPort, CoordinatorUnavailable


@pytest.fixture(scope="module")
def coordinator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CoordinatorProcess]:
    process = CoordinatorProcess(tmp_path_factory.mktemp("ready") / "data")
    process.start()
    yield process
    process.kill()


class Unreachable:
    """The coordinator's port, every call of which fails as an unreachable coordinator's does."""

    def __init__(self, port: CoordinatorPort) -> None:
        self.port = port

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.port, name)
        if not callable(found):
            return found
        return self.refuse

    async def refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise CoordinatorUnavailable("cannot reach the coordinator at the lab's address (the test stopped it)")


def ready(lab: Lab) -> str:
    return next(c["status"] for c in lab.status.status["conditions"] if c["type"] == "Ready")


async def test_the_ready_gauge_drops_when_the_coordinator_becomes_unreachable(coordinator: CoordinatorProcess) -> None:
    async with aiohttp.ClientSession() as session:
        rig = await BerthRig(coordinator.url, session).start()
        history = History(replicas=2, leave_on_scale_down=True, pre_register=True, ordered_ready=False, steps=())
        lab = Lab(rig, "ready-gauge", history)
        gauge: Callable[[], float | None] = lambda: fleet_metrics(  # noqa: E731
            lab.metrics.exposition().decode(), lab.group
        ).get("berth_operator_fleet_ready")
        try:
            await lab.come_to_rest()
            assert ready(lab) == "True" and gauge() == 1

            lab.context.ports.coordinators.port = Unreachable(rig.port)  # type: ignore[attr-defined]
            await lab.reconcile()
            assert lab.record.failures, "the pass should have ended on the unreachable coordinator"
            assert ready(lab) == "Unknown"
            assert gauge() == 0

            lab.context.ports.coordinators.port = rig.port  # type: ignore[attr-defined]
            await lab.come_to_rest()
            assert ready(lab) == "True" and gauge() == 1
        finally:
            await rig.teardown(lab.members)
