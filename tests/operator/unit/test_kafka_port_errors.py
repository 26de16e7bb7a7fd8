"""How the Kafka port reports what went wrong, without a broker: kafka-python's errors from the wire calls become
``CoordinatorUnavailable`` with a reason naming what is missing (wrong credentials, an ACL, no broker), and never a
secret; a removal never goes out with an empty list."""

from __future__ import annotations

from typing import Any

import kafka.errors as errors
import pytest

from berth.operator.adapters.kafka import port as port_module
from berth.operator.adapters.kafka import wire
from berth.operator.adapters.kafka.port import KafkaCoordinatorPort
from berth.operator.planners.kafka_credentials import KafkaConnection
from berth.operator.ports import CoordinatorUnavailable

SECRET = "s3cr3t-password-never-shown"
CONNECTION = KafkaConnection(
    "kafka-0.kafka.data:9093",
    security_protocol="SASL_SSL",
    sasl_mechanism="SCRAM-SHA-512",
    username="orders",
    password=SECRET,
    principal="the credentials in Secret shop/orders-kafka",
)


@pytest.fixture
def failing(monkeypatch: pytest.MonkeyPatch) -> list[BaseException]:
    """The error the next wire call raises (the admin client itself is never built)."""
    raised: list[BaseException] = []

    def call(*args: Any, **kwargs: Any) -> Any:
        raise raised[0]

    monkeypatch.setattr(wire, "connect", lambda connection, timeout_ms: object())
    for name in ("describe_group", "leave_by_instance_ids", "delete_group", "session_bounds"):
        monkeypatch.setattr(port_module.wire, name, call)
    return raised


@pytest.mark.parametrize(
    ("error", "reason", "words"),
    [
        (errors.SaslAuthenticationFailedError("bad"), "AuthenticationFailed", "refused the credentials in Secret"),
        (errors.GroupAuthorizationFailedError(), "NotAuthorized", "lacks the ACL Group READ/DESCRIBE/DELETE"),
        (errors.KafkaTimeoutError("bootstrap"), "Unreachable", "kafka://kafka-0.kafka.data:9093"),
        (errors.KafkaConnectionError("refused"), "Unreachable", "describing group orders"),
    ],
)
async def test_failures_name_what_is_missing_and_no_secret(
    failing: list[BaseException], error: BaseException, reason: str, words: str
) -> None:
    failing.append(error)
    port = KafkaCoordinatorPort(CONNECTION)
    try:
        with pytest.raises(CoordinatorUnavailable) as raised:
            await port.describe("orders")
    finally:
        await port.close()
    assert raised.value.reason == reason
    assert words in str(raised.value)
    assert SECRET not in str(raised.value) and SECRET not in repr(CONNECTION)


async def test_missing_describe_configs_acl_is_named(failing: list[BaseException]) -> None:
    failing.append(errors.ClusterAuthorizationFailedError())
    port = KafkaCoordinatorPort(CONNECTION)
    try:
        with pytest.raises(CoordinatorUnavailable, match="Cluster DESCRIBE_CONFIGS") as raised:
            await port.get_config()
    finally:
        await port.close()
    assert raised.value.reason == "NotAuthorized"


async def test_an_empty_removal_never_reaches_the_wire(failing: list[BaseException]) -> None:
    failing.append(AssertionError("sent"))
    port = KafkaCoordinatorPort(CONNECTION)
    try:
        with pytest.raises(ValueError, match="at least one"):
            await port.leave_instances("orders", [])
    finally:
        await port.close()


def test_the_wire_refuses_an_empty_or_blank_removal_too() -> None:
    with pytest.raises(ValueError, match="KIP-571"):
        wire.leave_by_instance_ids(object(), "orders", [])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="KIP-571"):
        wire.leave_by_instance_ids(object(), "orders", [""])  # type: ignore[arg-type]
