"""An mTLS fleet from the shipped example on real pods: librdkafka reads the client certificate the operator mounts,
as UID 65534, and consumes over mutual TLS; a pod that cannot read its key is named in a Warning with the reason.

The issue this closes (30): the client-certificate Secret was mounted 0400 (root's) with no ``fsGroup``, the
example's pods run as UID 65534, and librdkafka failed ``ssl.certificate.location`` in a crash loop that the fleet
only called ``PodsNotReady``. The control-plane tier could not see it: the fake kubelet has no file modes.

What runs: kfake and a Strimzi-style listener in front of it (``support.kafka_auth_proxy``: TLS with a server
certificate from the cluster CA, client certificates required from the clients CA) in the node's network
namespace, each a process this module starts and ends; the example's pods and the operator on the node's network
as tests/node/test_kafka_fleet.py explains (kfake advertises 127.0.0.1). The proofs are read where they are true:
the consumer process's UID and groups in ``/proc`` of this machine, the mounted key's mode through that process's
root, the group's committed offsets from the broker, the listener's record of who presented which certificate.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pytest
import yaml
from support.certs import Pair, make_ca, make_server_cert
from support.kafka_broker import BROKER_CONFIGS, find_kfake
from support.kafka_stage import grant_secret_reads
from support.kube import wait_until
from support.kube_fixtures import unavailable
from support.net import free_port
from support.node import Node, support_env
from support.node_network import run
from support.node_stage import CHART, EXAMPLES, FleetStage, Release

pytestmark = [pytest.mark.node, pytest.mark.kafka, pytest.mark.timeout(900)]

ON_NODE_NETWORK = {"hostNetwork": True, "dnsPolicy": "ClusterFirstWithHostNet"}
TLS_USER = "orders-tls"  # a KafkaUser with authentication tls
CLUSTER_CA = "my-cluster-cluster-ca-cert"
PARTITIONS = 4
MESSAGES = 40
UID = 65534  # the example's securityContext.runAsUser


@dataclass
class Started:
    """A process this module started in the node's network namespace, with its output in a file."""

    process: subprocess.Popen[bytes]
    log: Path
    out: IO[bytes]

    def said(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.out.close()


def start_inside(node: Node, log: Path, argv: list[str], ready: str, timeout_s: float = 30) -> Started:
    out = open(log, "wb")  # noqa: SIM115 - the process writes it until stop()
    process = subprocess.Popen(node.network.inside(*argv), stdout=out, stderr=subprocess.STDOUT, env=support_env())
    started = Started(process, log, out)
    deadline = time.monotonic() + timeout_s
    while ready not in started.said():
        if process.poll() is not None or time.monotonic() > deadline:
            started.stop()
            raise RuntimeError(f"{argv[0]} did not say {ready!r}:\n{started.said()[-2000:]}")
        time.sleep(0.1)
    return started


@dataclass
class MtlsWorld:
    bootstrap: str  # kfake, plaintext: the operator's default connection
    front: str  # the mutual-TLS listener fleets name
    listener: Started
    secrets: list[dict[str, Any]]


def client_certificate(directory: Path, ca: Pair, name: str) -> Pair:
    pair = Pair(directory / f"{name}.crt", directory / f"{name}.key")
    csr = directory / f"{name}.csr"
    for argv in (
        ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(pair.key)],
        ["req", "-new", "-key", str(pair.key), "-out", str(csr), "-subj", f"/O=io.strimzi/CN={name}"],
        ["x509", "-req", "-in", str(csr), "-CA", str(ca.cert), "-CAkey", str(ca.key), "-set_serial", "7", "-days",
         "2", "-out", str(pair.cert)],
    ):  # fmt: skip
        subprocess.run(["openssl", *argv], check=True, capture_output=True)
    return pair


def secret(name: str, data: dict[str, bytes]) -> dict[str, Any]:
    encoded = {key: base64.b64encode(value).decode() for key, value in data.items()}
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": {"name": name}, "data": encoded}


