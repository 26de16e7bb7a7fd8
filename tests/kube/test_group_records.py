"""The owner records of Kafka groups (``kube.group_records``) on the real API server, as the chart's ServiceAccount:
of many fleets claiming one group at once exactly one wins (the API server admits one create per name), a release
by anyone but the owner changes nothing, and a Lease of another key under the same name is never taken over."""

from __future__ import annotations

import asyncio
import hashlib

import pytest
from support.fake_kubelet import api_client
from support.kube import Kube

from berth.operator.adapters.kube.group_records import LeaseGroupRecords, record_name
from berth.operator.planners.observations import GroupOwnerRef

pytestmark = pytest.mark.kube

CLUSTER = "kafka://kafka-0.kafka.data:9092"
OWNERS = "berth-group-owners"  # where the chart grants its ServiceAccount the records (its default)


async def test_of_fleets_claiming_one_group_at_once_exactly_one_wins_and_only_it_releases(
    operator_identity: Kube, kube: Kube
) -> None:
    records = [LeaseGroupRecords(api_client(operator_identity.kubeconfig), OWNERS) for _ in range(8)]
    group = f"records-{hashlib.sha256(str(id(records)).encode()).hexdigest()[:8]}"
    fleets = [GroupOwnerRef(f"team-{n}", "orders", f"uid-{n}") for n in range(8)]
    winners = await asyncio.gather(*(r.claim(CLUSTER, group, f) for r, f in zip(records, fleets, strict=True)))
    assert len({winner.uid for winner in winners}) == 1, winners  # every claimant sees the same owner
    (owner,) = set(winners)
    lease = kube.get("lease", record_name(CLUSTER, group), namespace=OWNERS)
    assert lease["spec"]["holderIdentity"] == owner.uid
    assert lease["metadata"]["annotations"]["berth.dev/group-id"] == group

    other = next(f for f in fleets if f != owner)
    await records[0].release(CLUSTER, group, other.uid)
    assert await LeaseGroupRecords(api_client(operator_identity.kubeconfig), OWNERS).owner(CLUSTER, group) == owner
    await records[0].release(CLUSTER, group, owner.uid)
    assert kube.get("lease", record_name(CLUSTER, group), namespace=OWNERS) is None
    fresh = LeaseGroupRecords(api_client(operator_identity.kubeconfig), OWNERS)
    assert await fresh.owner(CLUSTER, group) is None
    assert await fresh.claim(CLUSTER, group, other) == other


async def test_a_lease_of_another_key_under_the_records_name_is_nobodys_to_take(
    operator_identity: Kube, kube: Kube
) -> None:
    group = "records-squatted"
    kube.apply(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": record_name(CLUSTER, group), "annotations": {"berth.dev/group-id": "something-else"}},
            "spec": {"holderIdentity": "someone"},
        },
        namespace=OWNERS,
    )
    records = LeaseGroupRecords(api_client(operator_identity.kubeconfig), OWNERS)
    me = GroupOwnerRef("shop", "orders", "uid-me")
    owner = await records.claim(CLUSTER, group, me)
    assert owner != me and owner.uid == "someone" and owner.namespace == ""  # never judged stale, never ours
    await records.release(CLUSTER, group, me.uid)
    assert kube.get("lease", record_name(CLUSTER, group), namespace=OWNERS) is not None
