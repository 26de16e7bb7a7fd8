"""Fixtures of the node tier's scenarios: a fresh namespace per test with the group token, and its fleet."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest
from support.node_stage import GROUP_TOKEN, FleetStage, PodWatch, Release

_fleets = itertools.count(1)


@pytest.fixture
def stage(berth_release: Release, request: pytest.FixtureRequest) -> Iterator[FleetStage]:
    """A namespace holding the ``orders`` group token (docs/install.md §3) for a fleet ``orders-<n>`` of its own;
    the fleet is deleted afterwards (its pods end in the background)."""
    kube = berth_release.kube
    number = next(_fleets)
    namespace = kube.create_namespace(f"shop-{number}")
    token = berth_release.secret_value(f"token-{GROUP_TOKEN}")
    kube.kubectl("-n", namespace, "create", "secret", "generic", "orders-token", f"--from-literal=token={token}")
    watch = PodWatch(kube.kubeconfig, namespace)
    stage = FleetStage(berth_release, namespace, f"orders-{number}", watch)
    try:
        yield stage
    finally:
        watch.stop()
        kube.kubectl("-n", namespace, "delete", "cf", "--all", "--wait=false", check=False)