@pytest.fixture(scope="module")
def mtls_world(node: Node, berth_release: Release, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MtlsWorld]:
    """kfake and the mutual-TLS listener on the node's network, the operator there too (one replica), trusting the
    listener; everything undone afterwards."""
    kfake = find_kfake()
    if kfake is None:
        unavailable("the node's mTLS fleet needs kfake (../shared/tools/kafka/bin/kfake beside the repository)")
    assert kfake is not None
    directory = tmp_path_factory.mktemp("mtls")
    cluster_ca, clients_ca = make_ca(directory / "cluster", "cluster-ca"), make_ca(directory / "clients", "clients-ca")
    broker = make_server_cert(directory / "broker", cluster_ca, 1, "my-cluster-kafka")
    user = client_certificate(directory, clients_ca, TLS_USER)
    # What the User Operator writes for a KafkaUser with authentication tls, and the Cluster Operator for its CA.
    secrets = [
        secret(
            TLS_USER,
            {
                "ca.crt": clients_ca.cert.read_bytes(),
                "user.crt": user.cert.read_bytes(),
                "user.key": user.key.read_bytes(),
            },
        ),
        secret(CLUSTER_CA, {"ca.crt": cluster_ca.cert.read_bytes()}),
    ]
    port = free_port()
    configs = [arg for config in BROKER_CONFIGS for arg in ("-c", config)]
    broker_process = start_inside(
        node, directory / "kfake.log", [str(kfake), "-port", str(port), "-log-level", "warn", *configs],
        f"listening 127.0.0.1:{port}",
    )  # fmt: skip
    bootstrap = f"127.0.0.1:{port}"
    listener = start_inside(
        node,
        directory / "listener.log",
        [sys.executable, "-m", "support.kafka_auth_proxy", "--upstream", bootstrap, "--cert", str(broker.cert),
         "--key", str(broker.key), "--client-ca", str(clients_ca.cert)],
        "listening 127.0.0.1:",
    )  # fmt: skip
    front = listener.said().split("listening ", 1)[1].split()[0]
    kube = berth_release.kube
    operator = ["-n", "berth", "deployment/berth-operator"]
    kube.helm("upgrade", "berth", str(CHART), "-n", "berth", "--reuse-values",
              "--set", f"operator.kafka.bootstrapServers={bootstrap}",
              "--set", f"operator.kafka.trustedBootstrap={{{front}}}", "--set", "operator.replicas=1")  # fmt: skip
    kube.kubectl(
        "patch", *operator, "--type=merge", "-p", json.dumps({"spec": {"template": {"spec": ON_NODE_NETWORK}}})
    )
    berth_release.rollout()
    try:
        yield MtlsWorld(bootstrap, front, listener, secrets)
    finally:
        kube.helm("upgrade", "berth", str(CHART), "-n", "berth", "--reuse-values",
                  "--set", "operator.kafka.bootstrapServers=", "--set-json", "operator.kafka.trustedBootstrap=[]",
                  "--set", "operator.replicas=2")  # fmt: skip
        back = {"spec": {"template": {"spec": {"hostNetwork": None, "dnsPolicy": "ClusterFirst"}}}}
        kube.kubectl("patch", *operator, "--type=merge", "-p", json.dumps(back))
        berth_release.rollout()
        listener.stop()
        broker_process.stop()


def mtls_fleet(stage: FleetStage, world: MtlsWorld, node: Node) -> tuple[dict[str, Any], str]:
    """The shipped confluent-kafka example as an mTLS fleet of its own in ``stage``'s namespace, its Secrets there
    and readable by the operator; its topic."""
    for found in world.secrets:
        stage.kube.apply(found, namespace=stage.namespace)
    grant_secret_reads(stage.kube, stage.namespace)
    topic = f"orders-{stage.name}"
    create = (
        f"from support.kafka_fixtures import create_topic; create_topic({world.bootstrap!r}, {topic!r}, {PARTITIONS})"
    )
    node.run_inside(sys.executable, "-c", create)
    fleet: dict[str, Any] = yaml.safe_load((EXAMPLES / "confluent-kafka-orders.yaml").read_text())
    fleet["metadata"]["name"] = stage.name
    fleet["spec"] |= {"groupId": stage.name, "replicas": 2}
    fleet["spec"]["coordinator"] = {
        "kafka": {
            "bootstrapServers": world.front,
            "securityProtocol": "SSL",
            "clientCertificateSecretRef": {"name": TLS_USER},
            "caSecretRef": {"name": CLUSTER_CA},
        }
    }
    fleet["spec"]["template"]["spec"] |= ON_NODE_NETWORK
    fleet["spec"]["template"]["spec"]["containers"][0]["env"] = [{"name": "KAFKA_TOPIC", "value": topic}]
    return fleet, topic


def waited(stage: FleetStage, check: Any, what: str, timeout_s: float) -> Any:
    """``wait_until``, with the fleet's conditions and its pods' container statuses in the failure."""
    try:
        return wait_until(check, what, timeout_s=timeout_s, every_s=1)
    except AssertionError as error:
        pods = stage.kube.get("pods", namespace=stage.namespace, selector=f"berth.dev/fleet={stage.name}")["items"]
        seen = {p["metadata"]["name"]: (p.get("status") or {}).get("containerStatuses") for p in pods}
        raise AssertionError(f"{error}\nconditions: {stage.status().get('conditions')}\npods: {seen}") from None


def committed(node: Node, bootstrap: str, group: str) -> int:
    """The group's committed offsets, summed over its partitions, as the broker keeps them."""
    read = (
        "import json; from kafka.admin import KafkaAdminClient; "
        f"a = KafkaAdminClient(bootstrap_servers=[{bootstrap!r}]); "
        f"found = a.list_group_offsets({{{group!r}: None}}).get({group!r}) or {{}}; "
        "print(json.dumps(sum(m.offset for m in found.values() if m.offset > 0)))"
    )
    return int(json.loads(node.run_inside(sys.executable, "-c", read).stdout))


