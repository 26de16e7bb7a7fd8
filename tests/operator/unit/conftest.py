"""Shared builders for the operator's unit tests: ConsumerFleet objects as Kubernetes returns them."""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

#: The fixed "now" of the unit tests.
NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)

FleetBody = Callable[..., dict[str, Any]]


def consumer_template() -> dict[str, Any]:
    return {
        "metadata": {"labels": {"team": "payments"}},
        "spec": {
            "containers": [
                {
                    "name": "consumer",
                    "image": "registry.example/orders-consumer:1.4.2",
                    "env": [{"name": "LOG_LEVEL", "value": "info"}],
                }
            ]
        },
    }


def make_fleet_body(name: str = "orders", spec: dict[str, Any] | None = None, **metadata: Any) -> dict[str, Any]:
    """A ConsumerFleet with only the required fields, plus ``spec`` overrides (a key set to None is removed)."""
    body: dict[str, Any] = {
        "apiVersion": "berth.dev/v1alpha1",
        "kind": "ConsumerFleet",
        "metadata": {
            "name": name,
            "namespace": "shop",
            "uid": "6f1c2c1e-8d1a-4c55-9d59-0d7b9f2c1a11",
            "generation": 3,
            **metadata,
        },
        "spec": {"replicas": 5, "template": consumer_template()},
    }
    for key, value in (spec or {}).items():
        if value is None:
            body["spec"].pop(key, None)
        else:
            body["spec"][key] = copy.deepcopy(value)
    return body


@pytest.fixture
def fleet_body() -> FleetBody:
    return make_fleet_body


@pytest.fixture
def now() -> datetime:
    return NOW
