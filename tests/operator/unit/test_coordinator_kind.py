"""What differs between coordinators is one value, the kind, and the decisions made from it in one planner."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from berth.operator.planners.coordinator_kind import (
    BERTH,
    KAFKA_CLASSIC,
    UnmanagedGroup,
    deletes_group,
    kind_conditions,
    kind_of_group,
)
from berth.operator.planners.fleet_status import Refusal
from berth.operator.planners.observations import GroupDescription, GroupProtocol
from berth.operator.spec import parse_fleet

FleetBody = Callable[..., dict[str, Any]]
WHERE = "kafka://kafka-0.kafka.data:9092"


def described(protocol: GroupProtocol) -> GroupDescription:
    return GroupDescription("orders", "Stable", 3, None, (), protocol=protocol)


@pytest.mark.parametrize("kind", [BERTH, KAFKA_CLASSIC], ids=lambda kind: kind.name)
def test_a_classic_group_is_managed_as_its_coordinators_kind(kind: object) -> None:
    assert kind_of_group(kind, described(GroupProtocol.CLASSIC), where=WHERE) is kind  # type: ignore[arg-type]


def test_a_consumer_protocol_group_is_an_unmanaged_refusal_naming_the_group_and_the_cluster() -> None:
    with pytest.raises(UnmanagedGroup) as raised:
        kind_of_group(KAFKA_CLASSIC, described(GroupProtocol.CONSUMER), where=WHERE)
    assert isinstance(raised.value, Refusal)
    assert raised.value.reason == "ConsumerProtocolGroup"
    assert raised.value.message.startswith(f"group orders on {WHERE} uses the KIP-848 consumer protocol")


def test_the_group_is_deleted_by_default_on_berths_coordinator_only_and_the_spec_decides_otherwise(
    fleet_body: FleetBody,
) -> None:
    unset = parse_fleet(fleet_body())
    assert (deletes_group(unset, BERTH), deletes_group(unset, KAFKA_CLASSIC)) == (True, False)
    keep = parse_fleet(fleet_body(spec={"deleteGroupOnDelete": False}))
    delete = parse_fleet(fleet_body(spec={"deleteGroupOnDelete": True}))
    assert (deletes_group(keep, BERTH), deletes_group(delete, KAFKA_CLASSIC)) == (False, True)


def test_only_a_kind_without_pre_registration_says_so_and_what_a_scale_up_costs(fleet_body: FleetBody) -> None:
    assert kind_conditions(parse_fleet(fleet_body()), BERTH) == ()
    (ordered,) = kind_conditions(parse_fleet(fleet_body()), KAFKA_CLASSIC)
    (parallel,) = kind_conditions(parse_fleet(fleet_body(spec={"podManagementPolicy": "Parallel"})), KAFKA_CLASSIC)
    assert (ordered.type, ordered.status, ordered.reason) == ("PreRegistration", "False", "NotSupportedByKafka")
    assert "each new pod costs a rebalance" in ordered.message
    assert "about one rebalance" in parallel.message


def test_writes_name_the_fleet_as_owner_only_where_the_kind_records_owners() -> None:
    assert (BERTH.owner_uid("u-1"), KAFKA_CLASSIC.owner_uid("u-1")) == ("u-1", None)
