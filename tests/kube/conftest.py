"""Fixtures for the control-plane tier: the chart installed once, and the real operator running as the chart's
ServiceAccount against a real coordinator, with a fake kubelet per test namespace."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.coordinator import CoordinatorProcess
from support.fake_kubelet import FakeKubelet
from support.fleet_stage import ADMIN_TOKEN, MEMBER_TOKEN, MEMBER_TOKEN_SECRET, Stage, write_tokens
from support.kafka_fixtures import create_topic
from support.kafka_stage import KafkaStage, grant_secret_reads, operated_namespace
from support.kube import Kube
from support.kube_cluster import REPO
from support.net import free_port
from support.operator_process import OperatorProcess

CHART = REPO / "charts" / "berth"
RELEASE = "berth"
RELEASE_NAMESPACE = "berth"
#: Where the chart keeps the owner records of Kafka groups by default (shared by every install in a cluster).
GROUP_OWNERS_NAMESPACE = "berth-group-owners"
OPERATOR_SA = "berth-operator"
#: Forming a group should not wait out Kafka's 3 s initial delay.
COORDINATOR_FLAGS = ("--group-initial-rebalance-delay-ms", "100")


@pytest.fixture(scope="session")
def chart_release(kube: Kube) -> str:
    """Release ``berth`` of the chart with its defaults, installed once: its ServiceAccount, ClusterRole and binding
    are the identity the operator runs as. (Its Deployment and StatefulSet never run: there is no kubelet.)"""
    kube.helm("install", RELEASE, str(CHART), "-n", RELEASE_NAMESPACE, "--create-namespace")
    return RELEASE


@pytest.fixture(scope="session")
def operator_identity(kube: Kube, chart_release: str) -> Kube:
    """kubectl as the operator's ServiceAccount, with a bound token as its pod would get."""
    return kube.as_service_account(RELEASE_NAMESPACE, OPERATOR_SA)


@pytest.fixture(scope="module")
def coordinator_for_operator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CoordinatorProcess]:
    """A real coordinator (system clock) that requires tokens: the operator's admin token, and one for members."""
    directory = tmp_path_factory.mktemp("coordinator")
    tokens = write_tokens(directory / "tokens.yaml")
    process = CoordinatorProcess(
        directory / "data", *COORDINATOR_FLAGS, "--tokens-file", str(tokens), manual_clock=False
    )
    process.start()
    yield process
    process.kill()


