"""Fleets authenticating with Strimzi's KafkaUser Secrets as the User Operator writes them, on the real control plane
with the real operator and real confluent-kafka consumers: SCRAM-SHA-512 over TLS (a KafkaUser Secret holds
``password`` and ``sasl.jaas.config``, no username key) and mutual TLS (``user.crt``, ``user.key``, ``user.p12``,
``user.password``), each verifying the brokers against the cluster CA Secret (``ca.crt``).

kfake has no SASL or TLS, so a front plays the listener's part (``support.kafka_auth_proxy``: the TLS handshake,
client certificates against the clients CA, the SCRAM exchange checked against the user's password) and forwards
the rest to kfake; the operator (kafka-python) and the pods (librdkafka) authenticate to it for real, with what they
read from real Secrets on the real API server. With BERTH_KAFKA_BOOTSTRAP naming a real cluster these tests are
skipped: a real cluster's listeners need its own users.
"""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.certs import Pair, make_ca, make_server_cert
from support.ci import unavailable
from support.kafka_auth_proxy import KafkaAuthProxy
from support.kafka_broker import external_bootstrap
from support.kafka_fixtures import create_topic
from support.kafka_stage import KafkaStage, grant_secret_reads, kafka_fleet, operated_namespace
from support.kube import Kube, wait_until

pytestmark = [pytest.mark.kube, pytest.mark.kafka, pytest.mark.slow]

USER = "orders-app"  # a KafkaUser with authentication scram-sha-512
TLS_USER = "orders-tls"  # a KafkaUser with authentication tls
CLUSTER_CA = "my-cluster-cluster-ca-cert"
PASSWORD = "Zq8v9-strimzi-generated"


@dataclass
class Fronts:
    scram: KafkaAuthProxy
    mtls: KafkaAuthProxy


def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def client_certificate(directory: Path, ca: Pair, name: str) -> Pair:
    pair = Pair(directory / f"{name}.crt", directory / f"{name}.key")
    csr = directory / f"{name}.csr"
    openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(pair.key))
    openssl("req", "-new", "-key", str(pair.key), "-out", str(csr), "-subj", f"/O=io.strimzi/CN={name}")
    openssl(
        *("x509", "-req", "-in", str(csr), "-CA", str(ca.cert), "-CAkey", str(ca.key), "-set_serial", "42"),
        *("-days", "2", "-out", str(pair.cert)),
    )
    return pair


def secret(name: str, namespace: str, data: dict[str, bytes], labels: dict[str, str]) -> dict[str, object]:
    encoded = {key: base64.b64encode(value).decode() for key, value in data.items()}
    metadata = {"name": name, "namespace": namespace, "labels": labels}
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": metadata, "data": encoded}


@pytest.fixture(scope="module")
def strimzi_stage(
    kube: Kube,
    operator_identity: Kube,
    kafka_bootstrap: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[KafkaStage, Fronts]]:
    if external_bootstrap():
        unavailable("BERTH_KAFKA_BOOTSTRAP names a real cluster: its listeners need its own KafkaUsers")
    directory = tmp_path_factory.mktemp("strimzi")
    cluster_ca, clients_ca = make_ca(directory / "cluster", "cluster-ca"), make_ca(directory / "clients", "clients-ca")
    broker = make_server_cert(directory / "broker", cluster_ca, 1, "my-cluster-kafka")
    user = client_certificate(directory, clients_ca, TLS_USER)
    p12 = directory / "user.p12"
    openssl(
        "pkcs12",
        "-export",
        "-in",
        str(user.cert),
        "-inkey",
        str(user.key),
        "-out",
        str(p12),
        "-passout",
        "pass:p12-pass",
    )

    serving = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    serving.load_cert_chain(str(broker.cert), str(broker.key))
    mutual = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    mutual.load_cert_chain(str(broker.cert), str(broker.key))
    mutual.verify_mode = ssl.CERT_REQUIRED
    mutual.load_verify_locations(str(clients_ca.cert))
    host, port = kafka_bootstrap.split(",")[0].rsplit(":", 1)
    fronts = Fronts(
        scram=KafkaAuthProxy((host, int(port)), tls=serving, scram_users={USER: PASSWORD}).start(),
        mtls=KafkaAuthProxy((host, int(port)), tls=mutual).start(),
    )

    namespace = kube.create_namespace("strimzi-fleets")
    grant_secret_reads(kube, namespace)
    labels = {"strimzi.io/cluster": "my-cluster", "strimzi.io/kind": "KafkaUser"}
    jaas = f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{USER}" password="{PASSWORD}";'
    kube.apply(
        # What the User Operator writes for a KafkaUser with authentication scram-sha-512 ...
        secret(USER, namespace, {"password": PASSWORD.encode(), "sasl.jaas.config": jaas.encode()}, labels),
        # ... and with authentication tls (ca.crt is the clients CA there).
        secret(
            TLS_USER,
            namespace,
            {
                "ca.crt": clients_ca.cert.read_bytes(),
                "user.crt": user.cert.read_bytes(),
                "user.key": user.key.read_bytes(),
                "user.p12": p12.read_bytes(),
                "user.password": b"p12-pass",
            },
            labels,
        ),
        # What the Cluster Operator writes for the cluster CA.
        secret(CLUSTER_CA, namespace, {"ca.crt": cluster_ca.cert.read_bytes()}, {"strimzi.io/cluster": "my-cluster"}),
        secret(
            "wrong-app",
            namespace,
            {"password": b"not-it", "sasl.jaas.config": jaas.replace(PASSWORD, "not-it").encode()},
            labels,
        ),
    )
    args = [
        *("--kafka-bootstrap-servers", fronts.scram.bootstrap),
        *("--kafka-security-protocol", "SASL_SSL", "--kafka-sasl-mechanism", "SCRAM-SHA-512"),
        *("--kafka-trusted-bootstrap", fronts.mtls.bootstrap),
        *("--liveness-port", "0", "--metrics-port", "0", "--reconcile-interval-s", "1"),
    ]
    topic = create_topic(kafka_bootstrap, f"strimzi-{namespace}")
    try:
        with operated_namespace(
            kube, operator_identity, namespace, directory, args, bootstrap=kafka_bootstrap, topic=topic
        ) as stage:
            yield stage, fronts
    finally:
        fronts.scram.stop()
        fronts.mtls.stop()


