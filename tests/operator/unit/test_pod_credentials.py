"""A Kafka fleet's pods that exit on their credentials, recognised from the kubelet's termination messages
(``planners.pod_credentials``), in the words real clients use: librdkafka's (confluent-kafka), kafka-python's
(Python's ssl module) and the Java client's. The node tier (tests/node/test_kafka_mtls.py) has librdkafka say it
for real, through the kubelet."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from berth.operator.planners.pod_credentials import (
    CREDENTIALS_UNUSABLE,
    REASON_CHARS,
    credential_error,
    credentials_failing,
    secret_mode,
    with_failure_messages,
)
from berth.operator.spec.fleet import parse_fleet

#: The ``fleet_body`` fixture's type (tests/operator/unit/conftest.py; not imported: two conftest modules share a name).
FleetBody = Callable[..., dict[str, Any]]

#: The last lines a confluent-kafka consumer (2.16, librdkafka 2.16) prints when it cannot read its certificate
#: (the traceback's end; measured as UID 65534 against a 0400 file of root's).
LIBRDKAFKA = """Traceback (most recent call last):
  File "/app/confluent_kafka_consumer.py", line 93, in <module>
    consumer = subscribed()
cimpl.KafkaException: KafkaError{code=_INVALID_ARG,val=-186,str="Failed to create consumer: \
ssl.certificate.location failed: error:0A080002:SSL routines::system lib"}"""
KAFKA_PYTHON = "PermissionError: [Errno 13] Permission denied: '/etc/berth/kafka/client/user.key'"
JAVA = (
    "org.apache.kafka.common.errors.SslAuthenticationException: SSL handshake failed\n"
    "Caused by: javax.net.ssl.SSLHandshakeException: Received fatal alert: bad_certificate"
)
UNRELATED = "ValueError: KAFKA_TOPIC must name a topic"


def kafka_fleet(fleet_body: FleetBody) -> Any:
    return parse_fleet(
        fleet_body(
            spec={"coordinator": {"kafka": {"securityProtocol": "SSL", "clientCertificateSecretRef": {"name": "u"}}}}
        )
    )


def test_the_clients_own_line_is_quoted_and_an_unrelated_failure_is_not_a_credential_one() -> None:
    assert credential_error(LIBRDKAFKA) == (
        'cimpl.KafkaException: KafkaError{code=_INVALID_ARG,val=-186,str="Failed to create consumer: '
        'ssl.certificate.location failed: error:0A080002:SSL routines::system lib"}'
    )
    assert credential_error(KAFKA_PYTHON) == KAFKA_PYTHON
    # The last line that says it (a traceback ends with the error, a Java trace with its cause).
    assert (
        credential_error(JAVA)
        == "Caused by: javax.net.ssl.SSLHandshakeException: Received fatal alert: bad_certificate"
    )
    assert credential_error(UNRELATED) is None
    long = "ssl.key.location failed: " + "x" * 1000
    quoted = credential_error(long)
    assert quoted is not None and len(quoted) == REASON_CHARS and quoted.endswith("…")


def test_pods_failing_on_their_credentials_are_named_with_the_reason(fleet_body: FleetBody) -> None:
    fleet = kafka_fleet(fleet_body)
    blocked = credentials_failing(fleet, {"orders-1": LIBRDKAFKA, "orders-0": LIBRDKAFKA, "orders-2": UNRELATED})
    assert blocked is not None and blocked.reason == CREDENTIALS_UNUSABLE
    assert blocked.message.startswith("pods orders-0, orders-1 exit on the Kafka credentials mounted from")
    assert "ssl.certificate.location failed" in blocked.message
    one = credentials_failing(fleet, {"orders-0": KAFKA_PYTHON})
    assert one is not None and one.message.startswith("pod orders-0 exits on")
    many = credentials_failing(fleet, {f"orders-{i}": LIBRDKAFKA for i in range(8)})
    assert many is not None and "orders-4 and 3 more exit" in many.message
    assert credentials_failing(fleet, {"orders-0": UNRELATED}) is None
    assert credentials_failing(fleet, {}) is None


def test_a_fleet_on_berths_coordinator_is_never_said_to_fail_on_kafka_credentials(fleet_body: FleetBody) -> None:
    assert credentials_failing(parse_fleet(fleet_body()), {"orders-0": LIBRDKAFKA}) is None


def test_the_mode_follows_the_pods_fs_group_and_a_containers_own_message_policy_is_kept() -> None:
    assert secret_mode({"spec": {"securityContext": {"fsGroup": 0}}}) == 0o440
    assert secret_mode({"spec": {"securityContext": {"runAsUser": 65534}}}) == 0o444
    assert secret_mode({"spec": {}}) == 0o444
    template = {
        "spec": {
            "initContainers": [{"name": "i"}],
            "containers": [{"name": "a", "terminationMessagePolicy": "File"}, {"name": "b"}],
        }
    }
    spec = with_failure_messages(template)["spec"]
    assert spec["initContainers"][0]["terminationMessagePolicy"] == "FallbackToLogsOnError"
    assert [c["terminationMessagePolicy"] for c in spec["containers"]] == ["File", "FallbackToLogsOnError"]