@pytest.fixture(scope="module")
def running_operator(
    operator_identity: Kube,
    coordinator_for_operator: CoordinatorProcess,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> Iterator[OperatorProcess]:
    """``berth-operator``, cluster-wide, as the chart's ServiceAccount, with the coordinator as its default (and the
    test module's ``OPERATOR_ARGS``, when it has some)."""
    directory = tmp_path_factory.mktemp("operator")
    token_file = directory / "admin-token"
    token_file.write_text(ADMIN_TOKEN)
    args = [
        "--coordinator-url",
        coordinator_for_operator.url,
        "--token-file",
        str(token_file),
        "--liveness-port",
        "0",
        "--metrics-port",
        str(metrics_port := free_port()),
        "--reconcile-interval-s",
        "2",
        *getattr(request.module, "OPERATOR_ARGS", ()),
    ]
    operator = OperatorProcess(operator_identity.kubeconfig, directory / "operator.log", args).start()
    operator.metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
    yield operator
    operator.stop()
    forbidden = operator.forbidden()
    assert not forbidden, "the API server refused the operator something:\n" + "\n".join(forbidden)


@pytest.fixture
def namespaced_operator(
    operator_identity: Kube, coordinator_for_operator: CoordinatorProcess, namespace: str, tmp_path: Path
) -> Iterator[Callable[..., OperatorProcess]]:
    """Start ``berth-operator --namespace <the test's>`` (as the chart's ServiceAccount, the module's coordinator its
    default, metrics on a port of its own) with ``extra`` flags; ``kubeconfig`` routes it elsewhere, ``env`` adds to
    its environment. Each one started
    is stopped at the end (gracefully: a leader releases its Lease), and none may have been refused anything."""
    started: list[OperatorProcess] = []
    token = tmp_path / "admin-token"
    token.write_text(ADMIN_TOKEN)

    def start(*extra: str, kubeconfig: Path | None = None, env: dict[str, str] | None = None) -> OperatorProcess:
        metrics = free_port()
        args = [
            "--namespace", namespace,
            "--coordinator-url", coordinator_for_operator.url,
            "--token-file", str(token),
            "--liveness-port", "0",
            "--metrics-port", str(metrics),
            *extra,
        ]  # fmt: skip
        log = tmp_path / f"operator-{len(started)}.log"
        operator = OperatorProcess(kubeconfig or operator_identity.kubeconfig, log, args, env).start()
        operator.metrics_url = f"http://127.0.0.1:{metrics}/metrics"
        started.append(operator)
        return operator

    yield start
    for operator in started:
        operator.stop()
        forbidden = operator.forbidden()
        assert not forbidden, "the API server refused the operator something:\n" + "\n".join(forbidden)


@pytest.fixture
def kubelet(kube: Kube, namespace: str, tmp_path: Path) -> Iterator[FakeKubelet]:
    """Member processes for the test namespace's pods, and the Secret holding their coordinator token."""
    kube.kubectl(
        "create", "secret", "generic", MEMBER_TOKEN_SECRET, "-n", namespace, f"--from-literal=token={MEMBER_TOKEN}"
    )
    fake = FakeKubelet(kube.kubeconfig, namespace, tmp_path / "pods").start()
    yield fake
    fake.stop()
    assert fake.error is None, f"the fake kubelet failed: {fake.error!r}"


_groups = itertools.count(1)


@pytest.fixture
def stage(
    kube: Kube,
    namespace: str,
    kubelet: FakeKubelet,
    running_operator: OperatorProcess,
    coordinator_for_operator: CoordinatorProcess,
) -> Iterator[Stage]:
    """A namespace with its kubelet, the module's operator and coordinator, and a group of its own."""
    group = f"kube-orders-{next(_groups)}"
    yield Stage(kube, namespace, kubelet, coordinator_for_operator, group, running_operator.metrics_url)
    assert running_operator.process is not None and running_operator.process.poll() is None, running_operator.log()


# --- the Kafka tier on the control plane ---------------------------------------------------------------------------

KAFKA_NAMESPACE = "kafka-fleets"


@pytest.fixture(scope="module")
def unreachable_kafka() -> str:
    """A trusted bootstrap address nothing listens on."""
    return f"127.0.0.1:{free_port()}"


@pytest.fixture(scope="module")
def kafka_stage(
    kube: Kube,
    operator_identity: Kube,
    kafka_bootstrap: str,
    unreachable_kafka: str,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> Iterator[KafkaStage]:
    """One namespace served by ``berth-operator --namespace`` (as the chart's ServiceAccount) with the test broker as
    its default Kafka connection, and a fake kubelet running the example consumers for its pods."""
    namespace = kube.create_namespace(f"{KAFKA_NAMESPACE}-{next(_groups)}")
    grant_secret_reads(kube, namespace)  # the chart grants no cluster-wide Secret read: one namespace at a time
    directory = tmp_path_factory.mktemp("kafka-operator")
    args = [
        *("--kafka-bootstrap-servers", kafka_bootstrap, "--kafka-trusted-bootstrap", unreachable_kafka),
        *("--liveness-port", "0", "--metrics-port", "0", "--reconcile-interval-s", "1"),
        # Members hear of a rebalance on their next heartbeat: the takeover after a removal is about one of them.
        *("--heartbeat-interval-ms", "500"),
        *getattr(request.module, "KAFKA_OPERATOR_ARGS", ()),
    ]
    topic = create_topic(kafka_bootstrap, f"orders-{namespace}")
    with operated_namespace(
        kube,
        operator_identity,
        namespace,
        directory,
        args,
        bootstrap=kafka_bootstrap,
        topic=topic,
        records_namespace=GROUP_OWNERS_NAMESPACE,
    ) as stage:
        yield stage


@pytest.fixture(scope="module")
def kip848_stage(
    kube: Kube,
    operator_identity: Kube,
    kip848_bootstrap: str,
    kip848_topic: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[KafkaStage]:
    """One namespace served by ``berth-operator --namespace`` (as the chart's ServiceAccount, its Secrets granted the
    chart's way) with a consumer-protocol broker (``kfake-kip848``, Kafka's defaults: a 45 s session timeout) as its
    default Kafka connection, /metrics on, and a fake kubelet running the example consumers for its pods."""
    namespace = kube.create_namespace(f"kip848-fleets-{next(_groups)}")
    grant_secret_reads(kube, namespace)
    directory = tmp_path_factory.mktemp("kip848-operator")
    metrics_port = free_port()
    args = [
        *("--kafka-bootstrap-servers", kip848_bootstrap, "--liveness-port", "0", "--metrics-port", str(metrics_port)),
        *("--reconcile-interval-s", "1"),
    ]
    with operated_namespace(
        kube,
        operator_identity,
        namespace,
        directory,
        args,
        bootstrap=kip848_bootstrap,
        topic=kip848_topic,
        metrics_url=f"http://127.0.0.1:{metrics_port}/metrics",
        records_namespace=GROUP_OWNERS_NAMESPACE,
    ) as stage:
        yield stage
