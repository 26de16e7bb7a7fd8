"""Endpoint canonical forms: every alias of one coordinator compares equal, and nothing but an endpoint passes."""

from __future__ import annotations

import pytest

from berth.operator.planners.endpoints import (
    Endpoint,
    EndpointError,
    bootstrap_text,
    parse_bootstrap_servers,
    parse_coordinator_url,
)

COORDINATOR = Endpoint("http", "berth-coordinator.berth", 9094)


@pytest.mark.parametrize(
    "alias",
    [
        "http://berth-coordinator.berth:9094",
        "http://berth-coordinator.berth:9094/",
        "http://berth-coordinator.berth:09094",
        "http://BERTH-Coordinator.Berth:9094",
        "http://berth-coordinator.berth.:9094",
        "http://berth-coordinator.berth.svc:9094",
        "http://berth-coordinator.berth.svc.cluster.local:9094",
        "http://berth-coordinator.berth.svc.cluster.local.:9094",
        "HTTP://berth-coordinator.berth:9094",
        " http://berth-coordinator.berth:9094 ",
    ],
)
def test_aliases_of_one_coordinator_are_one_endpoint(alias: str) -> None:
    assert parse_coordinator_url(alias) == COORDINATOR
    assert str(parse_coordinator_url(alias)) == "http://berth-coordinator.berth:9094"


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("http://user@berth-coordinator.berth:9094", "user information"),
        ("http://user:pw@berth-coordinator.berth:9094", "user information"),
        ("http://berth-coordinator.berth:9094/internal/x", "without a path"),
        ("http://berth-coordinator.berth:9094/.", "without a path"),
        ("http://berth-coordinator.berth:9094?a=1", "without a path, query"),
        ("http://berth-coordinator.berth:9094?", "without a path, query"),
        ("http://berth-coordinator.berth:9094#x", "fragment"),
        ("ftp://berth-coordinator.berth:9094", "http or https"),
        ("http://:9094", "no host"),
        ("http://berth_coordinator:9094", "not a host name"),
        ("http://berth-coordinator.berth:99999", "not a URL"),
    ],
)
def test_anything_but_an_endpoint_is_refused_saying_why(url: str, words: str) -> None:
    with pytest.raises(EndpointError, match=words):
        parse_coordinator_url(url)


def test_default_ports_and_ip_addresses_are_written_one_way() -> None:
    assert parse_coordinator_url("https://coordinator.example.net") == Endpoint("https", "coordinator.example.net", 443)
    assert str(parse_coordinator_url("http://127.000.0.1:80".replace("000", "0"))) == "http://127.0.0.1:80"
    assert str(parse_coordinator_url("http://[0:0::1]:9094")) == "http://[::1]:9094"


def test_bootstrap_lists_are_canonical_sorted_and_without_repeats() -> None:
    addresses = parse_bootstrap_servers("Kafka-1.kafka.svc.cluster.local:9093, kafka-0.kafka:9093,kafka-0.kafka.:9093")
    assert bootstrap_text(addresses) == "kafka-0.kafka:9093,kafka-1.kafka:9093"
    assert parse_bootstrap_servers(["broker"]) == (Endpoint("", "broker", 9092),)
    assert parse_bootstrap_servers("[::1]:19092") == (Endpoint("", "[::1]", 19092),)


@pytest.mark.parametrize("bad", ["", " , ", "broker:0", "broker:70000", "user@broker:9092", "broker:9092/x"])
def test_bad_bootstrap_lists_are_refused(bad: str) -> None:
    with pytest.raises(EndpointError):
        parse_bootstrap_servers(bad)
