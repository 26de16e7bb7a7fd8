"""``MemberConfig.from_env``: the operator's BERTH_* environment becomes a checked config, or an error naming it."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.certs import make_ca, openssl_or_skip

from berth.coordinator.client import ConfigError, MemberConfig, parse_topics

OPERATOR_ENV = {
    "BERTH_GROUP_ID": "orders",
    "BERTH_GROUP_INSTANCE_ID": "orders-3",
    "BERTH_COORDINATOR_URL": "http://berth-coordinator.berth:9094",
    "BERTH_SESSION_TIMEOUT_MS": "45000",
    "BERTH_REBALANCE_TIMEOUT_MS": "120000",
    "BERTH_HEARTBEAT_INTERVAL_MS": "3000",
    "BERTH_TOKEN": "s3cret-token",
    "BERTH_TOPICS": "orders:24, payments:8",
}


def test_the_operators_environment_becomes_a_static_member_config() -> None:
    config = MemberConfig.from_env(OPERATOR_ENV)

    assert config.group_id == "orders"
    assert config.group_instance_id == "orders-3" and config.is_static
    assert config.coordinator_url == "http://berth-coordinator.berth:9094"
    assert (config.session_timeout_ms, config.rebalance_timeout_ms, config.heartbeat_interval_ms) == (
        45_000,
        120_000,
        3_000,
    )
    assert config.token == "s3cret-token"
    assert dict(config.topics) == {"orders": 24, "payments": 8}
    assert config.assignors == ("sticky", "range")
    assert "s3cret" not in repr(config)  # the token never reaches logs through a repr


def test_without_an_instance_id_the_member_is_dynamic_and_defaults_are_kafkas() -> None:
    config = MemberConfig.from_env({"BERTH_GROUP_ID": "orders", "BERTH_TOPICS": "orders:3"})

    assert config.group_instance_id is None and not config.is_static
    assert config.coordinator_url == "http://127.0.0.1:9094"
    assert (config.session_timeout_ms, config.rebalance_timeout_ms, config.heartbeat_interval_ms) == (
        45_000,
        300_000,
        3_000,
    )
    assert config.token is None
    assert (config.retry_backoff_ms, config.retry_backoff_max_ms) == (100, 1_000)


def test_assignor_preference_list_is_read_in_order() -> None:
    config = MemberConfig.from_env({**OPERATOR_ENV, "BERTH_ASSIGNORS": "range, roundrobin"})
    assert config.assignors == ("range", "roundrobin")


@pytest.mark.parametrize(
    ("variable", "value", "complaint"),
    [
        ("BERTH_GROUP_ID", "", "is not set"),
        ("BERTH_TOPICS", "", "is not set"),
        ("BERTH_TOPICS", "orders", "is not TOPIC:PARTITIONS"),
        ("BERTH_TOPICS", "orders:0", "partition count of topic 'orders' must be a positive decimal integer"),
        ("BERTH_TOPICS", "orders:x", "must be a positive decimal integer, got 'x'"),
        ("BERTH_TOPICS", "orders:3,orders:4", "names topic 'orders' twice"),
        ("BERTH_TOPICS", "bad topic:3", "topic name 'bad topic'"),
        ("BERTH_TOPICS", " , ", "names no topic"),
        ("BERTH_GROUP_INSTANCE_ID", "", "group.instance.id '' is not 1 to 249 characters"),
        ("BERTH_GROUP_INSTANCE_ID", "orders/3", "group.instance.id 'orders/3'"),
        ("BERTH_COORDINATOR_URL", "berth:9094", "must be an http:// or https:// URL"),
        ("BERTH_SESSION_TIMEOUT_MS", "45s", "must be a positive decimal integer, got '45s'"),
        ("BERTH_SESSION_TIMEOUT_MS", "-1", "got '-1'"),
        ("BERTH_REBALANCE_TIMEOUT_MS", "0", "got '0'"),
        ("BERTH_HEARTBEAT_INTERVAL_MS", "1_000", "got '1_000'"),
        ("BERTH_HEARTBEAT_INTERVAL_MS", "45000", "(45000) must be below BERTH_SESSION_TIMEOUT_MS (45000)"),
        ("BERTH_ASSIGNORS", "sticky,cooperative-sticky", "unknown assignor(s) cooperative-sticky"),
        ("BERTH_ASSIGNORS", "range,range", "names an assignor twice"),
        ("BERTH_RETRY_BACKOFF_MAX_MS", "50", "must be at least BERTH_RETRY_BACKOFF_MS"),
    ],
)
def test_a_malformed_variable_is_named_in_the_error(variable: str, value: str, complaint: str) -> None:
    with pytest.raises(ConfigError) as error:
        MemberConfig.from_env({**OPERATOR_ENV, variable: value})

    assert error.value.name == variable
    assert str(error.value).startswith(variable)
    assert complaint in str(error.value)


def test_a_missing_required_variable_is_named() -> None:
    env = {key: value for key, value in OPERATOR_ENV.items() if key != "BERTH_GROUP_ID"}
    with pytest.raises(ConfigError, match=r"^BERTH_GROUP_ID is not set$"):
        MemberConfig.from_env(env)


def test_direct_construction_checks_arguments_by_name() -> None:
    with pytest.raises(ConfigError, match=r"^heartbeat_interval_ms"):
        MemberConfig(group_id="g", topics={"t": 1}, session_timeout_ms=6_000, heartbeat_interval_ms=6_000)
    with pytest.raises(ConfigError, match=r"^topics names no topic"):
        MemberConfig(group_id="g", topics={})
    with pytest.raises(ConfigError, match=r"^group_id is longer than 255 bytes"):
        MemberConfig(group_id="g" * 256, topics={"t": 1})


def test_parse_topics_keeps_the_order_given() -> None:
    assert list(parse_topics("b:1,a:2")) == ["b", "a"]


# ----------------------------------------------------------------------------- token file, CA file, answer cap


def test_the_token_may_come_from_a_file(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("file-s3cret\n")
    env = {k: v for k, v in OPERATOR_ENV.items() if k != "BERTH_TOKEN"}
    assert MemberConfig.from_env({**env, "BERTH_TOKEN_FILE": str(token_file)}).token == "file-s3cret"
    with pytest.raises(ConfigError, match=r"^BERTH_TOKEN_FILE and BERTH_TOKEN are both set"):
        MemberConfig.from_env({**OPERATOR_ENV, "BERTH_TOKEN_FILE": str(token_file)})
    token_file.write_text("  \n")
    with pytest.raises(ConfigError, match=r"^BERTH_TOKEN_FILE .* which is empty"):
        MemberConfig.from_env({**env, "BERTH_TOKEN_FILE": str(token_file)})


def test_a_ca_file_goes_with_an_https_coordinator_and_must_be_pem(tmp_path: Path) -> None:
    openssl_or_skip()
    ca = make_ca(tmp_path)
    https = {**OPERATOR_ENV, "BERTH_COORDINATOR_URL": "https://berth-coordinator.berth:9094"}
    assert MemberConfig.from_env({**https, "BERTH_CA_FILE": str(ca.cert)}).ca_file == str(ca.cert)
    with pytest.raises(ConfigError, match=r"^BERTH_CA_FILE is set but .* is not https://: the token would go in clear"):
        MemberConfig.from_env({**OPERATOR_ENV, "BERTH_CA_FILE": str(ca.cert)})
    with pytest.raises(ConfigError, match=r"^BERTH_CA_FILE names .* which does not exist"):
        MemberConfig.from_env({**https, "BERTH_CA_FILE": str(tmp_path / "missing.crt")})
    (tmp_path / "junk.crt").write_text("not a certificate")
    with pytest.raises(ConfigError, match=r"^BERTH_CA_FILE names .* which is not a PEM file"):
        MemberConfig.from_env({**https, "BERTH_CA_FILE": str(tmp_path / "junk.crt")})


def test_the_answer_cap_has_a_default_and_a_variable() -> None:
    assert MemberConfig.from_env(OPERATOR_ENV).max_response_bytes == 16 * 1024 * 1024
    assert MemberConfig.from_env({**OPERATOR_ENV, "BERTH_MAX_RESPONSE_BYTES": "65536"}).max_response_bytes == 65536
    with pytest.raises(ConfigError, match=r"^BERTH_MAX_RESPONSE_BYTES"):
        MemberConfig.from_env({**OPERATOR_ENV, "BERTH_MAX_RESPONSE_BYTES": "8M"})
