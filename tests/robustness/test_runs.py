"""A few robustness runs with fixed seeds and fixed faults, in ``make test``: every fault kind on its topology, checked.

``make robustness`` runs hundreds with faults the seeds pick (docs/reliability.md, "Track record"); these keep every
kind of fault in the suite on every change. Each run takes half a minute: real processes in network namespaces of
their own, real etcd, a real loop-mounted disk. A failing run prints its seed, its faults, each violation and where
its history and logs were kept; ``cd tests && python -m robustness --runs 1 --seed SEED --kind KIND --faults F,G``
repeats it alone.
"""

from __future__ import annotations

import pytest

from robustness.run import run

pytestmark = [pytest.mark.slow, pytest.mark.etcd, pytest.mark.timeout(300)]

#: (seed, topology, faults): every fault kind of the SQLite coordinator, and the replicated one's that matter most.
RUNS = [
    (11, "sqlite", ["kill", "disk_full", "crash_point", "partition_clients", "clock_jump", "delay"]),
    (12, "sqlite", ["disk_stall", "freeze", "graceful", "packet_loss", "rate_limit"]),
    (21, "replicated", ["freeze", "etcd_quorum_loss", "partition_replica_from_etcd", "crash_point", "clock_jump"]),
    (22, "replicated", ["leader_key_deleted", "etcd_out_of_space", "kill", "partition_clients"]),
]


@pytest.mark.parametrize(("seed", "kind", "faults"), RUNS, ids=[f"{k}-{s}" for s, k, _ in RUNS])
@pytest.mark.usefixtures("lab_ready")
async def test_a_run_with_these_faults_breaks_no_guarantee(seed: int, kind: str, faults: list[str]) -> None:
    outcome = await run(seed, kind=kind, fault_kinds=faults, seconds=15)
    print(outcome.line())
    for said in outcome.said:
        print(f"  fault: {said}")
    assert outcome.operations > 500  # the loads ran
    assert outcome.harness_failures == []
    assert outcome.violations == [], f"{outcome.line()}; history and logs: {outcome.history}"
