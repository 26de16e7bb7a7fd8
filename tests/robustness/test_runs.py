"""Robustness runs with fixed seeds and fixed faults: every fault kind on its topology, checked.

``make test`` runs two (``sqlite-11``: kill -9, a full disk, a crash point, clients partitioned, a clock jump, delay;
``replicated-22``: the leader key deleted, etcd out of space, kill -9, clients partitioned); the other two are marked
``soak`` and run first in ``make robustness``, which then runs hundreds with faults the seeds pick
(docs/reliability.md, "Track record"). Each run takes half a minute: real processes in network namespaces of
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
#: The runs ``make test`` leaves to ``make robustness`` (about 100 s of its budget).
ROBUSTNESS_ONLY = {12, 21}


@pytest.mark.parametrize(
    ("seed", "kind", "faults"),
    [pytest.param(*r, id=f"{r[1]}-{r[0]}", marks=[pytest.mark.soak] if r[0] in ROBUSTNESS_ONLY else []) for r in RUNS],
)
@pytest.mark.usefixtures("lab_ready")
async def test_a_run_with_these_faults_breaks_no_guarantee(seed: int, kind: str, faults: list[str]) -> None:
    outcome = await run(seed, kind=kind, fault_kinds=faults, seconds=15)
    print(outcome.line())
    for said in outcome.said:
        print(f"  fault: {said}")
    assert outcome.operations > 500  # the loads ran
    assert outcome.harness_failures == []
    assert outcome.violations == [], f"{outcome.line()}; history and logs: {outcome.history}"
