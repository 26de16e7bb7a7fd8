"""The node tier's own logic that needs no node: which files an image's key covers (.dockerignore as Docker reads
it), which left-behind nodes the reaper ends (never a live run's), the ledger read from example consumers' logs, and
what the cluster DNS stand-in answers from its mirrors.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from support import node_dns, node_reap
from support.node_images import context_files
from support.node_members import acknowledged_before, commits, lost, surfaced


def test_the_key_covers_the_files_docker_sends_and_no_other(tmp_path: Path) -> None:
    (tmp_path / ".dockerignore").write_text(
        "# allowlist\n*\n!pyproject.toml\n!README.md\n!coordinator/\n**/__pycache__\n**/*.py[cod]\n"
    )
    for name in (
        "pyproject.toml",
        "README.md",
        "Makefile",
        "coordinator/berth/a.py",
        "coordinator/berth/__pycache__/a.cpython-311.pyc",
        "coordinator/berth/b.pyc",
        "tests/unit/coordinator/test_a.py",  # a directory named like an allowed one, elsewhere: left out
        "charts/berth/README.md",  # a file named like an allowed one, elsewhere: left out
        ".venv/lib/site-packages/kafka/coordinator/base.py",
    ):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(name)
    assert [p.relative_to(tmp_path).as_posix() for p in context_files(tmp_path)] == [
        "README.md",
        "coordinator/berth/a.py",
        "pyproject.toml",
    ]


def test_without_a_dockerignore_the_whole_directory_is_the_context(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    (tmp_path / "sub" / "x").write_text("x")
    assert [p.relative_to(tmp_path).as_posix() for p in context_files(tmp_path)] == ["Dockerfile", "sub/x"]


@pytest.fixture
def records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(node_reap, "RECORDS", tmp_path / "records")
    monkeypatch.setattr(node_reap, "NETNS_DIR", tmp_path / "netns")
    return tmp_path / "records"


def test_the_reaper_ends_a_dead_runs_node_and_leaves_a_live_runs_alone(tmp_path: Path, records: Path) -> None:
    dead_owner = subprocess.Popen([sys.executable, "-c", "pass"])
    dead_owner.wait()
    workdir, live_workdir = tmp_path / "dead" / "node", tmp_path / "live" / "node"
    for directory in (workdir, live_workdir):
        (directory / "kubelet" / "pods").mkdir(parents=True)
    # A process of the dead run (its command line names the work directory), and one of the live run.
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    orphan = subprocess.Popen([*sleeper, str(workdir / "plane" / "etcd")])
    survivor = subprocess.Popen([*sleeper, str(live_workdir / "plane" / "etcd")])
    try:
        node_reap.register("berth-node-live0abc", "bnlive0abch", live_workdir, (live_workdir.parent,))
        dead = node_reap.Record(
            "berth-node-dead0abc", "bndead0abch", str(workdir), dead_owner.pid, "1", (str(workdir.parent),)
        )
        records.mkdir(exist_ok=True)
        dead.path.write_text(json.dumps(asdict(dead)))

        assert node_reap.reap_stale() == ["berth-node-dead0abc"]
        assert orphan.wait(timeout=10) == -9
        assert not workdir.parent.exists() and not dead.path.exists()
        assert survivor.poll() is None and live_workdir.exists()
        assert (records / "berth-node-live0abc.json").exists()
        node_reap.unregister("berth-node-live0abc")
        assert list(records.iterdir()) == []
    finally:
        for process in (orphan, survivor):
            process.kill()
            process.wait()


def test_a_reused_pid_is_not_taken_for_the_owner(records: Path) -> None:
    record = node_reap.register("berth-node-x", "bnx", Path("/nonexistent"))
    assert record.owner_alive()
    reused = node_reap.Record(record.netns, record.host_if, record.workdir, record.owner, "0")
    assert not reused.owner_alive()


def test_the_ledger_counts_what_the_example_acknowledged_and_what_a_user_would_see() -> None:
    t = time.time()
    logs = {
        "orders-0": [
            (t, "orders-0 generation 1 (leader) owns orders[0,1] (+orders[0,1] -nothing)"),
            (t + 1, "orders-0 committed orders[0]=10 orders[1]=10"),
            (t + 3, "orders-0 committed orders[0]=20 orders[1]=20"),
        ],
        "orders-1": [
            (t, "orders-1 generation 1 owns orders[2] (+orders[2] -nothing)"),
            (t + 2, "orders-1 committed orders[2]=10"),
            (t + 4, "WARNING:berth.coordinator.client.coordination:group orders: coordinator unavailable"),
            (t + 5, "orders-1 generation 2 owns orders[2] (+nothing -nothing)"),
        ],
    }
    found = commits(logs)
    assert [c.pod for c in found] == ["orders-0", "orders-1", "orders-0"]
    acknowledged = acknowledged_before(found, t + 2.5)
    assert acknowledged == {("orders", 0): 10, ("orders", 1): 10, ("orders", 2): 10}
    assert lost(acknowledged, {("orders", 0): 20, ("orders", 1): 10, ("orders", 2): 10}) == {}
    assert lost(acknowledged, {("orders", 0): 20, ("orders", 1): 0}) == {
        "orders[1]": "acknowledged 10, committed 0",
        "orders[2]": "acknowledged 10, committed None",
    }
    assert surfaced(logs) == [
        "orders-1: WARNING:berth.coordinator.client.coordination:group orders: coordinator unavailable",
        "orders-1: orders-1 generation 2 owns orders[2] (+nothing -nothing)",
    ]
    assert surfaced(logs, since=t + 4.5) == ["orders-1: orders-1 generation 2 owns orders[2] (+nothing -nothing)"]


def test_an_unrecorded_namespace_is_reaped_only_when_no_live_pid_has_its_remainder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The namespace keeps the owner's pid modulo 100,000: pid 112212 lives, so "12212" is not provably dead.
    monkeypatch.setattr(node_reap, "_pids", lambda: [1, 112212])
    assert node_reap._pid_may_live(12212)
    monkeypatch.setattr(node_reap, "_pids", lambda: [1, 112213])
    assert not node_reap._pid_may_live(12212)


def _mirror(objects: dict[tuple[str, str], Any]) -> node_dns.Mirror:
    mirror = node_dns.Mirror("test", lambda **_: None)
    mirror.objects = objects
    return mirror


def test_the_cluster_dns_stand_in_answers_from_its_mirrors_as_coredns_would() -> None:
    def service(cluster_ip: str) -> Any:
        return SimpleNamespace(spec=SimpleNamespace(cluster_ip=cluster_ip))

    def address(ip: str, hostname: str | None) -> Any:
        return SimpleNamespace(ip=ip, hostname=hostname)

    services = _mirror({("berth", "coordinator"): service("10.0.0.7"), ("shop", "orders"): service("None")})
    endpoints = _mirror(
        {
            ("shop", "orders"): SimpleNamespace(
                subsets=[
                    SimpleNamespace(
                        addresses=[address("10.1.0.2", "orders-0")],
                        not_ready_addresses=[address("10.1.0.3", "orders-1")],
                    )
                ]
            )
        }
    )
    lookup = node_dns.Resolver(services, endpoints, "cluster.local").lookup
    assert lookup("coordinator.berth.svc.cluster.local") == ["10.0.0.7"]
    assert lookup("orders.shop.svc.cluster.local") == ["10.1.0.2", "10.1.0.3"]  # headless: its endpoints
    assert lookup("orders-1.orders.shop.svc.cluster.local") == ["10.1.0.3"]  # a StatefulSet's pod
    assert lookup("orders-7.orders.shop.svc.cluster.local") is None
    assert lookup("coordinator.berth.shop.svc.cluster.local") is None  # a search-path candidate: NXDOMAIN
    assert lookup("example.com") is None
    del services.objects[("berth", "coordinator")]  # a watch's DELETED
    assert lookup("coordinator.berth.svc.cluster.local") is None
