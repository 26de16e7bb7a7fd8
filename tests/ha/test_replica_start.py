"""Starting a replica on etcd: settings that cannot work, and a prefix that is not a Berth store, are one line on
stderr and exit 2 (docs/api.md §10); a replica that is not the active one is up, says so, and serves nobody."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

import aiohttp
import pytest
from support.api import Api
from support.ha_fixtures import HaSetup
from support.metrics_text import samples

from berth.coordinator.store.etcd import EtcdClient
from berth.coordinator.store.etcd.client import b64
from berth.operator.local.etcd_cluster import EtcdCluster

pytestmark = [pytest.mark.etcd, pytest.mark.timeout(120)]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "berth.coordinator.command.main", "--port", "0", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ((), "give either --data-dir"),
        (("--data-dir", "/nonexistent", "--etcd-endpoints", "http://127.0.0.1:1"), "give either --data-dir"),
        (("--etcd-endpoints", "http://127.0.0.1:1", "--group-metadata-max-bytes", "0"), "--group-metadata-max-bytes"),
        (("--etcd-endpoints", "http://127.0.0.1:1", "--etcd-max-request-bytes", "1572864"), "at most"),
        (("--etcd-endpoints", "http://127.0.0.1:1", "--etcd-prefix", "/no-slash"), "must end with '/'"),
        (("--etcd-endpoints", "http://127.0.0.1:1", "--etcd-lease-ttl-s", "1"), "at least 2"),
    ],
)
def test_settings_that_cannot_work_are_one_line_and_exit_2(args: tuple[str, ...], says: str) -> None:
    result = run(*args)
    assert result.returncode == 2
    assert says in result.stderr and result.stderr.count("\n") == 1


def test_a_prefix_that_is_not_a_berth_store_is_refused(etcd_cluster: EtcdCluster, etcd_prefix: str) -> None:
    client = EtcdClient(etcd_cluster.endpoints)
    client.txn([], [{"request_put": {"key": b64(f"{etcd_prefix}someone-else".encode()), "value": b64(b"x")}}])
    result = run("--etcd-endpoints", etcd_cluster.endpoints_flag, "--etcd-prefix", etcd_prefix)
    assert result.returncode == 2
    assert "not a Berth store" in result.stderr and result.stderr.count("\n") == 1


async def test_a_standby_is_not_ready_and_answers_not_coordinator_on_a_fresh_connection(
    ha: Callable[..., HaSetup],
) -> None:
    setup = ha(2)
    active = setup.replicas.active()
    standby = setup.replicas.standbys(active)[0]
    async with aiohttp.ClientSession() as session:
        api = Api(session, standby.url)
        status, ready = await api.get("/readyz")
        assert (status, ready) == (503, {"status": "standby"})
        async with session.post(
            api.url(api.group_path("g", "/heartbeat")), json={"member_id": "m", "generation_id": 1}
        ) as answer:
            assert answer.headers.get("Connection") == "close"  # the client's next request goes to the Service
            assert (await answer.json())["error"] == "NOT_COORDINATOR"
        assert (await api.describe("g"))["error"] == "NOT_COORDINATOR"
        status, body = await api.get("/v1/journal")
        assert (status, body["error"]) == (503, "NOT_COORDINATOR")
        metrics = await (await session.get(f"{standby.probe_url}/metrics")).text()
        assert (samples(metrics)["berth_active"], samples(metrics)["berth_ready"]) == (0, 0)
        metrics = await (await session.get(f"{active.probe_url}/metrics")).text()
        assert (samples(metrics)["berth_active"], samples(metrics)["berth_terms_total"]) == (1, 1)
