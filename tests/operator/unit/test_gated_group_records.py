"""The owner records of Kafka groups (Leases the operator keeps, ``kube.group_records``) are writes like any other:
only the leader makes them. The composition root hands them the gated API client, and through a closed gate a
claim or a release sends nothing but reads."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import kubernetes
import pytest

from berth.operator.adapters.kube.calls import GatedApiClient
from berth.operator.adapters.kube.group_records import COORDINATOR, GROUP_ID, LeaseGroupRecords, record_name
from berth.operator.adapters.leadership.leader import LeaderGate
from berth.operator.command.app import build_service
from berth.operator.command.options import parse_options
from berth.operator.planners.observations import GroupOwnerRef
from berth.operator.ports import NotLeading

KAFKA = "kafka://cluster-a"
OWNER = GroupOwnerRef("shop", "orders", "uid-1")


class Response:
    def __init__(self, body: dict[str, Any]) -> None:
        self.data = json.dumps(body).encode()
        self.status = 200
        self.response = self  # what the client hands back without preloading


def recording_client(monkeypatch: pytest.MonkeyPatch, gate: LeaderGate) -> tuple[GatedApiClient, list[str]]:
    """A gated client whose requests reach no server: each is recorded (method), a read answers the group's record."""
    sent: list[str] = []
    lease = {
        "metadata": {
            "name": record_name(KAFKA, "orders"),
            "uid": "lease-uid",
            "resourceVersion": "7",
            "annotations": {COORDINATOR: KAFKA, GROUP_ID: "orders"},
        },
        "spec": {"holderIdentity": OWNER.uid},
    }

    def call_api(self: object, method: str, url: str, *args: object, **kwargs: object) -> Response:
        sent.append(method)
        return Response(lease)

    monkeypatch.setattr(kubernetes.client.ApiClient, "call_api", call_api)
    return GatedApiClient(kubernetes.client.Configuration(), user_agent="berth-operator/test", gate=gate), sent


def test_a_standby_neither_claims_nor_releases_a_kafka_group(monkeypatch: pytest.MonkeyPatch) -> None:
    gate = LeaderGate()  # closed: this replica does not hold the leader's Lease
    client, sent = recording_client(monkeypatch, gate)
    records = LeaseGroupRecords(client, "berth")
    with pytest.raises(NotLeading):
        asyncio.run(records.claim(KAFKA, "orders", OWNER))
    with pytest.raises(NotLeading):
        asyncio.run(records.release(KAFKA, "orders", OWNER.uid))
    assert "POST" not in sent and "DELETE" not in sent and set(sent) <= {"GET"}

    gate.renewed(sent_at=gate.clock(), renew_deadline_s=60)  # the leader: the same calls go out
    asyncio.run(records.release(KAFKA, "orders", OWNER.uid))
    assert sent[-1] == "DELETE"


def test_the_composition_root_keeps_the_records_behind_the_gate(monkeypatch: pytest.MonkeyPatch) -> None:
    gate = LeaderGate()
    client, _ = recording_client(monkeypatch, gate)
    options = parse_options(["--group-owners-namespace", "owners"], {"POD_NAMESPACE": "berth"})
    service = build_service(options, client, gate=gate)
    try:
        records = service.context.ports.records
        assert isinstance(records, LeaseGroupRecords) and records.namespace == "owners"
        assert records.leases.api_client is client
    finally:
        asyncio.run(service.close())