def process_of(node: Node, pod: dict[str, Any]) -> int:
    """The PID, on this machine, of the pod's consumer container (containerd's task of its container id)."""
    container = pod["status"]["containerStatuses"][0]["containerID"].split("://", 1)[1]
    tasks = run("ctr", "--address", str(node.socket), "-n", "k8s.io", "tasks", "ls").stdout.splitlines()
    return next(int(line.split()[1]) for line in tasks if line.startswith(container))


def identity(pid: int) -> tuple[int, set[int]]:
    """The process's effective UID and its supplementary groups, from /proc."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["Uid"].split()[1]), {int(g) for g in fields["Groups"].split()}


def test_the_shipped_mtls_example_consumes_as_uid_65534_reading_the_mounted_key(
    stage: FleetStage, node: Node, mtls_world: MtlsWorld
) -> None:
    fleet, topic = mtls_fleet(stage, mtls_world, node)
    assert fleet["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == UID  # the example as shipped
    stage.kube.apply(fleet, namespace=stage.namespace)
    ids = [f"{stage.name}-0", f"{stage.name}-1"]
    waited(
        stage,
        lambda: (
            stage.condition("Ready").get("status") == "True"
            and (stage.status().get("group") or {}).get("members") == ids
        ),
        "two mTLS consumer pods in the group",
        timeout_s=300,
    )
    produce = (
        "from kafka import KafkaProducer; "
        f"p = KafkaProducer(bootstrap_servers=[{mtls_world.bootstrap!r}]); "
        f"[p.send({topic!r}, b'order-%d' % i, partition=i % {PARTITIONS}) for i in range({MESSAGES})]; p.flush()"
    )
    node.run_inside(sys.executable, "-c", produce)
    wait_until(
        lambda: committed(node, mtls_world.bootstrap, stage.name) == MESSAGES,
        f"all {MESSAGES} messages consumed and committed",
        timeout_s=120,
        every_s=1,
    )

    # The consumers are UID 65534 with no supplementary group; the key they read is mode 0444 and root's.
    for name in ids:
        pid = process_of(node, stage.pod(int(name.rsplit("-", 1)[1])))
        uid, groups = identity(pid)
        assert uid == UID, f"{name} runs as {uid}"
        key = os.stat(f"/proc/{pid}/root/etc/berth/kafka/client/user.key")
        assert (key.st_uid, oct(key.st_mode & 0o777)) == (0, oct(0o444)), (name, key, groups)
    # Every connection to the listener presented the KafkaUser's certificate: the operator's and the consumers'.
    said = mtls_world.listener.said()
    assert f"authenticated CN={TLS_USER}" in said and "refused" not in said, said[-2000:]
    assert not stage.messages("CredentialsUnusable")


def test_a_consumer_that_cannot_read_its_key_is_named_in_a_warning_with_librdkafkas_reason(
    stage: FleetStage, node: Node, mtls_world: MtlsWorld
) -> None:
    """The failure issue 30 found, as a tenant can still make it: the same Secret mounted by the template itself the
    way the operator used to (0400, root's), and the example's consumer pointed at it. The operator recognises
    librdkafka's words in the termination message the kubelet kept (``FallbackToLogsOnError``, set by the
    operator), names the pod and says why."""
    fleet, _ = mtls_fleet(stage, mtls_world, node)
    fleet["spec"]["replicas"] = 1
    pod_spec = fleet["spec"]["template"]["spec"]
    pod_spec["volumes"] = [{"name": "own-client", "secret": {"secretName": TLS_USER, "defaultMode": 0o400}}]
    container = pod_spec["containers"][0]
    container["volumeMounts"] = [{"name": "own-client", "mountPath": "/etc/tenant/client", "readOnly": True}]
    pointed = (
        "import os, runpy; "
        "os.environ['BERTH_KAFKA_SSL_CERT_FILE'] = '/etc/tenant/client/user.crt'; "
        "os.environ['BERTH_KAFKA_SSL_KEY_FILE'] = '/etc/tenant/client/user.key'; "
        "runpy.run_path('/app/confluent_kafka_consumer.py', run_name='__main__')"
    )
    container["args"] = ["python", "-c", pointed]
    stage.kube.apply(fleet, namespace=stage.namespace)

    pod = f"{stage.name}-0"
    ready = waited(
        stage,
        lambda: (c := stage.condition("Ready")).get("reason") == "CredentialsUnusable" and c,
        "Ready=False CredentialsUnusable",
        timeout_s=240,
    )
    assert ready["status"] == "False"
    assert f"pod {pod} exits on the Kafka credentials" in ready["message"]
    assert "ssl.certificate.location failed" in ready["message"]
    warnings = wait_until(lambda: stage.messages("CredentialsUnusable"), "the Warning Event", timeout_s=60)
    assert any(pod in message and "ssl.certificate.location failed" in message for message in warnings), warnings
    events = stage.kube.events(stage.namespace, kind="ConsumerFleet", name=stage.name)
    assert {e["type"] for e in events if e["reason"] == "CredentialsUnusable"} == {"Warning"}
