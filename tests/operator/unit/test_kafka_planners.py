"""The pure decisions of Kafka fleets beyond the coordinator kind: stale instance ids and fencing, lag in status, what
a pod is given (consumer protocol, Strimzi's credentials), whose credentials a connection is made of, how long a
restart was, how many rebalances a removal cost, and whether the broker lets the timeout cover what is asked."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from berth.coordinator.protocol.jaas import jaas_value
from berth.operator.planners.coordinator_kind import BERTH, KAFKA_CLASSIC, KAFKA_CONSUMER
from berth.operator.planners.coordinator_target import KafkaTarget, resolve_target
from berth.operator.planners.evidence import EvidenceState, observe_group
from berth.operator.planners.fleet_status import Refusal
from berth.operator.planners.instance_conflicts import (
    ConflictState,
    conflict_condition,
    mark_released,
    observe_instances,
    to_release,
)
from berth.operator.planners.kafka_credentials import SecretRole, checked, kafka_connection, secrets_needed
from berth.operator.planners.lag import SHOWN, lag_status
from berth.operator.planners.observations import (
    CoordinatorBounds,
    GroupDescription,
    GroupLag,
    GroupMember,
    GroupProtocol,
    PartitionLag,
    PodTimes,
)
from berth.operator.planners.restarts import Expiry, activity_by_group
from berth.operator.planners.scaling import rebalances_since_leave
from berth.operator.planners.session_timeout import sufficiency
from berth.operator.planners.sizing import SessionTimeoutDecision, SessionTimeoutSource
from berth.operator.planners.statefulset import plan_statefulset
from berth.operator.planners.status import plan_group_status
from berth.operator.spec.fleet import KafkaDefaults, OperatorDefaults, SecurityProtocol, SpecError, parse_fleet

FleetBody = Callable[..., dict[str, Any]]
NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)

DEFAULTS = OperatorDefaults(kafka=KafkaDefaults("kafka-0.kafka.data:9093", SecurityProtocol.SASL_SSL, "SCRAM-SHA-512"))
STRIMZI_JAAS = (
    'org.apache.kafka.common.security.scram.ScramLoginModule required username="orders-app" password="s3cr\\"et";'
)


def consumer_group(*members: tuple[str, str, int], epoch: int = 7) -> GroupDescription:
    return GroupDescription(
        "orders",
        "Stable",
        epoch,
        None,
        tuple(GroupMember(member_id, instance, member_epoch=e) for instance, member_id, e in members),
        protocol=GroupProtocol.CONSUMER,
        assignment_epoch=epoch,
    )


def pod(started: datetime) -> PodTimes:
    return PodTimes(created=started, started=started)


# ------------------------------------------------------------------------------------------ stale instance ids


def test_a_restarted_pod_whose_previous_member_never_left_is_unreleased_and_released_once() -> None:
    seen = NOW - timedelta(minutes=5)
    state, found = observe_instances(
        ConflictState(),
        fleet_name="orders",
        description=consumer_group(("orders-0", "m0", 7), ("orders-1", "m1", 7)),
        pods={"orders-0": pod(seen - timedelta(hours=1)), "orders-1": pod(seen - timedelta(hours=1))},
        kind=KAFKA_CONSUMER,
        now=seen,
    )
    assert found == ()
    # orders-1's process was killed and its pod replaced; the group still holds m1 (epoch 7: it never left).
    restarted = {"orders-0": pod(seen - timedelta(hours=1)), "orders-1": pod(NOW - timedelta(seconds=3))}
    state, found = observe_instances(
        state,
        fleet_name="orders",
        description=consumer_group(("orders-0", "m0", 7), ("orders-1", "m1", 7)),
        pods=restarted,
        kind=KAFKA_CONSUMER,
        now=NOW,
    )
    (stale,) = found
    assert (stale.pod, stale.reason, stale.member_id) == ("orders-1", "UnreleasedInstanceId", "m1")
    assert "refused UNRELEASED_INSTANCE_ID" in stale.message
    assert to_release(state, found) == found
    state = mark_released(state, found)
    assert to_release(state, found) == ()  # at most once per stale member
    condition = conflict_condition(found, release=True)
    assert (condition.status, condition.reason) == ("True", "UnreleasedInstanceId")
    assert condition.message.startswith("orders-1: ") and "releasing" in condition.message


@pytest.mark.parametrize(
    ("member_epoch", "first_seen", "kind"),
    [
        (-2, timedelta(minutes=5), KAFKA_CONSUMER),  # it left as a static member: the new process takes its place
        (7, timedelta(seconds=0), KAFKA_CONSUMER),  # first seen after the pod started (an operator restarted since)
        (7, timedelta(minutes=5), KAFKA_CLASSIC),  # classic: a restarted static member replaces its previous one
    ],
    ids=["left with epoch -2", "seen only since the pod started", "a classic group"],
)
def test_nothing_is_taken_for_stale_that_is_not(member_epoch: int, first_seen: timedelta, kind: Any) -> None:
    state, _ = observe_instances(
        ConflictState(),
        fleet_name="orders",
        description=consumer_group(("orders-1", "m1", 7)),
        pods={"orders-1": pod(NOW - timedelta(hours=1))},
        kind=kind,
        now=NOW - first_seen,
    )
    _, found = observe_instances(
        state,
        fleet_name="orders",
        description=consumer_group(("orders-1", "m1", member_epoch)),
        pods={"orders-1": pod(NOW - timedelta(seconds=3))},
        kind=kind,
        now=NOW,
    )
    assert found == ()
    assert conflict_condition(found, release=False).status == "False"


def test_a_member_id_changing_three_times_without_a_restart_is_fencing() -> None:
    started = pod(NOW - timedelta(hours=1))
    state = ConflictState()
    found: tuple[Any, ...] = ()
    for minute, member in enumerate(["a", "b", "a", "b"]):
        state, found = observe_instances(
            state,
            fleet_name="orders",
            description=consumer_group(("orders-2", member, 7)),
            pods={"orders-2": started},
            kind=KAFKA_CLASSIC,
            now=NOW + timedelta(minutes=minute),
        )
    (fencing,) = found
    assert (fencing.pod, fencing.reason) == ("orders-2", "InstanceIdFencing")
    assert to_release(state, found) == ()  # two live processes: which one goes is not the operator's call
    assert "FENCED_INSTANCE_ID" in conflict_condition(found, release=True).message


# ------------------------------------------------------------------------------------------------------- lag


def test_lag_in_status_is_the_total_the_count_the_largest_and_the_most_lagging_partitions_with_their_owners() -> None:
    partitions = tuple(PartitionLag("orders", p, 100, 100 + p, f"orders-{p % 2}") for p in range(30))
    lag = GroupLag((*partitions, PartitionLag("orders", 99, None, 500)))  # no commit: no lag to speak of
    shown = lag_status(lag)
    assert (shown["total"], shown["partitions"], shown["maxPartition"]) == (sum(range(30)), 30, 29)
    assert len(shown["byPartition"]) == SHOWN
    assert shown["byPartition"][0] == {"partition": "orders:29", "lag": 29, "owner": "orders-1"}
    assert lag_status(GroupLag(())) == {"total": 0, "partitions": 0, "maxPartition": 0, "byPartition": []}


# ------------------------------------------------------------------------------ pods on the consumer protocol


def strimzi_fleet(fleet_body: FleetBody, **kafka: Any) -> Any:
    return parse_fleet(fleet_body(spec={"coordinator": {"kafka": kafka}}))


def env_of(planned: Any) -> dict[str, Any]:
    return {e["name"]: e for e in planned.statefulset["spec"]["template"]["spec"]["containers"][0]["env"]}


def test_consumer_protocol_pods_say_so_and_get_no_client_session_settings(fleet_body: FleetBody) -> None:
    fleet = parse_fleet(fleet_body(spec={"coordinator": {"kafka": {"groupProtocol": "consumer"}}}))
    planned = plan_statefulset(
        fleet, operator_defaults=OperatorDefaults(kafka=KafkaDefaults("k:9092")), session_timeout_ms=45_000, replicas=3
    )
    env = env_of(planned)
    assert env["BERTH_KAFKA_GROUP_PROTOCOL"]["value"] == "consumer"
    assert not {"BERTH_SESSION_TIMEOUT_MS", "BERTH_HEARTBEAT_INTERVAL_MS"} & set(env)
    classic = parse_fleet(fleet_body(spec={"coordinator": {"kafka": {}}}))
    planned = plan_statefulset(
        classic,
        operator_defaults=OperatorDefaults(kafka=KafkaDefaults("k:9092")),
        session_timeout_ms=45_000,
        replicas=3,
    )
    assert env_of(planned)["BERTH_KAFKA_GROUP_PROTOCOL"]["value"] == "classic"
    assert env_of(planned)["BERTH_SESSION_TIMEOUT_MS"]["value"] == "45000"


def test_a_strimzi_scram_secret_gives_pods_the_password_by_reference_and_the_jaas_username_as_a_value(
    fleet_body: FleetBody,
) -> None:
    fleet = strimzi_fleet(
        fleet_body, credentialsSecretRef={"name": "orders-app"}, caSecretRef={"name": "my-cluster-cluster-ca-cert"}
    )
    planned = plan_statefulset(
        fleet, operator_defaults=DEFAULTS, session_timeout_ms=45_000, replicas=3, kafka_username="orders-app"
    )
    env = env_of(planned)
    assert env["BERTH_KAFKA_SASL_USERNAME"] == {"name": "BERTH_KAFKA_SASL_USERNAME", "value": "orders-app"}
    ref = env["BERTH_KAFKA_SASL_PASSWORD"]["valueFrom"]["secretKeyRef"]
    assert ref == {"name": "orders-app", "key": "password"}
    jaas = env["BERTH_KAFKA_SASL_JAAS_CONFIG"]["valueFrom"]["secretKeyRef"]
    assert jaas == {"name": "orders-app", "key": "sasl.jaas.config", "optional": True}
    assert env["BERTH_KAFKA_SSL_CA_FILE"]["value"] == "/etc/berth/kafka/ca/ca.crt"
    volumes = planned.statefulset["spec"]["template"]["spec"]["volumes"]
    assert {
        "name": "berth-kafka-ca",
        "secret": {"secretName": "my-cluster-cluster-ca-cert", "items": [{"key": "ca.crt", "path": "ca.crt"}]},
    } in volumes
    assert "value" not in env["BERTH_KAFKA_SASL_PASSWORD"]  # a secret never as a value
    # A Secret with a username key is referenced instead.
    planned = plan_statefulset(fleet, operator_defaults=DEFAULTS, session_timeout_ms=45_000, replicas=3)
    assert env_of(planned)["BERTH_KAFKA_SASL_USERNAME"]["valueFrom"]["secretKeyRef"]["key"] == "username"


def test_a_strimzi_tls_user_secret_is_mounted_whole_and_named_by_file(fleet_body: FleetBody) -> None:
    fleet = parse_fleet(
        fleet_body(
            spec={
                "coordinator": {
                    "kafka": {
                        "securityProtocol": "SSL",
                        "clientCertificateSecretRef": {"name": "orders-app"},
                        "caSecretRef": {"name": "my-cluster-cluster-ca-cert"},
                    }
                }
            }
        )
    )
    planned = plan_statefulset(
        fleet, operator_defaults=OperatorDefaults(kafka=KafkaDefaults("k:9093")), session_timeout_ms=45_000, replicas=1
    )
    env = env_of(planned)
    assert env["BERTH_KAFKA_SSL_CERT_FILE"]["value"] == "/etc/berth/kafka/client/user.crt"
    assert env["BERTH_KAFKA_SSL_KEY_FILE"]["value"] == "/etc/berth/kafka/client/user.key"
    assert env["BERTH_KAFKA_SSL_KEYSTORE_FILE"]["value"] == "/etc/berth/kafka/client/user.p12"
    assert env["BERTH_KAFKA_SSL_KEYSTORE_PASSWORD"]["valueFrom"]["secretKeyRef"]["optional"] is True
    spec = planned.statefulset["spec"]["template"]["spec"]
    # No fsGroup in the template: files every user of the pod can read (they belong to root).
    assert {"name": "berth-kafka-client", "secret": {"secretName": "orders-app", "defaultMode": 0o444}} in spec[
        "volumes"
    ]
    mounts = spec["containers"][0]["volumeMounts"]
    assert {"name": "berth-kafka-client", "mountPath": "/etc/berth/kafka/client", "readOnly": True} in mounts
    # The kubelet keeps a failing consumer's last lines as its termination message (where a key it cannot read says so).
    assert spec["containers"][0]["terminationMessagePolicy"] == "FallbackToLogsOnError"
    assert "securityContext" not in spec  # the operator adds no fsGroup


def test_a_client_certificate_is_readable_by_the_pods_fs_group_and_the_template_is_respected(
    fleet_body: FleetBody,
) -> None:
    body = fleet_body(
        spec={
            "coordinator": {"kafka": {"securityProtocol": "SSL", "clientCertificateSecretRef": {"name": "orders-app"}}}
        }
    )
    security = {"runAsNonRoot": True, "runAsUser": 65534, "fsGroup": 2000}
    body["spec"]["template"]["spec"]["securityContext"] = dict(security)
    body["spec"]["template"]["spec"]["containers"][0]["terminationMessagePolicy"] = "File"
    planned = plan_statefulset(
        parse_fleet(body),
        operator_defaults=OperatorDefaults(kafka=KafkaDefaults("k:9093")),
        session_timeout_ms=45_000,
        replicas=1,
    )
    spec = planned.statefulset["spec"]["template"]["spec"]
    # With an fsGroup the kubelet gives the files to that group: owner and group may read, nobody else.
    assert {"name": "berth-kafka-client", "secret": {"secretName": "orders-app", "defaultMode": 0o440}} in spec[
        "volumes"
    ]
    assert spec["securityContext"] == security
    assert spec["containers"][0]["terminationMessagePolicy"] == "File"


def test_a_client_certificate_needs_a_protocol_with_tls(fleet_body: FleetBody) -> None:
    with pytest.raises(SpecError, match="clientCertificateSecretRef"):
        strimzi_fleet(fleet_body, securityProtocol="PLAINTEXT", clientCertificateSecretRef={"name": "x"})


# ------------------------------------------------------------------------------------ whose credentials


def target_of(fleet_body: FleetBody, **kafka: Any) -> KafkaTarget:
    target = resolve_target(strimzi_fleet(fleet_body, **kafka), DEFAULTS)
    assert isinstance(target, KafkaTarget)
    return target


def connect(target: KafkaTarget, secrets: dict[str, dict[str, str]]) -> Any:
    found = {need.role: checked(need, "shop", secrets.get(need.name)) for need in secrets_needed(target)}
    return kafka_connection(target, "shop", found)


def test_a_strimzi_kafkauser_secret_authenticates_as_its_jaas_username_else_its_name(fleet_body: FleetBody) -> None:
    target = target_of(fleet_body, credentialsSecretRef={"name": "orders-app"})
    strimzi = {"orders-app": {"password": 's3cr"et', "sasl.jaas.config": STRIMZI_JAAS}}
    connection = connect(target, strimzi)
    assert (connection.username, connection.password, connection.username_is_derived) == ("orders-app", 's3cr"et', True)
    assert connection.principal == "the credentials in Secret shop/orders-app"
    assert "s3cr" not in repr(connection)
    assert connect(target, {"orders-app": {"password": "p"}}).username == "orders-app"  # the Secret's name
    other = target_of(fleet_body, credentialsSecretRef={"name": "vault", "usernameKey": "user", "passwordKey": "pass"})
    tool = connect(other, {"vault": {"user": "svc-orders", "pass": "p"}})
    assert (tool.username, tool.username_is_derived) == ("svc-orders", False)
    with pytest.raises(Refusal, match=r"Secret shop/vault has no key pass \(its credentials\)"):
        connect(other, {"vault": {"user": "svc-orders"}})


def test_a_strimzi_tls_user_and_the_cluster_ca_make_a_mutual_tls_connection(fleet_body: FleetBody) -> None:
    target = target_of(
        fleet_body,
        securityProtocol="SSL",
        clientCertificateSecretRef={"name": "orders-app"},
        caSecretRef={"name": "my-cluster-cluster-ca-cert"},
    )
    assert [need.role for need in secrets_needed(target)] == [SecretRole.CLIENT_CERTIFICATE, SecretRole.CA]
    connection = connect(
        target,
        {
            "orders-app": {"user.crt": "CERT", "user.key": "KEY", "ca.crt": "CLIENTS-CA"},
            "my-cluster-cluster-ca-cert": {"ca.crt": "CLUSTER-CA"},
        },
    )
    assert (connection.certificate_pem, connection.private_key_pem, connection.ca_pem) == ("CERT", "KEY", "CLUSTER-CA")
    assert connection.principal == "the client certificate in Secret shop/orders-app"
    assert "KEY" not in repr(connection) and "CERT" not in repr(connection)
    with pytest.raises(Refusal, match=r"orders-app has no key user.key \(its client certificate\)"):
        connect(target, {"orders-app": {"user.crt": "CERT"}, "my-cluster-cluster-ca-cert": {"ca.crt": "CA"}})


def test_the_jaas_line_is_read_for_a_key_with_escapes_and_nothing_is_guessed() -> None:
    assert jaas_value(STRIMZI_JAAS, "username") == "orders-app"
    assert jaas_value(STRIMZI_JAAS, "password") == 's3cr"et'
    assert jaas_value(STRIMZI_JAAS, "token") is None and jaas_value(None, "username") is None
    assert jaas_value('x required myusername="no";', "username") is None


# ------------------------------------------------------------------------------------------- evidence


def test_a_restart_is_as_long_as_the_pods_own_times_say_not_as_long_as_the_describes_are_apart() -> None:
    t0 = int(NOW.timestamp() * 1000)
    first = GroupDescription("orders", "Stable", -1, None, (GroupMember("m1", "orders-1"),))
    state, _ = observe_group(EvidenceState(), first, now_ms=t0, key="orders")
    after = GroupDescription("orders", "Stable", -1, None, (GroupMember("m1b", "orders-1"),))
    # The describes are 10 s apart; the pod was replaced 4 s in, its new process started 2 s after that.
    replaced = PodTimes(created=NOW + timedelta(seconds=4), started=NOW + timedelta(seconds=6))
    _, events = observe_group(state, after, now_ms=t0 + 10_000, pods={"orders-1": replaced}, key="orders")
    assert [(e["type"], e["offline_ms"]) for e in events] == [("static_member_replaced", 2_000)]
    # A container restarted in place: from its previous end to its new start.
    in_place = PodTimes(NOW - timedelta(hours=1), NOW + timedelta(seconds=7), previous_ended=NOW + timedelta(seconds=5))
    _, events = observe_group(state, after, now_ms=t0 + 10_000, pods={"orders-1": in_place}, key="orders")
    assert events[0]["offline_ms"] == 2_000
    # Without the pod's times (or times from before the old member was last seen): the describes' window.
    _, events = observe_group(state, after, now_ms=t0 + 10_000, key="orders")
    assert events[0]["offline_ms"] == 10_000
    _, events = observe_group(
        state, after, now_ms=t0 + 10_000, pods={"orders-1": pod(NOW - timedelta(hours=1))}, key="orders"
    )
    assert events[0]["offline_ms"] == 10_000


def test_an_expiry_says_the_longest_its_member_can_have_been_silent_where_the_session_timeout_is_known() -> None:
    t0 = int(NOW.timestamp() * 1000)
    first = GroupDescription("orders", "Stable", -1, None, (GroupMember("m1", "orders-1"),))
    state, _ = observe_group(EvidenceState(), first, now_ms=t0, key="orders")
    gone = GroupDescription("orders", "Stable", -1, None, ())
    # Listed at t0, so heard from within 30 s before it; gone 10 s later.
    _, events = observe_group(state, gone, now_ms=t0 + 10_000, key="orders", session_timeout_ms=30_000)
    assert [(e["type"], e["offline_ms"]) for e in events] == [("member_expired", 40_000)]
    heard = t0 + 10_000 - 40_000
    assert activity_by_group(events)["orders"].expired == (Expiry("orders-1", heard_ms=heard),)
    _, events = observe_group(state, gone, now_ms=t0 + 10_000, key="orders")
    assert "offline_ms" not in events[0]


# ------------------------------------------------------------------------------------ counted, not assumed


def test_the_rebalances_of_a_removal_are_counted_from_the_generation_once_the_group_is_stable() -> None:
    status = {"lastScaleDown": {"removed": ["orders-3"], "fromGeneration": 7, "rebalances": None}}
    assert rebalances_since_leave(status, state="Reconciling", generation=8) is None
    assert rebalances_since_leave(status, state="Stable", generation=8) == 1
    assert rebalances_since_leave({"lastScaleDown": {"removed": ["orders-3"]}}, state="Stable", generation=8) is None
    counted = {"lastScaleDown": {"fromGeneration": 7, "rebalances": 1}}
    assert rebalances_since_leave(counted, state="Stable", generation=9) is None


def test_a_coordinator_maximum_below_what_is_asked_is_a_condition_naming_the_setting() -> None:
    bounds = CoordinatorBounds(45_000, 60_000, max_setting="group.consumer.max.session.timeout.ms")
    asked = SessionTimeoutDecision(60_000, "estimated", SessionTimeoutSource.ADVICE, wanted_ms=105_000)
    capped = sufficiency(asked, bounds)
    assert (capped.type, capped.status, capped.reason) == ("SessionTimeoutSufficient", "False", "CoordinatorMaximum")
    assert "the advice asks for 105.0 s" in capped.message
    assert "raise group.consumer.max.session.timeout.ms on the brokers" in capped.message
    fits = SessionTimeoutDecision(50_000, "estimated", SessionTimeoutSource.ESTIMATE, wanted_ms=50_000)
    assert sufficiency(fits, bounds).status == "True"
    assert sufficiency(SessionTimeoutDecision(90_000, "fixed", SessionTimeoutSource.FIXED), bounds).status == "True"


# ---------------------------------------------------------------------------------------- honest status


def test_status_shows_what_the_broker_says_or_nothing() -> None:
    consumer = GroupDescription(
        "orders",
        "Stable",
        12,
        None,
        (
            GroupMember("m0", "orders-0", member_epoch=12, assignment=("orders:0", "orders:3", "audit:1")),
            GroupMember("m1", "orders-1", member_epoch=12, assignment=("orders:1",)),
        ),
        protocol=GroupProtocol.CONSUMER,
        assignment_epoch=12,
    )
    plan = plan_group_status(
        "orders", consumer, instance_ids=("orders-0", "orders-1"), departing=(), previous_conditions=None, now=NOW
    )
    assert plan.group == {
        "state": "Stable",
        "leader": None,
        "members": ["orders-0", "orders-1"],
        "generation": 12,
        "assignmentEpoch": 12,
        "assignment": {"orders-0": "orders:0,3; audit:1", "orders-1": "orders:1"},
    }
    classic = GroupDescription("orders", "Stable", -1, None, (GroupMember("m0", "orders-0"),))
    plan = plan_group_status(
        "orders", classic, instance_ids=("orders-0",), departing=(), previous_conditions=None, now=NOW
    )
    assert plan.group == {"state": "Stable", "leader": None, "members": ["orders-0"]}  # no generation: none reported
    ready = next(c for c in plan.conditions if c["type"] == "Ready")
    assert ready["message"] == "all 1 instances are members of the Stable group"
    forming = GroupDescription("orders", "Dead", -1, None, (), exists=False)
    plan = plan_group_status(
        "orders", forming, instance_ids=("orders-0",), departing=(), previous_conditions=None, now=NOW
    )
    assert plan.group is None
    reachable = next(c for c in plan.conditions if c["type"] == "CoordinatorReachable")
    assert reachable["message"] == "group orders does not exist yet (its members have not joined)"
    assert BERTH.reports_generation and not KAFKA_CLASSIC.reports_generation
