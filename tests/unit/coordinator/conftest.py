"""Every test here runs with group state transitions checked against Kafka's table (see ``scenario``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .scenario import Scenario, transitions_observed


@pytest.fixture(autouse=True)
def _kafka_transitions() -> Iterator[None]:
    with transitions_observed():
        yield


@pytest.fixture
def ctx() -> Iterator[Scenario]:
    scenario = Scenario()
    yield scenario
    scenario.close()
