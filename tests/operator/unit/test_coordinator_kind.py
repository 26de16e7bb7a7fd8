"""What differs between coordinators is one value, the kind, and the decisions made from it in one planner."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from berth.operator.planners.coordinator_kind import (
    BERTH,
    KAFKA_CLASSIC,
    KAFKA_CONSUMER,
    UnmanagedGroup,
    deletes_group,
    group_heartbeat_ms,
    kind_conditions,
    kind_of_group,
    protocol_conditions,
    session_bounds_for,
)
from berth.operator.planners.fleet_status import Refusal
from berth.operator.planners.observations import (
    ConsumerProtocolBounds,
    CoordinatorBounds,
    GroupDescription,
    GroupProtocol,
)
from berth.operator.spec.fleet import parse_fleet

FleetBody = Callable[..., dict[str, Any]]
WHERE = "kafka://kafka-0.kafka.data:9092"


def described(protocol: GroupProtocol) -> GroupDescription:
    return GroupDescription("orders", "Stable", 3, None, (), protocol=protocol)


NOT_FORMED = GroupDescription("orders", "Dead", -1, None, (), exists=False)


@pytest.mark.parametrize("kind", [BERTH, KAFKA_CLASSIC], ids=lambda kind: kind.name)
def test_a_classic_group_is_managed_as_its_coordinators_kind(kind: object) -> None:
    assert kind_of_group(kind, described(GroupProtocol.CLASSIC), where=WHERE) is kind  # type: ignore[arg-type]


def test_on_kafka_the_kind_follows_the_protocol_the_broker_reports_whatever_the_fleet_declares() -> None:
    for declared in GroupProtocol.CLASSIC, GroupProtocol.CONSUMER:
        consumer = kind_of_group(KAFKA_CLASSIC, described(GroupProtocol.CONSUMER), where=WHERE, declared=declared)
        classic = kind_of_group(KAFKA_CLASSIC, described(GroupProtocol.CLASSIC), where=WHERE, declared=declared)
        assert (consumer, classic) == (KAFKA_CONSUMER, KAFKA_CLASSIC)
    # A group that converts is followed from the describe that shows it, either way.
    assert kind_of_group(KAFKA_CONSUMER, described(GroupProtocol.CLASSIC), where=WHERE) is KAFKA_CLASSIC


def test_a_group_not_formed_yet_is_managed_as_the_protocol_the_fleet_declares() -> None:
    assert kind_of_group(KAFKA_CLASSIC, NOT_FORMED, where=WHERE, declared=GroupProtocol.CONSUMER) is KAFKA_CONSUMER
    assert kind_of_group(KAFKA_CLASSIC, NOT_FORMED, where=WHERE) is KAFKA_CLASSIC
    assert kind_of_group(BERTH, NOT_FORMED, where=WHERE) is BERTH


def test_a_streams_group_is_refused_saying_kafka_has_no_admin_removal_for_it() -> None:
    with pytest.raises(UnmanagedGroup) as raised:
        kind_of_group(KAFKA_CLASSIC, described(GroupProtocol.STREAMS), where=WHERE)
    assert isinstance(raised.value, Refusal)
    assert raised.value.reason == "StreamsProtocolGroup"
    assert raised.value.message.startswith(f"group orders on {WHERE} uses Kafka's streams protocol")
    assert "no admin removal" in raised.value.message


def test_a_consumer_protocol_group_on_berths_coordinator_is_refused() -> None:
    with pytest.raises(UnmanagedGroup) as raised:
        kind_of_group(BERTH, NOT_FORMED, where="https://berth", declared=GroupProtocol.CONSUMER)
    assert raised.value.reason == "ConsumerProtocolGroup"


def test_a_consumer_protocol_group_keeps_its_session_timeout_on_the_group_within_the_brokers_consumer_bounds() -> None:
    assert (KAFKA_CONSUMER.session_timeout_on_group, KAFKA_CLASSIC.session_timeout_on_group) == (True, False)
    assert (KAFKA_CONSUMER.instance_ids_held_until_expiry, KAFKA_CLASSIC.reports_generation) == (True, False)
    broker = CoordinatorBounds(3_000, 1_800_000, consumer=ConsumerProtocolBounds(10_000, 90_000, 1_000, 15_000))
    bounds = session_bounds_for(KAFKA_CONSUMER, broker)
    assert (bounds.min_session_timeout_ms, bounds.max_session_timeout_ms) == (10_000, 90_000)
    assert bounds.max_setting == "group.consumer.max.session.timeout.ms"
    assert session_bounds_for(KAFKA_CLASSIC, broker) is broker
    # Kafka's defaults (45 and 60 s) when the broker did not say.
    defaults = session_bounds_for(KAFKA_CONSUMER, CoordinatorBounds(6_000, 1_800_000))
    assert (defaults.min_session_timeout_ms, defaults.max_session_timeout_ms) == (45_000, 60_000)


@pytest.mark.parametrize(
    ("session_ms", "consumer", "expected"),
    [
        (45_000, ConsumerProtocolBounds(), 5_000),  # a third would be 15 s: 3 s preferred, raised to the minimum
        (10_000, ConsumerProtocolBounds(5_000, 60_000, 1_000, 15_000), 3_000),  # the preferred 3 s
        (5_000, ConsumerProtocolBounds(5_000, 60_000, 5_000, 15_000), 4_999),  # below the session, whatever else
    ],
)
def test_the_groups_heartbeat_interval_is_within_the_brokers_bounds_and_below_the_session(
    session_ms: int, consumer: ConsumerProtocolBounds, expected: int
) -> None:
    assert group_heartbeat_ms(session_ms, CoordinatorBounds(1, 2, consumer=consumer), 3_000) == expected


def test_the_group_protocol_condition_says_which_protocol_and_whether_the_pods_are_set_up_for_it(
    fleet_body: FleetBody,
) -> None:
    def kafka_fleet(protocol: str) -> Any:
        spec = {"coordinator": {"kafka": {"groupProtocol": protocol}}}
        return parse_fleet(fleet_body(spec=spec))

    (same,) = protocol_conditions(kafka_fleet("consumer"), described(GroupProtocol.CONSUMER), KAFKA_CONSUMER)
    (ahead,) = protocol_conditions(kafka_fleet("consumer"), described(GroupProtocol.CLASSIC), KAFKA_CLASSIC)
    (behind,) = protocol_conditions(kafka_fleet("classic"), described(GroupProtocol.CONSUMER), KAFKA_CONSUMER)
    assert (same.type, same.status, same.reason) == ("GroupProtocol", "True", "AsDeclared")
    assert (ahead.status, ahead.reason) == ("False", "Converting") and "still uses the classic" in ahead.message
    assert behind.status == "False" and "set groupProtocol: consumer" in behind.message
    assert protocol_conditions(parse_fleet(fleet_body()), described(GroupProtocol.CLASSIC), BERTH) == ()


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
