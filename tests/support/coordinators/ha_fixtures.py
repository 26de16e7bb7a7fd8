"""Pytest fixtures for the replicated coordinator (loaded from the root conftest as a plugin).

- ``etcd_cluster`` (session): three real etcd members on loopback (``EtcdCluster``), started once on first use,
  stopped by PID at the end. fsync is off: these tests are about the coordinator's failover, not etcd's disk (the
  benchmarks keep it on). Tests that never ask for it never start it.
- ``etcd_prefix``: a prefix of its own per test, so tests share the cluster without sharing state.
- ``ha``: ``ha(count=2, *flags)`` starts replicas on the test's prefix and a ``ServiceProxy`` before them; both
  are stopped when the test ends.

Without etcd the tests are skipped with one line saying how to get it; with ``CI=true`` that is a failure.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.kube_fixtures import unavailable

from berth.operator.local.etcd_cluster import EtcdCluster, etcd_binary
from berth.operator.local.replicas import Replicas, ServiceProxy

HOW_TO_GET_ETCD = "etcd is not on PATH (make install runs scripts/ensure-etcd.sh; or set BERTH_ETCD)"


@pytest.fixture(scope="session")
def etcd_cluster() -> Iterator[EtcdCluster]:
    if etcd_binary() is None:
        unavailable(HOW_TO_GET_ETCD)
    workdir = Path(tempfile.mkdtemp(prefix="berth-etcd-"))
    cluster = EtcdCluster(workdir, 3, fsync=False)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def etcd_prefix() -> str:
    return f"/berth-test-{uuid.uuid4().hex[:12]}/"


@dataclass
class HaSetup:
    replicas: Replicas
    service: ServiceProxy
    endpoints: str
    prefix: str


@pytest.fixture
def ha(
    etcd_cluster: EtcdCluster, etcd_prefix: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[..., HaSetup]]:
    started: list[HaSetup] = []

    def start(count: int = 2, *flags: str, lease_ttl_s: int = 3, manual_clock: bool = False) -> HaSetup:
        replicas = Replicas(
            tmp_path / f"ha-{len(started)}",
            etcd_cluster.endpoints_flag,
            etcd_prefix,
            count,
            *flags,
            lease_ttl_s=lease_ttl_s,
            manual_clock=manual_clock,
        )
        setup = HaSetup(replicas, ServiceProxy(lambda: replicas.processes), etcd_cluster.endpoints_flag, etcd_prefix)
        started.append(setup)
        replicas.start()
        replicas.active()
        setup.service.start()
        return setup

    yield start
    report = getattr(request.node, "rep_call", None)
    for setup in started:
        if report is not None and report.failed:
            print(setup.replicas.stderr()[-20_000:])
        setup.service.stop()
        setup.replicas.stop()
