"""Moving a single-replica install to replicas on etcd (docs/high-availability.md "Moving to HA"), as an operator
would: stop the coordinator, ``berth-coordinator copy-to-etcd``, start the replicas on the prefix. Every group comes
back as a restart brings it back (static member map, generation, assignments, offsets, expected members, owner,
the journal with its seq numbers), and the members carry on without a rebalance. The copy refuses a running
coordinator's data dir and a prefix that is not empty, changing nothing; the data dir it copied is refused by a
coordinator afterwards unless told (``--serve-copied-data-dir``)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import aiohttp
import pytest
from support.api import Api
from support.coordinator import CoordinatorProcess
from support.ha_fixtures import HaSetup

from berth.operator.local.etcd_cluster import EtcdCluster

pytestmark = [pytest.mark.etcd, pytest.mark.slow, pytest.mark.timeout(180)]


def copy_to_etcd(data_dir: Path, endpoints: str, prefix: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "berth.coordinator.command.main",
            "copy-to-etcd",
            "--data-dir",
            str(data_dir),
            "--etcd-endpoints",
            endpoints,
            "--etcd-prefix",
            prefix,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def serve(data_dir: Path) -> subprocess.CompletedProcess[str]:
    """``berth-coordinator --data-dir DIR``, to its end (it refuses a copied data dir: it must end by itself)."""
    argv = [sys.executable, "-m", "berth.coordinator.command.main", "--data-dir", str(data_dir), "--port", "0"]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


async def test_a_single_replica_install_moves_to_etcd_without_losing_a_group(
    tmp_path: Path, etcd_cluster: EtcdCluster, etcd_prefix: str, ha: Callable[..., HaSetup]
) -> None:
    data_dir = tmp_path / "single"
    single = CoordinatorProcess(data_dir).start()
    async with aiohttp.ClientSession() as session:
        api = Api(session, single.url)
        joined = await api.form_static_group("orders", ["orders-0", "orders-1", "orders-2"])
        generation = joined["orders-0"]["generation_id"]
        member = joined["orders-0"]
        _, answer = await api.post(
            api.group_path("orders", "/offsets"),
            {
                "member_id": member["member_id"],
                "generation_id": generation,
                "group_instance_id": "orders-0",
                "topics": [
                    {"name": "t", "partitions": [{"partition_index": p, "committed_offset": 10 + p} for p in range(4)]}
                ],
            },
        )
        assert answer["error"] == "NONE"
        owner = {"namespace": "team-a", "name": "orders", "uid": "uid-1", "adopt": True}  # a group in use
        assert (await api.request("PUT", api.group_path("orders", "/owner"), owner))[0] == 200
        assert (
            await api.request("PUT", api.group_path("later", "/expected-members"), {"group_instance_ids": ["later-0"]})
        )[0] == 200
        described = await api.describe("orders")
        journal = await api.whole_journal()

        refused = copy_to_etcd(data_dir, etcd_cluster.endpoints_flag, etcd_prefix)  # the coordinator still runs
        assert refused.returncode == 2 and "in use by another Berth coordinator" in refused.stderr
        assert single.stop() == 0

    copied = copy_to_etcd(data_dir, etcd_cluster.endpoints_flag, etcd_prefix)
    assert copied.returncode == 0, copied.stderr
    assert (
        f"2 groups, 3 members, 4 offsets, 1 expected-members lists, journal seq 1..{journal[-1]['seq']}"
        in copied.stdout
    )
    again = copy_to_etcd(data_dir, etcd_cluster.endpoints_flag, etcd_prefix)
    assert again.returncode == 2 and "is not empty" in again.stderr
    assert again.stderr.count("\n") == 1

    # The copied data dir is not served again by mistake (a reinstall without coordinator.ha): one line naming the
    # flag that serves it anyway, and nothing changed.
    before = sorted((p.name, p.stat().st_size) for p in data_dir.iterdir())
    served = serve(data_dir)
    assert served.returncode == 2 and served.stderr.count("\n") == 1, served.stderr
    assert f"was copied to etcd prefix {etcd_prefix}" in served.stderr and "--serve-copied-data-dir" in served.stderr
    assert sorted((p.name, p.stat().st_size) for p in data_dir.iterdir()) == before
    told = CoordinatorProcess(data_dir, "--serve-copied-data-dir").start()
    async with aiohttp.ClientSession() as session:
        assert (await Api(session, told.url).describe("orders"))["members"] == described["members"]
    assert told.stop() == 0

    setup = ha(2)
    async with aiohttp.ClientSession() as session:
        api = Api(session, setup.service.url)
        assert await api.describe("orders") == described
        assert (await api.whole_journal())[: len(journal)] == journal
        _, fetched = await api.get(api.group_path("orders", "/offsets?topic=t"))
        assert {p["partition_index"]: p["committed_offset"] for p in fetched["topics"][0]["partitions"]} == {
            p: 10 + p for p in range(4)
        }
        _, expected = await api.get(api.group_path("later", "/expected-members"))
        assert expected["group_instance_ids"] == ["later-0"]
        for instance, member in joined.items():  # the members carry on: no rebalance
            assert (await api.heartbeat("orders", member["member_id"], generation, instance))["error"] == "NONE"
