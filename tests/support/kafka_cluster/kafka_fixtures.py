"""Pytest fixtures for the Kafka tier (loaded from the root conftest as a plugin).

- ``kafka_bootstrap`` (session): the bootstrap list of a Kafka-protocol cluster — kfake started once on first use and
  stopped by PID at the end, or the real cluster ``BERTH_KAFKA_BOOTSTRAP`` names.
- ``kip848_bootstrap`` (per module): the same for consumer-protocol groups — ``kfake-kip848`` with Kafka's defaults
  for those groups, or the same real cluster (Kafka >= 4.0) — and ``kip848_topic``, the module's one topic of 6
  partitions. One broker and one topic per module because kfake's consumer-protocol assignor hands a member the
  partitions of every topic on the broker, not only those it subscribed to (docs/kafka.md, "What differs on
  kfake"); a real cluster assigns only the subscribed ones, so there the module's topic is one among many.
- ``kafka_topic``: a fresh topic of 6 partitions per test.

Without kfake (and no BERTH_KAFKA_BOOTSTRAP) the tier is skipped with one line; with ``CI=true`` that is a failure.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.kafka_broker import HOW_TO_GET, HOW_TO_GET_KIP848, KafkaBroker, external_bootstrap, find_kfake
from support.kube_fixtures import unavailable

PARTITIONS = 6


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    yield from _broker(kip848=False)


@pytest.fixture(scope="module")
def kip848_bootstrap() -> Iterator[str]:
    yield from _broker(kip848=True)


@pytest.fixture(scope="module")
def kip848_topic(kip848_bootstrap: str, request: pytest.FixtureRequest) -> str:
    stem = "".join(c if c.isalnum() else "-" for c in request.module.__name__.rpartition(".")[2].lower())[:40]
    return create_topic(kip848_bootstrap, f"kip848-{next(_topics)}-{stem}")


def _broker(*, kip848: bool) -> Iterator[str]:
    external = external_bootstrap()
    if external:
        yield external
        return
    binary = find_kfake(kip848=kip848)
    if binary is None:
        unavailable(HOW_TO_GET_KIP848 if kip848 else HOW_TO_GET)
    assert binary is not None
    workdir = Path(tempfile.mkdtemp(prefix="berth-kfake-"))
    broker = KafkaBroker(binary, workdir / "kfake.log").start()
    try:
        yield broker.bootstrap
    finally:
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)


_topics = itertools.count(1)


def create_topic(bootstrap: str, name: str, partitions: int = PARTITIONS) -> str:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","), client_id="berth-tests")
    try:
        admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        admin.close()
    return name


@pytest.fixture
def kafka_topic(kafka_bootstrap: str, request: pytest.FixtureRequest) -> str:
    stem = "".join(c if c.isalnum() else "-" for c in request.node.name.lower())[:60].strip("-")
    return create_topic(kafka_bootstrap, f"t{next(_topics)}-{stem}")