def test_a_fleet_authenticates_with_a_strimzi_scram_kafkauser_secret(strimzi_stage: tuple[KafkaStage, Fronts]) -> None:
    stage, fronts = strimzi_stage
    fleet = kafka_fleet("scram", 2, "confluent-kafka", stage.topic)
    fleet["spec"]["coordinator"] = {
        "kafka": {"credentialsSecretRef": {"name": USER}, "caSecretRef": {"name": CLUSTER_CA}}
    }
    stage.apply(fleet)
    stage.settled("scram", ["scram-0", "scram-1"])
    # The operator (describes, bounds) and both pods authenticated as the KafkaUser, over TLS verified against the
    # cluster CA; the username came from the Secret's sasl.jaas.config (it has no username key).
    assert fronts.scram.authenticated.count(USER) >= 3, fronts.scram.authenticated
    env = {e["name"]: e for e in stage.get("statefulset", "scram")["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["BERTH_KAFKA_SASL_USERNAME"] == {"name": "BERTH_KAFKA_SASL_USERNAME", "value": USER}
    assert env["BERTH_KAFKA_SASL_PASSWORD"]["valueFrom"]["secretKeyRef"] == {"name": USER, "key": "password"}
    assert env["BERTH_KAFKA_SSL_CA_FILE"]["value"] == "/etc/berth/kafka/ca/ca.crt"
    said = json.dumps(
        [
            stage.status("scram"),
            [e["message"] for e in stage.kube.events(stage.namespace, kind="ConsumerFleet", name="scram")],
        ]
    )
    assert PASSWORD not in said

    # The wrong password is refused by the listener: a condition, and nothing created for that fleet.
    wrong = kafka_fleet("wrong", 1, "confluent-kafka", stage.topic)
    wrong["spec"]["coordinator"] = {
        "kafka": {"credentialsSecretRef": {"name": "wrong-app"}, "caSecretRef": {"name": CLUSTER_CA}}
    }
    stage.apply(wrong)
    refused = wait_until(
        lambda: (c := stage.condition("wrong", "CoordinatorReachable")).get("status") == "False" and c,
        "the wrong credentials refused",
        timeout_s=90,
    )
    # kafka-python retries a refused authentication until its bootstrap times out: Unreachable, naming whose
    # credentials were tried.
    assert refused["reason"] in ("AuthenticationFailed", "Unreachable")
    assert "the credentials in Secret strimzi-fleets/wrong-app" in refused["message"]
    assert any("wrong password" in r for r in fronts.scram.refused)
    assert stage.get("statefulset", "wrong") is None


def test_a_fleet_authenticates_with_a_strimzi_tls_kafkauser_secret(strimzi_stage: tuple[KafkaStage, Fronts]) -> None:
    stage, fronts = strimzi_stage
    fleet = kafka_fleet("mtls", 2, "confluent-kafka", stage.topic)
    fleet["spec"]["coordinator"] = {
        "kafka": {
            "bootstrapServers": fronts.mtls.bootstrap,
            "securityProtocol": "SSL",
            "clientCertificateSecretRef": {"name": TLS_USER},
            "caSecretRef": {"name": CLUSTER_CA},
        }
    }
    stage.apply(fleet)
    stage.settled("mtls", ["mtls-0", "mtls-1"])
    # Every connection presented the KafkaUser's certificate (the operator's and the pods').
    assert fronts.mtls.authenticated and set(fronts.mtls.authenticated) == {f"CN={TLS_USER}"}
    assert fronts.mtls.refused == []
    spec = stage.get("statefulset", "mtls")["spec"]["template"]["spec"]
    env = {e["name"]: e for e in spec["containers"][0]["env"]}
    assert env["BERTH_KAFKA_SSL_CERT_FILE"]["value"] == "/etc/berth/kafka/client/user.crt"
    assert env["BERTH_KAFKA_SSL_KEYSTORE_PASSWORD"]["valueFrom"]["secretKeyRef"]["key"] == "user.password"
    assert {"name": "berth-kafka-client", "secret": {"secretName": TLS_USER, "defaultMode": 0o444}} in spec["volumes"]
